"""The domain state opened from disk, rebuilt after a failed commit, checked after start (docs/storage.md).
Import contract: no zmq, no msgpack; the tiers join through `extensions` and `loaders`, never by name."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.domain import DomainState
from memoryd.daemon.identity.session_table import Conn, Session
from memoryd.daemon.storage import nofollow
from memoryd.daemon.storage.eventlog import Resume
from memoryd.errors import StorageError, StoreDamaged

log = logging.getLogger("memoryd.daemon")

PROGRESS_EVERY = 4096  # items between two progress calls
STORE_DIRS = ("memories", "tombstones", "episodes", "events", "state", "sessions")
# What survives `reload`: runtime facts the log does not hold.
_RUNTIME_FIELDS = ("started", "stats", "suspended", "reaper_stats", "next_ttl_check", "verified_at",
                   "torn_bytes_truncated", "bad_files", "attach_tiers", "aborts", "low_space", "progress",
                   "temp_sweep_ids", "observers")
# What a session keeps across `reload`: connection ownership, disabled scopes, the hooks' state.
_SESSION_RUNTIME = ("conn", "disabled_scopes", "client_session", "last_words", "injected", "pointed", "auto_chars",
                    "receipts", "tool_calls", "injected_at")


@dataclass
class Call:
    """What a tool handler knows about its caller."""

    core: Core
    conn: Conn
    session: Session
    req: str  # "<conn>:<request id>": lets a retried write be recognised after a restart

    @property
    def identity(self) -> dict[str, Any]:
        return self.conn.identity


class Core(DomainState):
    attach_tiers: Callable[[Core], None] | None = None  # set at start-up: attaches the tiers again in `reload`

    def open(self, resume: Resume | None = None) -> dict[str, Any]:
        """Recovery at start (only the log's tail after `resume`); returns the `recovery` counts."""
        for sub in STORE_DIRS:
            nofollow.ensure_store_dir(self.root / sub)
        if resume is None:  # no checkpoint: record files may be parsed in helpers while the log replays
            self.run_ids_from = self.log.last_seq_of("daemon_start")
            for loader in self.loaders:
                loader.prefetch()
        try:
            torn = self.log.replay(self._replay, resume)
        except OSError as exc:  # a torn tail on a segment we may not shrink (chattr +a, read-only)
            raise StoreDamaged(f"the event log cannot be repaired ({exc}); make {exc.filename or self.log.dir} "
                               "writable, then start again", str(exc.filename or self.log.dir)) from exc
        self._mark = self.log.checkpoint()
        if resume is None:  # the episode folders' own: once the prefetch helper has listed them
            temp_files: dict[str, Any] = self.files.recover_temp_files(self.last_run_ids, not self.journal.prefetching)
        else:  # after a clean stop no temp file of ours is left: a stray one can wait for the loop
            temp_files, self.temp_sweep_ids = {"temp_files_swept": "after start"}, self.last_run_ids
        self.torn_bytes_truncated = torn
        report = {**temp_files, "torn_bytes_truncated": torn, "log_quarantined": len(self.log.quarantined),
                  "replayed_from_seq": resume.seq if resume is not None else 0,
                  **self._load_files(resumed=resume is not None)}
        for key, count in report.pop("session_temp_files", {}).items():
            report[key] += count
        grace_until = self.clock() + 3 * self.config.heartbeat_seconds
        self.suspended.update(dict.fromkeys((s.id for s in self.sessions.open_sessions()), grace_until))
        self.trim_feed()  # replay filled it with history no parked call waits for
        try:
            self.record("daemon_start", pid=os.getpid(), suspended_sessions=len(self.suspended))
            self.record("recovery", **report)
            self.sync()
        except StorageError as exc:
            self.note_storage_error(exc)
            log.error("the store is not writable at start (%s); serving reads, refusing writes", exc.message)
        return report

    def _replay(self, event: dict[str, Any]) -> None:
        if not event["seq"] % PROGRESS_EVERY:
            self.progress("replaying the event log", event["seq"], 0)
        if event["seq"] >= self.run_ids_from:  # before the last daemon_start: reset there anyway
            self._note_run_ids(event)
        self.note_session_id(event.get("session"))
        self.apply(event)

    def reload(self) -> None:
        """Rebuild the state from the durable log and files in place, keeping the runtime facts."""
        kept = {name: getattr(self, name) for name in _RUNTIME_FIELDS}
        feed_end, old_sessions, files = self.feed_end, self.sessions.sessions, self.files
        Core.__init__(self, self.root, self.config, self.clock, files)
        self.__dict__.update(kept)
        if self.attach_tiers is not None:
            self.attach_tiers(self)
        self.log.replay(self._replay)
        self._load_files()
        for session in self.sessions.sessions.values():
            old = old_sessions.get(session.id)
            for name in _SESSION_RUNTIME if old is not None else ():
                setattr(session, name, getattr(old, name))
        self.suspended = {sid: t for sid, t in self.suspended.items() if sid in self.sessions.open_ids}
        self.episode_feed, self.feed_base = [], feed_end  # parked calls' cursors stay valid
        self._mark = self.log.checkpoint()
        log.warning("state rebuilt from disk after a failed commit (%d events)", self.log.seq)

    def _load_files(self, resumed: bool = False) -> dict[str, Any]:
        """Index the record files after replay; returns the reconcile counts."""
        self.files.strict = False
        try:
            for extension in self.extensions:  # first: meanwhile a prefetch helper parses episodes
                try:
                    extension.load()
                except StorageError as exc:  # only its parse cache could not be staged
                    log.warning("a cache could not be written: %s", exc.message)
            report: dict[str, Any] = {}
            if self.journal.prefetching:  # it listed the episode folders: settle the temp files it saw there
                found = self.journal.finish_prefetch()
                report["session_temp_files"] = self.files.recover_temp_files(self.last_run_ids, found is None, found)
            self.journal.load(self.progress, listed_at=self.log.seq if resumed else None)
            report.update(self._reconcile_episodes())
            for extension in self.extensions:
                report.update(extension.reconcile())
        finally:
            self.files.strict = True
        return report

    def verify_files(self, budget: int | None) -> int:
        """Check up to `budget` (None: all) cache-loaded records against their files; returns how many remain."""
        if self.temp_sweep_ids is not None:
            logged_ids, self.temp_sweep_ids = self.temp_sweep_ids, None
            counts = self.files.recover_temp_files(logged_ids, deep=False)
            if counts["temp_files_removed"] or counts["temp_files_rolled_forward"]:
                log.warning("stray temp files found after start: %s", counts)
        left = sum(loader.verify_some(budget) for loader in self.loaders)
        self._note_session_dirs()
        if not left and any(loader.found_late or loader.dropped_late for loader in self.loaders):
            episodes_dropped = self.journal.dropped_late  # before `late_finds`, which forgets
            finds = {k: n for loader in self.loaders for k, n in loader.late_finds().items()}
            self.record("files_checked", None, **finds)
            if episodes_dropped:  # a cached file that is gone: `missing` if the log names it
                self.missing_episodes = self._missing_episodes()
        return left

    def _reconcile_episodes(self) -> dict[str, Any]:
        for episode_id in self.removed_episodes & self.journal.by_id.keys():  # outlived a crash
            if (episode := self.journal.remove(episode_id)) is not None:
                self.files.delete_file(self.journal.path_of(episode))
        self._note_session_dirs()
        counts = self.journal.provenance_counts(self.logged_episodes)
        self.missing_episodes = self._missing_episodes(counts)
        return {"episodes_untracked": counts["untracked"], "episodes_unaccounted": counts["unaccounted"],
                "episodes_missing": len(self.missing_episodes),
                "bad_files": len(self.journal.bad_files) + len(self.bad_files)}

    def _note_session_dirs(self) -> None:
        """Keep minting above every session folder the journal listed since the last call."""
        dirs, self.journal.session_dirs = self.journal.session_dirs, []
        if dirs:  # `sess-<n>` names, no leading zeros: the longest is the largest
            self.note_session_id(max(dirs, key=lambda name: (len(name), name)))

    def _missing_episodes(self, counts: dict[str, int] | None = None) -> list[str]:
        """Logged, not removed, and with no file, sorted; `counts` may prove there are none."""
        logged, removed, owner = self.logged_episodes, self.removed_episodes, self.journal.owner
        if counts is not None and sum(counts.values()) == len(owner) and \
                counts["local"] == len(logged) - sum(1 for i in removed if i in logged):
            return []  # (`local`: owned ids that are logged; removed ones were dropped before)
        return sorted((logged - removed).difference(owner))
