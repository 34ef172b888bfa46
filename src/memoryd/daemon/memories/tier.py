"""The durable memory tier's changes on top of `state.TierState`: memory files written, moved and
restored, pending writes, and the appliers of recorded events. Import contract: core, connections,
credentials, scopes, and the tier's after_start, chain, gates, records, state and recovery; no zmq, no msgpack."""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.credentials.detector import find_credentials
from memoryd.daemon.credentials.patterns import compile_all as compile_patterns
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.scopes import unique
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.memories import after_start as memory_verify
from memoryd.daemon.memories import recovery as memory_recovery
from memoryd.daemon.memories.chain import Draft
from memoryd.daemon.memories.gates import scan_taint
from memoryd.daemon.memories.records import (
    HANDOFF,
    HANDOFF_SOURCE,
    Memory,
    PendingWrite,
    encode_pending,
    render_memory,
    sha256_hex,
)
from memoryd.daemon.memories.state import TierState
from memoryd.errors import InvalidParams, ResourceState, StorageError

log = logging.getLogger("memoryd.daemon")
ANCHOR_SLICE = 100  # memories the anchor index takes in per idle turn (short: docs/benchmark.md)


def attach(core: Core) -> MemoryTier:
    """Join the memory tier to `core`: replay, recovery and every recorded event reach it."""
    core.memories = tier = MemoryTier(core)
    core.extensions.append(tier)
    core.loaders.append(tier)  # its start and the check after it (`domain.TierLoader`)
    return tier


