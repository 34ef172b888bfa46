"""The checkpoint: the state the event log implies, saved at a clean stop with the log position it
holds for, so a start replays only what came after (docs/storage.md, 'Checkpoint')."""

from __future__ import annotations

import logging
import os
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgpack

from memoryd.daemon.calls.resent import REPLAYED_FIELDS, Retries
from memoryd.daemon.core import Core
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.session_table import Session, SessionTable
from memoryd.daemon.storage import nofollow
from memoryd.daemon.storage.eventlog import EventLog, Resume
from memoryd.daemon.storage.logcheck import segments

log = logging.getLogger("memoryd.daemon")

FORMAT = 7  # 7: sessions as packed rows; the file ends with the CRC-32 of what precedes it
NAME = "checkpoint"
# Session fields the log defines, in this order; the rest of a Session is runtime state.
_SESSION_FIELDS = ("id", "worktree", "repo", "project", "client", "started_at", "last_active", "calls", "handoff_calls",
                   "episodes_written", "episodes_promoted", "ended", "ended_at", "summary", "handoff_id")
_SET_FIELDS = frozenset({"episodes_written", "episodes_promoted"})
# Fields most sessions share a value of (a worktree, a project, "closed"): one string object each.
_SHARED_FIELDS = tuple(_SESSION_FIELDS.index(f) for f in ("worktree", "repo", "project", "client", "ended"))
_WRITTEN, _PROMOTED = _SESSION_FIELDS.index("episodes_written"), _SESSION_FIELDS.index("episodes_promoted")
_BAD = (KeyError, TypeError, ValueError, IndexError, AttributeError, msgpack.UnpackException)


def save(core: Core) -> None:
    """Stage the checkpoint for the log as it ends now (call right after a sync); durable at the next
    sync. Not while a rename is pending: a start from a checkpoint skips the search for temp files."""
    if not core.files.settled or not all(hasattr(ext, "log_state") for ext in core.extensions):
        return  # (an extension that cannot save its state: every start replays the whole log)
    try:
        position = {"seq": core.log.seq, "hash": core.log.last_hash, "first_ts": core.log.first_ts,
                    "quarantined": core.log.quarantined, "segments": _segments_now(core.log)}
        state = {"v": FORMAT, "log": position, "core": _core_state(core),
                 "extensions": {type(ext).__name__: ext.log_state() for ext in core.extensions}}
    except (KeyError, ValueError) as exc:  # a broken invariant must not break the stop
        log.error("no checkpoint written (%s: %s); the next start replays the whole log", type(exc).__name__, exc)
        return
    packed = msgpack.packb(state, use_bin_type=True)
    core.files.write_file(core.root / "state" / NAME, packed + zlib.crc32(packed).to_bytes(4, "little"))


def restore(core: Core) -> Resume | None:
    """Fill `core` (and its extensions) from the checkpoint and return where replay resumes, or
    None — leaving `core` untouched — when there is no checkpoint or it cannot be trusted."""
    try:
        data = nofollow.read_nofollow(core.root / "state" / NAME)
        # Its CRC-32 checked now: the session rows decode long after the start.
        if len(data) < 4 or zlib.crc32(data[:-4]).to_bytes(4, "little") != data[-4:]:
            raise ValueError("the checkpoint's checksum does not match")
        state = msgpack.unpackb(data[:-4], raw=False, strict_map_key=False)
    except FileNotFoundError:
        return None
    except (OSError, *_BAD) as exc:
        log.warning("the checkpoint is unreadable (%s); replaying the whole log", exc)
        return None
    names = {type(ext).__name__: ext for ext in core.extensions}
    if not isinstance(state, dict) or state.get("v") != FORMAT or set(state.get("extensions") or ()) != set(names):
        log.info("the checkpoint is from another version; replaying the whole log")
        return None
    if (resume := resume_point(core.log, state.get("log") or {})) is None:
        log.info("the event log changed since the checkpoint; replaying the whole log")
        return None
    try:
        fields = _decode_core(state["core"])
        apply_extensions = [names[name].restore_log_state(data) for name, data in state["extensions"].items()]
    except _BAD as exc:
        log.warning("the checkpoint does not decode (%s: %s); replaying the whole log", type(exc).__name__, exc)
        return None
    core.__dict__.update(fields)
    for finish in apply_extensions:
        finish()
    return resume


def _segments_now(event_log: EventLog) -> list[list[Any]]:
    """[name, size, mtime] of each segment: a start resumes only if they are as the checkpoint saw them."""
    return [[path.name, (st := os.lstat(path)).st_size, st.st_mtime_ns] for path in segments(event_log.dir)]


def resume_point(event_log: EventLog, position: dict[str, Any]) -> Resume | None:
    """A `position` saved earlier, if the log's segments, sizes and mtimes are as they were then; else None."""
    try:
        listed: list[list[Any]] = [[str(n), int(size), int(mtime)] for n, size, mtime in position["segments"]]
        seq, last_hash = int(position["seq"]), str(position["hash"])
        first_ts, quarantined = position["first_ts"], list(position["quarantined"])
    except (KeyError, TypeError, ValueError):
        return None
    if not listed or _segments_now(event_log) != listed:
        return None
    return Resume(len(listed) - 1, listed[-1][1], seq, last_hash, first_ts, quarantined)


