"""The reaper: pure passes over the daemon's state with an injected `now`, each action logged; the
server loop runs them (docs/storage.md, 'Reaper')."""

from __future__ import annotations

import logging
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity.session_table import Conn
from memoryd.daemon.sessions import hooks, records
from memoryd.daemon.storage import store
from memoryd.daemon.storage.clock import iso
from memoryd.daemon.sync import service as sync_service
from memoryd.errors import StorageError

log = logging.getLogger("memoryd.daemon")

TTL_RECHECK_S = 60.0
# Cache-loaded files checked per idle slice after a start, per tier; under load one a second (docs/storage.md).
VERIFY_SLICE = 250
VERIFY_UNDER_LOAD_S = 1.0


def liveness_pass(core: Core, conns: dict[str, Conn], now: float,
                  keys: hooks.ClientSessions | None = None) -> list[str]:
    """End the session of every connection silent for 3 heartbeats as `lost`, with the fallback handoff its
    hook last words make (given the hooks' `keys`); returns their ids."""
    lost = [cid for cid, conn in conns.items() if now - conn.last_seen > 3 * core.config.heartbeat_seconds]
    for conn_id in lost:
        if (session := core.sessions.get(conns.pop(conn_id).session_id)) is not None and session.conn == conn_id:
            if keys is not None and hooks.needs_fallback(core, session, keys):
                hooks.end_session(core, session, "lost", keys)
            else:
                core.end_session(session, "lost")
    return lost


def grace_pass(core: Core, now: float) -> list[str]:
    """Sessions open at the last stop whose bridge did not reattach in time end as `daemon_restart`."""
    ended = [sid for sid, deadline in core.suspended.items() if now >= deadline]
    for session_id in ended:
        del core.suspended[session_id]
        if (session := core.sessions.get(session_id)) is not None:
            core.end_session(session, "daemon_restart")
    return ended


def prune_session_episodes(core: Core, session_id: str) -> list[str]:
    """Delete a session's episodes; `StorageError` before anything changed when one cannot be removed."""
    episodes = core.journal.session(session_id)
    for episode in episodes.values():
        store.check_changeable(core.journal.path_of(episode), replacing=False)
    ids = sorted(episodes)
    folder = None
    for episode_id in ids:
        if (gone := core.journal.remove(episode_id)) is not None:
            core.files.delete_file(core.journal.path_of(gone))
            folder = core.journal.path_of(gone).parent
    if folder is not None:
        core.files.delete_dir_if_empty(folder)
    core.record("episode_prune", None, owner=session_id, episode_ids=ids)
    return ids


def episode_ttl_pass(core: Core, now: float, dry_run: bool = False) -> list[dict[str, Any]]:
    """Delete the episodes of each session whose newest is older than the TTL, open sessions exempt (or, with
    `dry_run`, only say which)."""
    cutoff = iso(now - core.config.episode_ttl_days * 86400)
    due: list[dict[str, Any]] = [
        {"session": sid, "episodes": count, "newest": newest} for sid, count, newest in core.journal.summaries()
        if newest < cutoff and ((session := core.sessions.get(sid)) is None or not session.is_open)]
    if not dry_run:
        for entry in due:
            try:
                prune_session_episodes(core, entry["session"])
            except StorageError as exc:  # left in place and said; the next pass tries again
                entry["error"] = exc.message
                log.warning("episode TTL: kept %s: %s", entry["session"], exc.message)
                continue
            core.reaper_stats["episodes_pruned"] += entry["episodes"]
    core.next_ttl_check = now + TTL_RECHECK_S
    return due


def pending_pass(core: Core, now: float) -> list[str]:
    return core.memories.pending_pass(now) if core.memories is not None else []


def run_due(core: Core, now: float, idle: bool = True) -> dict[str, Any]:
    """Run every job that is due; log one `reaper_run` when any acted. `idle`: no call is waiting."""
    done: dict[str, Any] = {"daemon_restart": grace_pass(core, now), "pending_expired": pending_pass(core, now)}
    if now >= core.next_ttl_check:
        done["episodes_pruned"] = [e["session"] for e in episode_ttl_pass(core, now) if "error" not in e]
        done["notes_expired"] = records.expire_notes(core, now)  # captured last messages: the same TTL
    if acted := {k: len(v) for k, v in done.items() if v}:
        core.reaper_stats["last_run"] = iso(now)
        core.record("reaper_run", None, **acted)
    if _has_sync(core):
        sync_service.run_due(core, now)  # admit a finished sync, or start one (its own events)
    if idle or now - core.verified_at >= VERIFY_UNDER_LOAD_S:
        core.verified_at = now
        core.verify_files(VERIFY_SLICE)
    return done


def _has_sync(core: Core) -> bool:
    return any(isinstance(e, sync_service.SyncState) for e in core.extensions)


def next_due_in(core: Core, now: float) -> float:
    """Seconds until the earliest job could have work (the loop's poll timeout)."""
    waits = [deadline - now for deadline in core.suspended.values()] + [core.next_ttl_check - now]
    memories = core.memories
    if memories is not None and (expiry := memories.next_pending_expiry()) is not None:
        waits.append(expiry - now)
    if _has_sync(core):
        waits.append(sync_service.next_due_in(core, now))
    if (core.journal.unverified or core.journal.unlisted or core.journal.root_unlisted
            or (memories is not None and (memories.unverified or memories.save_after_start
                                          or memories.index.text_pending or memories.semantic.waiting()
                                          or not memories.index.anchors.built))):
        waits.append(0.0)
    return max(0.01, min(waits))