class MemoryTier(TierState):
    patterns_compiled = False  # the gates' regexes (`compile_patterns`), after start

    def known_projects(self) -> dict[str, str | None]:
        return self.index.projects

    def similar_live(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        return self.index.text.similar(tokens, threshold)

    def similar_removed(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        return self.tomb_index.text.similar(tokens, threshold)

    def new_id(self) -> str:
        return idents.mint_ulid(self.core.clock())

    def origin_of(self, identity: dict[str, Any], session: Session | None) -> dict[str, Any]:
        """Where a record comes from: the session's identity plus the worktree's HEAD (cached)."""
        def pick(key: str) -> Any:
            return value if (value := getattr(session, key, None)) is not None else identity.get(key)
        worktree = pick("worktree")
        branch, commit = self.probe.head(worktree)
        return {"worktree": worktree, "repo": pick("repo"), "project": pick("project"),
                "branch": branch, "commit": commit, "client": pick("client")}

    # -- file-backed changes (the caller records the event that names the returned sha) ----------

    def _write(self, path: Path, data: bytes, memory_id: str | None = None, fresh: bool = False) -> str:
        """Stage `data` for `path` (durable at the pass's group commit; `fresh`: a name just minted); its sha256."""
        self.core.files.write_file(path, data, fresh=fresh)
        sha = sha256_hex(data)
        if memory_id is not None:  # the caller logs `sha`, so logged_sha will describe the file
            self.file_sha.pop(memory_id, None)
            self.file_stat.pop(memory_id, None)
            self._unstatted.add(memory_id)
            self.cache_stale = True
        return sha

    def after_sync(self) -> None:
        """After each pass's group commit: the stat of the files just published, for the parse cache."""
        for memory_id in self._unstatted:
            with suppress(OSError):
                stat = os.lstat(self.path("t" if memory_id in self.tombstones else "m", memory_id))
                self.file_stat[memory_id] = (stat.st_size, stat.st_mtime_ns)
        self._unstatted.clear()

    def new_memory(self, draft: Draft, origin: dict[str, Any], session_id: str, anchor: str | None = None) -> Memory:
        """A record of `draft` with a new id, stamped now and scanned for taint (`anchor`: a handoff's session)."""
        now, taint = self.core.now(), scan_taint(draft.content)
        return Memory(id=self.new_id(), content=draft.content, scopes=tuple(draft.scopes), category=draft.category,
                      confidence=draft.confidence, source=draft.source, created=now, updated=now, session_id=session_id,
                      origin=origin, links=tuple(draft.links), tainted=bool(taint), taint=tuple(taint),
                      anchor_session_id=anchor, pinned=draft.pinned)

    def commit(self, memory: Memory, terms: list[str] | None = None, replaces: Memory | None = None) -> str:
        """Write and index a live memory: a new one (id from `new_id`) or one that `replaces` the record (update,
        verify; rendered first: a refusal changes nothing); the file's sha256. `terms`: its `text.analyze`, if known."""
        sha = self._write(self.live_path(memory.id), render_memory(memory), memory.id, fresh=replaces is None)
        if replaces is not None:
            self.index.remove(replaces)
        self.live[memory.id] = memory
        self.index.add(memory, terms=terms)
        return sha

    def bury(self, memory: Memory, reason: str) -> str:
        return self._move(memory, replace(memory, removed_at=self.core.now(), removed_reason=reason), "m", "t")

    def unbury(self, tomb: Memory) -> tuple[Memory, str]:
        memory = replace(tomb, removed_at=None, removed_reason=None, updated=self.next_updated(tomb.updated))
        return memory, self._move(tomb, memory, "t", "m")

    def _move(self, old: Memory, new: Memory, source: str, target: str) -> str:
        """Move a record between live (m) and tombstone (t) files; staged deletes follow writes: no crash loses both."""
        sha = self._write(self.path(target, new.id), render_memory(new), new.id)
        self.core.files.delete_file(self.path(source, old.id))
        index, records = self.tables(source)
        index.remove(old)
        del records[old.id]
        index, records = self.tables(target)
        records[new.id] = new
        index.add(new)
        return sha

    def next_updated(self, previous: str) -> str:
        """Now, but strictly after `previous`, so compare-and-set on `updated` is never ambiguous."""
        from memoryd.daemon.storage.clock import iso, parse_iso

        now = self.core.clock()
        if self.core.now() <= previous:
            with suppress(ValueError):  # not a stamp (a hand edit: `zzzz` sorts after every one): now is after it
                now = parse_iso(previous) + 0.001
        return iso(now)

    def capture_handoff(self, session: Session, identity: dict[str, Any], text: str,
                        scopes: list[str]) -> tuple[str, bool]:
        """Store `text` as the session's handoff memory; (id, deduped: the same content is a live
        handoff already). Secrets → InvalidParams; the other gates do not apply."""
        if markers := find_credentials(text):
            kinds = ", ".join(sorted({m["kind"] for m in markers}))
            raise InvalidParams("handoff", f"holds a secret ({kinds}); remove it before finishing")
        if (existing := self.index.handoffs.get(sha256_hex(text.encode()))) is not None:
            self.core.record("write", session, status="deduped", gate="handoff", memory_id=existing)
            return existing, True
        draft = Draft(content=text, scopes=unique(scopes), category=HANDOFF, confidence="high", source=HANDOFF_SOURCE)
        memory = self.new_memory(draft, self.origin_of(identity, session), session.id, anchor=session.id)
        sha = self.commit(memory)
        self.core.record("write", session, status="committed", gate="handoff", memory_id=memory.id, sha=sha)
        return memory.id, False

    def next_pending_id(self) -> str:
        return f"pending-{self.pending_seq + 1}"

    def stage(self, pending: PendingWrite) -> None:
        self.pending[pending.id] = pending
        self.save_pending()

    def drop_pending(self, pending_id: str) -> None:
        self.pending.pop(pending_id, None)
        self.save_pending()

    def save_pending(self) -> None:
        """Persist the snapshot atomically (durable with the pass's group commit)."""
        self._write(self.snapshot_path, encode_pending(list(self.pending.values())))

    def owned_pending(self, pending_id: str, session: Session) -> PendingWrite:
        """The caller's live pending write, or the typed state error that says why not."""
        pending = self.pending.get(pending_id)
        owner = pending.session_id if pending is not None else self.expired.get(pending_id)
        if owner is None:
            raise ResourceState("unknown_pending", pending_id)
        if owner != session.id:
            raise ResourceState("foreign_pending", pending_id,
                                f"pending write {pending_id} belongs to session {owner}, not {session.id}")
        if pending is None or pending.expires_at <= self.core.clock():
            raise ResourceState("expired_pending", pending_id)
        return pending

    def pending_pass(self, now: float) -> list[str]:
        """Expire pending writes past their TTL, logging each (a promote's episode is kept). The
        reaper runs this after every pass's sync, so it also does the tier's `after_sync`."""
        self.after_sync()
        due = [p for p in self.pending.values() if p.expires_at <= now]
        for pending in due:
            del self.pending[pending.id]
            self.core.record("pending_expired", None, session=pending.session_id, pending_id=pending.id,
                             episode_id=pending.source_episode_id)
        if due:
            self.save_pending()
        return [p.id for p in due]

    def next_pending_expiry(self) -> float | None:
        return min((p.expires_at for p in self.pending.values()), default=None)

    def apply(self, event: dict[str, Any]) -> None:
        handler = _APPLIERS.get(event["kind"])
        if handler is not None:
            handler(self, event)

    def _named(self, event: dict[str, Any], state: str) -> None:
        if event.get("memory_id") and event.get("sha"):
            self.logged_sha[event["memory_id"]] = event["sha"]
            self.logged_state[event["memory_id"]] = state

    def _on_write(self, event: dict[str, Any]) -> None:  # write, write_confirm, write_cancel
        kind, status, pending_id = event["kind"], event.get("status"), event.get("pending_id", "")
        if status == "committed":
            self._named(event, "live")
        if kind == "write" and status == "pending" and pending_id:
            self.pending_logged.add(pending_id)
            self.pending_seq = max(self.pending_seq, memory_recovery.pending_n(pending_id))
        elif kind == "write_cancel" or (kind == "write_confirm" and status == "committed"):
            self.pending_resolved.add(pending_id)

    def _on_pending_expired(self, event: dict[str, Any]) -> None:
        self.expired[event.get("pending_id", "")] = event.get("session", "")
        self.pending_expired_total += 1

    def _on_change(self, event: dict[str, Any]) -> None:
        if event.get("status") in ("updated", "verified", "restored"):
            self._named(event, "live")

    def _on_remove(self, event: dict[str, Any]) -> None:
        self._named(event, "tomb")

    def _on_retrieval(self, event: dict[str, Any]) -> None:
        ids = event.get("ids") or event.get("injected") or ([event["memory_id"]] if event.get("memory_id") else [])
        self.retrievals.update(ids)

    def _on_daemon_stop(self, event: dict[str, Any]) -> None:
        """A clean stop (not its replay): save the vectors and, when stale, the parse cache."""
        self.save_built_caches()  # the stop's checkpoint may name the gen of the helper's cache
        if self.semantic.dirty:
            self.semantic.save()
        self.semantic.close()
        if self.loaded and self.cache_stale:
            self.after_sync()
            memory_recovery.save_cache(self)
            self.cache_stale = False

    def _on_reaper(self, event: dict[str, Any]) -> None:
        if event["kind"] == "reaper_run":
            self.reaper_last_run = event["ts"]
        else:
            self.episodes_pruned += len(event.get("episode_ids") or ())

    # -- the checkpoint (daemon/process/checkpoint.py): the log-derived fields, saved and restored --

    def log_state(self) -> dict[str, Any]:
        # logged_sha and logged_state share keys and order (`_named`, sync): columns; a KeyError means no checkpoint.
        return {"logged_ids": list(self.logged_sha), "logged_shas": list(self.logged_sha.values()),
                "logged_states": "".join(_STATE_CODES[self.logged_state[i]] for i in self.logged_sha),
                "retrievals": dict(self.retrievals), "pending_seq": self.pending_seq,
                "pending_logged": sorted(self.pending_logged), "pending_resolved": sorted(self.pending_resolved),
                "pending_expired_total": self.pending_expired_total, "reaper_last_run": self.reaper_last_run,
                "episodes_pruned": self.episodes_pruned, "expired": self.expired,
                "cache_gen": None if self.cache_stale else self.cache_gen}

    def restore_log_state(self, data: dict[str, Any]) -> Callable[[], None]:
        """Decode everything first (a bad value raises before anything changes); the function returned assigns it."""
        ids, shas, states = data["logged_ids"], data["logged_shas"], data["logged_states"]
        if not (len(ids) == len(shas) == len(states) and idents.all_of_type(ids, str)
                and idents.all_of_type(shas, str)):
            raise ValueError("the logged memory columns do not match")
        ids = list(map(sys.intern, ids))  # shared with the records and the search index
        fields = {"logged_sha": dict(zip(ids, shas)), "logged_state": dict(zip(ids, map(_STATES.__getitem__, states))),
                  "retrievals": Counter({str(k): int(v) for k, v in data["retrievals"].items()}),
                  "pending_seq": int(data["pending_seq"]), "pending_logged": set(data["pending_logged"]),
                  "pending_resolved": set(data["pending_resolved"]),
                  "pending_expired_total": int(data["pending_expired_total"]), "expired": dict(data["expired"]),
                  "reaper_last_run": data["reaper_last_run"], "episodes_pruned": int(data["episodes_pruned"]),
                  "trusted_gen": data["cache_gen"] if type(data["cache_gen"]) is str else None}
        return lambda: self.__dict__.update(fields)

    def prefetch(self) -> None:  # before the log replays
        memory_recovery.prefetch(self)

    def load(self) -> None:
        memory_recovery.load(self)

    def save_built_caches(self) -> None:
        """Write the caches this start built (`save_after_start`), once; a full disk only slows the next start."""
        save, self.save_after_start = self.save_after_start, None
        if save is not None:
            try:
                save()
            except StorageError as exc:
                log.warning("the memory caches could not be written: %s", exc.message)

    def reconcile(self) -> dict[str, Any]:
        return memory_recovery.reconcile(self)

    def verify_some(self, budget: int | None) -> int:
        """The idle turn's work after start, ending with `after_start.verify_some`. The first also
        compiles the gate patterns: not at start, nor in the first write."""
        if not self.patterns_compiled:
            compile_patterns()
            self.patterns_compiled = True
        self.index.finish_text()
        self.save_built_caches()
        if self.core.config.search_by_meaning:  # its thread starts on the first idle turn, then vectors come in
            live = self.live
            self.semantic.start(live.values())
            self.semantic.pump(lambda memory_id: m.updated if (m := live.get(memory_id)) is not None else None)
        self.index.anchors.build_some(self.live, ANCHOR_SLICE)
        return memory_verify.verify_some(self, budget)

    def late_finds(self) -> dict[str, int]:
        """What `verify_some` found that a start would have (`files_checked`); forgotten once told."""
        told = {"memories_parsed": len(self.found_late), "memories_dropped": self.dropped_late}
        self.found_late, self.dropped_late = [], 0
        return told


# A record's logged state in the checkpoint: one character each; one shared string each in memory.
_STATE_CODES = {"live": "l", "tomb": "t"}
_STATES = {"l": "live", "t": "tomb"}


_APPLIERS = {
    "write": MemoryTier._on_write, "write_confirm": MemoryTier._on_write, "write_cancel": MemoryTier._on_write,
    "update": MemoryTier._on_change, "verify": MemoryTier._on_change, "restore": MemoryTier._on_change,
    # handoff_converted: a captured handoff became a session note (sessions/records)
    "remove": MemoryTier._on_remove, "handoff_converted": MemoryTier._on_remove,
    "search": MemoryTier._on_retrieval, "show": MemoryTier._on_retrieval, "inject": MemoryTier._on_retrieval,
    "reaper_run": MemoryTier._on_reaper, "episode_prune": MemoryTier._on_reaper,
    "pending_expired": MemoryTier._on_pending_expired, "daemon_stop": MemoryTier._on_daemon_stop,
}
