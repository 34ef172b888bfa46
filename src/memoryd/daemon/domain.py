"""The domain state and its one change path: an event appended by `record` and applied by `apply`, as
replay does. Import contract: no zmq, no msgpack; the clock is injected."""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from memoryd import names
from memoryd.config import Config
from memoryd.daemon.calls.resent import Retries
from memoryd.daemon.episodes.journal import Journal
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.session_table import DRY_RUN_SESSION, Session, SessionTable
from memoryd.daemon.storage import store
from memoryd.daemon.storage.clock import Clock, iso
from memoryd.daemon.storage.eventlog import EventLog
from memoryd.daemon.storage.events import EPISODE_PRUNE, KINDS, NON_CALL_KINDS, READ_KINDS, WRITE_CONFIRM
from memoryd.errors import InternalError, StorageError

log = logging.getLogger("memoryd.daemon")

Progress = Callable[[str, int, int], None]  # (what is being done, how many so far, how many in all or 0 if unknown)


def no_progress(phase: str, done: int, total: int) -> None:
    pass


READ_EVENTS_SYNC_S = 1.0  # how long reads' audit events may wait for an fsync (docs/storage.md, "Group commit")
RESUME_FREE_BYTES = 256 * 1024  # after a full disk, writes are refused up front until this much is free again
LOW_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class TierLoader(Protocol):
    """A tier indexing its own files at a start and after it (docs/storage.md, 'Recovery at start')."""

    found_late: list[str]  # ids of records the check after start parsed (new or changed files)
    dropped_late: int      # records taken from a cache whose file was gone

    def prefetch(self) -> None: ...

    def verify_some(self, budget: int | None) -> int:
        """Check up to about `budget` (None: all) files; returns how many remain."""

    def late_finds(self) -> dict[str, int]:
        """The `files_checked` counts of what the check found that a start would have; forgets them."""


class Extension(Protocol):
    """The memory tier, session records, sync; optionally `provenance_of` and sections (memories/rollups.py)."""

    def apply(self, event: dict[str, Any]) -> None: ...

    def load(self) -> None: ...

    def reconcile(self) -> dict[str, Any]: ...

    def log_state(self) -> dict[str, Any]: ...

    def restore_log_state(self, data: dict[str, Any]) -> Callable[[], None]:
        """Fill from the checkpoint's part; returns what to run once every part is in."""