def _core_state(core: Core) -> dict[str, Any]:
    core.retries.thaw()
    table = core.sessions
    logged = sorted(core.logged_episodes)
    position = {episode_id: i for i, episode_id in enumerate(logged)}

    def ids(values: set[str]) -> list[Any]:  # a logged id by its position in `logged_episodes`
        return [position.get(v, v) for v in sorted(values)]
    return {"session_ids": list(table.every()),
            "sessions": [msgpack.packb([ids(v) if f in _SET_FIELDS else v for f in _SESSION_FIELDS
                                        for v in (getattr(s, f),)], use_bin_type=True)
                         for s in table.sessions.values()],
            "by_worktree": [[worktree, list(ids)] for worktree, ids in table.by_worktree.items()],
            "open_ids": list(table.open_ids), "last_n": table.last_n,
            "logged_episodes": logged, "removed_episodes": sorted(core.removed_episodes),
            "last_run_ids": sorted(core.last_run_ids),
            "applied_reqs": msgpack.packb([[req, list(values)] for req, values in core.retries.applied_reqs.items()]),
            "req_conns": sorted({req.partition(":")[0] for req in core.retries.applied_reqs})}


def _decode_core(data: dict[str, Any]) -> dict[str, Any]:
    """The core's log-derived attributes, built whole before any is assigned (docs/storage.md, 'Checkpoint')."""
    logged = data["logged_episodes"]
    if not idents.all_of_type(logged, str):
        raise ValueError("an episode id is not text")
    session_ids, rows = data["session_ids"], data["sessions"]
    if not (type(rows) is list and len(session_ids) == len(rows) and idents.all_of_type(session_ids, str)
            and idents.all_of_type(rows, bytes)):
        raise ValueError("the sessions are not packed as this version packs them")
    table = SessionTable()
    table.rows = dict(zip(session_ids, rows))
    table.thaw = _thawer(logged)
    table.by_worktree = {wt: OrderedDict.fromkeys(ids) for wt, ids in data["by_worktree"]}
    table.open_ids = dict.fromkeys(data["open_ids"])
    table.last_n = int(data["last_n"])
    if len(table.rows) != len(rows) or not all(sid in table.rows for ids in table.by_worktree.values() for sid in ids):
        raise ValueError("a worktree lists a session the checkpoint does not hold")
    if any(table.get(session_id) is None for session_id in table.open_ids):  # thawed now: liveness walks them
        raise ValueError("an open session the checkpoint does not hold")
    return {"sessions": table, "logged_episodes": set(logged),
            "removed_episodes": set(data["removed_episodes"]), "last_run_ids": set(data["last_run_ids"]),
            **_cold_requests(data["applied_reqs"], data["req_conns"])}


def _thawer(logged: list[str]) -> Callable[[bytes], Session]:
    """A checkpoint's packed row -> its Session, episode positions resolved in `logged` and common
    values shared. ValueError for a row this version did not write."""
    shared: dict[Any, Any] = {}

    def thaw(packed: bytes) -> Session:
        row = msgpack.unpackb(packed, raw=False)
        if type(row) is not list or len(row) != len(_SESSION_FIELDS):
            raise ValueError("a session's fields do not match this version")
        for i in _SHARED_FIELDS:
            row[i] = shared.setdefault(row[i], row[i])
        row[_WRITTEN] = _logged_ids(row[_WRITTEN], logged)
        row[_PROMOTED] = set(_logged_ids(row[_PROMOTED], logged)) if row[_PROMOTED] else frozenset()
        return Session(*row)  # the log-defined fields lead Session, in _SESSION_FIELDS order
    return thaw


def _logged_ids(positions: list[Any], logged: list[str]) -> tuple[str, ...]:
    """Episode ids saved as positions in `logged_episodes` (an id the log does not name: as text)."""
    if all(type(i) is int and 0 <= i < len(logged) for i in positions):
        return tuple(map(logged.__getitem__, positions))
    if not all(type(i) is str or (type(i) is int and 0 <= i < len(logged)) for i in positions):
        raise ValueError("a session names an episode by a position the checkpoint does not hold")
    return tuple(i if type(i) is str else logged[i] for i in positions)


def _cold_requests(packed: bytes, conns: list[str]) -> dict[str, Any]:
    """The request keys, left packed until a connection they name calls again (docs/benchmark.md)."""
    if type(packed) is not bytes or not idents.all_of_type(conns, str):
        raise ValueError("the request keys are not packed as this version packs them")

    def thaw() -> OrderedDict[str, Any]:
        try:
            rows = msgpack.unpackb(packed, raw=False)
        except msgpack.UnpackException as exc:
            raise ValueError(str(exc)) from exc
        if type(rows) is not list:
            raise ValueError("the request keys are not a list")
        reqs: OrderedDict[str, Any] = OrderedDict(rows)
        if len(reqs) != len(rows) or any(len(values) != len(REPLAYED_FIELDS) for values in reqs.values()):
            raise ValueError("the request keys do not match this version")
        return reqs
    return {"retries": Retries(thaw, frozenset(conns))}