class DomainState:
    def __init__(self, root: Path, config: Config, clock: Clock = time.time,
                 files: store.FileStore | None = None) -> None:  # files: kept by `Core.reload`
        self.root = root
        self.config = config
        self.clock = clock
        self.files = files if files is not None else store.FileStore(root)
        self.log = EventLog(root / "events")
        self.sessions = SessionTable()
        self.journal = Journal(root, self.files, self.provenance)
        self.logged_episodes: set[str] = set()      # ids an episode_write event names
        self.removed_episodes: set[str] = set()     # ids deleted by promote or prune
        self.retries = Retries()
        self.last_run_ids: set[str] = set()   # record ids named since the last daemon_start
        self.run_ids_from = 0  # replay notes them from this seq on (`EventLog.last_seq_of`)
        self._noted_session: Any = None  # the last session id `note_session_id` counted
        self.suspended: dict[str, float] = {}  # session id -> reattach deadline after a restart
        self.next_ttl_check = 0.0             # the reaper's next episode-TTL pass (epoch s)
        self.verified_at = 0.0                # the last slice of the check after start (reaper)
        self.reaper_stats: dict[str, Any] = {"last_run": None, "episodes_pruned": 0}
        self.started = clock()
        self.stats = {"dropped_frames": 0, "bad_requests": 0}
        self.torn_bytes_truncated = 0         # by the last start
        self.bad_files = self.files.stuck  # temp files recovery could not touch, and tiers' without their own list
        self.extensions: list[Extension] = []  # the memory tier, session records, sync
        self.loaders: list[TierLoader] = [self.journal]  # and the memory tier, once attached
        self.memories: Any = None        # the durable tier, set by `memories.attach`
        self.aborts = 0                   # commits rolled back (a server compares it across a call)
        self.low_space = False            # refuse writes until space returns
        self.space_checked = False        # `writable` looked at the free space in this pass
        self._mark = self.log.checkpoint()  # where the durable log ends (see `abort`)
        self.must_sync = False  # an event other than a read's audit was logged since the last sync
        self.reads_logged_at: float | None = None  # monotonic time of the oldest unsynced read event
        # Episodes written since the feed was emptied (all a parked `wait_for` looks at); `feed_base`: entry 0's cursor.
        self.episode_feed: list[str] = []
        self.feed_base = 0
        self.progress: Progress = no_progress
        self.temp_sweep_ids: set[str] | None = None  # after a resumed start: for the temp-file sweep
        self.observers: list[Callable[[dict[str, Any]], None]] = []  # called with each event `record` appends live

    def now(self) -> str:
        return iso(self.clock())

    def record(self, kind: str, actor: Session | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event (ids, counts, hashes, never content) and apply it; a dry run records nothing."""
        if kind not in KINDS:  # every kind is declared once, in daemon/storage/events.py
            raise InternalError(f"event kind {kind!r} is not declared in daemon/storage/events.py")
        event: dict[str, Any] = {"ts": self.now(), "kind": kind}
        if actor is not None and actor.id == DRY_RUN_SESSION:
            return event
        if actor is not None:
            event["session"] = actor.id
        event.update({k: v for k, v in fields.items() if v is not None})
        try:
            self.log.append(event)
        except OSError as exc:  # a full buffer flushed into a full disk: the pass cannot commit
            self.abort()
            raise StorageError.from_os(exc, self.log.dir) from exc
        if kind not in READ_KINDS:
            self.must_sync = True
        elif self.reads_logged_at is None:
            self.reads_logged_at = time.monotonic()
        self._note_run_ids(event)
        self.apply(event)
        for observe in self.observers:
            observe(event)
        return event

    def sync_due_in(self) -> float:
        """Seconds until `sync(defer_reads=True)` must flush read events waiting for an fsync."""
        if self.reads_logged_at is None:
            return math.inf
        return max(0.0, self.reads_logged_at + READ_EVENTS_SYNC_S - time.monotonic())

    def sync(self, defer_reads: bool = False) -> None:
        """Group commit: this pass's files and events durable, or `abort`ed with `StorageError`. With
        `defer_reads`, a pass of reads' audit events only may wait up to READ_EVENTS_SYNC_S."""
        if defer_reads and not self.must_sync and self.files.idle and self.sync_due_in() > 0:
            return
        self.must_sync, self.reads_logged_at = False, None
        try:
            log_fd = self.log.flush()
            self.files.flush(extra_fds=() if log_fd is None else (log_fd,))
            if log_fd is not None:
                self.log.mark_durable()
        except OSError as exc:
            self.abort()
            raise StorageError.from_os(exc, self.root) from exc
        self.files.publish()
        if log_fd is not None:
            self._mark = self.log.checkpoint()
            if not self.log.reserve():
                self.low_space = True

    def abort(self) -> None:
        """Undo everything since the last sync: cut the log, drop staged files, rebuild from disk."""
        self.log.rollback(self._mark)
        self.files.abort()
        self.reload()
        self.aborts += 1

    def reload(self) -> None:
        raise NotImplementedError

    def note_storage_error(self, exc: StorageError) -> None:
        if exc.errno in LOW_SPACE_ERRNOS:
            self.low_space = True

    def writable(self) -> bool:
        """False while the store is out of space (a statvfs is cheaper than an `abort`: docs/storage.md)."""
        if self.low_space or not self.space_checked:
            self.space_checked = True
            try:
                st = os.statvfs(self.root)
            except OSError:
                return not self.low_space
            self.low_space = st.f_bavail * st.f_frsize < RESUME_FREE_BYTES or (
                self.low_space and not self.log.reserve())
        return not self.low_space

    def apply(self, event: dict[str, Any]) -> None:
        if (handler := _APPLIERS.get(event["kind"])) is not None:
            handler(self, event)
        for extension in self.extensions:
            extension.apply(event)
        if (session := self.sessions.get(event.get("session", ""))) is not None and event["kind"] not in NON_CALL_KINDS:
            self.sessions.touch(session, event["ts"])
        if "req" in event:  # kept small: only what a retry's replayer reads (Tool.replay)
            self.retries.note(event)

    @property
    def feed_end(self) -> int:
        """The cursor just past the newest episode written (see `episodes_since`)."""
        return self.feed_base + len(self.episode_feed)

    def episodes_since(self, cursor: int) -> list[str]:
        """Ids of the episodes written after `cursor` (a `feed_end` taken earlier)."""
        return self.episode_feed[max(0, cursor - self.feed_base):]

    def trim_feed(self) -> None:
        """Forget the feed (no parked call needs it any more); cursors stay valid."""
        self.feed_base, self.episode_feed = self.feed_end, []

    def handoff_text(self, memory_id: str) -> str | None:
        return self.memories.text_of(memory_id) if self.memories is not None else None

    def provenance(self, episode_id: str, created: str) -> str:
        if episode_id in self.logged_episodes:
            return "local"
        if self.log.first_ts is None or created < self.log.first_ts:
            return "untracked"
        return "unaccounted"

    def _note_run_ids(self, event: dict[str, Any]) -> None:
        """Keep `last_run_ids`: record ids named since the latest `daemon_start`, for recovery's roll-forward."""
        if event["kind"] == "daemon_start":
            self.last_run_ids = set()
            return
        ids, is_id = self.last_run_ids, idents.ULID_RE.fullmatch  # every event of a replay: kept lean
        for value in event.values():
            kind = type(value)
            if kind is str:
                if len(value) == 26 and is_id(value):
                    ids.add(value)
            elif kind is list:
                ids.update(v for v in value if type(v) is str and len(v) == 26 and is_id(v))
        if event.get("summary_sha") or event.get("note_sha"):  # a session record written in this run
            self.last_run_ids.add(event.get("owner") or event["session"])  # (sessions/records)

    def note_session_id(self, session_id: Any) -> None:
        """Keep `sess-<n>` minting above every session id seen anywhere, so none is ever reused."""
        if session_id != self._noted_session and idents.is_session_id(session_id):
            self._noted_session = session_id  # most events name the one before's session
            self.sessions.last_n = max(self.sessions.last_n, int(session_id.split("-", 1)[1]))

    def start_session(self, identity: dict[str, Any], conn_id: str) -> Session:
        fields = {k: identity.get(k) for k in ("worktree", "repo", "project", "client")}
        session_id = self.sessions.next_id()
        while self.journal.root_unlisted and os.path.lexists(self.journal.dir / session_id):
            self.note_session_id(session_id)  # a folder made while stopped, before episodes/ is listed
            session_id = self.sessions.next_id()
        event = self.record("session_start", None, session=session_id, conn=conn_id, **fields)
        session = self.sessions.sessions[event["session"]]
        session.conn = conn_id
        return session

    def reopen_session(self, session: Session) -> None:
        if not session.is_open:
            self.record("session_reopen", session)

    def end_session(self, session: Session, reason: str, **fields: Any) -> None:
        if session.is_open:
            self.record("session_end", session, reason=reason, **fields)
            session.conn = None


def _on_session_start(core: DomainState, event: dict[str, Any]) -> None:
    core.sessions.add(event)


def _on_session_end(core: DomainState, event: dict[str, Any]) -> None:
    if (session := core.sessions.get(event["session"])) is not None:
        core.sessions.end(session, event["reason"], event["ts"])
        session.summary = event.get("summary", session.summary)
        session.handoff_id = event.get("handoff_id", session.handoff_id)


def _on_session_reopen(core: DomainState, event: dict[str, Any]) -> None:
    if (session := core.sessions.get(event["session"])) is not None:
        core.sessions.reopen(session, event["ts"])


def _on_episode_write(core: DomainState, event: dict[str, Any]) -> None:
    core.logged_episodes.add(event["episode_id"])
    core.episode_feed.append(event["episode_id"])
    if (session := core.sessions.get(event["session"])) is not None:
        written = session.episodes_written
        if type(written) is not set:  # a restored session's tuple (see Session): a set once it grows
            written = session.episodes_written = set(written)
        written.add(event["episode_id"])


def _on_episode_handoff(core: DomainState, event: dict[str, Any]) -> None:
    if (session := core.sessions.get(event["session"])) is not None:
        session.handoff_calls += 1


def _on_episode_gone(core: DomainState, event: dict[str, Any]) -> None:
    ids = event.get("episode_ids") or ([event["episode_id"]] if event.get("episode_id") else [])
    if event["kind"] in (names.EPISODE_PROMOTE, WRITE_CONFIRM) and event.get("deleted") is not True:
        return
    core.removed_episodes.update(ids)
    if (owner := core.sessions.get(event.get("owner", ""))) is not None and event["kind"] != EPISODE_PRUNE:
        owner.episodes_promoted = {*owner.episodes_promoted, *ids}


_APPLIERS: dict[str, Callable[[DomainState, dict[str, Any]], None]] = {
    "session_start": _on_session_start, "session_end": _on_session_end, "session_reopen": _on_session_reopen,
    names.EPISODE_WRITE: _on_episode_write, names.EPISODE_HANDOFF: _on_episode_handoff,
    names.EPISODE_PROMOTE: _on_episode_gone, WRITE_CONFIRM: _on_episode_gone, EPISODE_PRUNE: _on_episode_gone,
}
