"""The daemon's domain state: store, event log, sessions, journal — and the one way to change it.

Import contract: no zmq, no msgpack. Every change is an event appended through `record`, which
also applies it to the in-memory indexes, so replay at start and live operation share one code
path (`apply`). Time comes from an injected clock so TTLs and the reaper test without sleeping.
A commit is all or nothing: when it fails, `abort` cuts the pass's events from the log, drops its
staged files and rebuilds the state from disk (`reload`), and the caller hears `StorageError`.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.config import Config
from memoryd.daemon import idents, nofollow, store
from memoryd.daemon.clock import Clock, iso
from memoryd.daemon.connections import Conn, Session, SessionTable
from memoryd.daemon.episodes.journal import Journal
from memoryd.daemon.eventlog import EventLog, Resume
from memoryd.errors import StorageError, StoreDamaged

log = logging.getLogger("memoryd.daemon")

# Start-up progress: (what is being done, how many so far, how many in all or 0 when unknown).
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 4096  # items between two progress calls


def no_progress(phase: str, done: int, total: int) -> None:
    """The default: a start nobody watches."""
# Events that are not a caller's tool call, so they do not count as session activity.
NON_CALL_KINDS = frozenset({
    "daemon_start", "daemon_stop", "recovery", "session_start", "session_end", "session_attach",
    "pending_expired", "episode_prune", "reaper_run", "files_checked",
})
# Audit events of reads (retrieval counts, docs/storage.md "Group commit"): a pass that logged only
# these replies before its fsync, which waits up to READ_EVENTS_SYNC_S to share one with others.
# A crash can lose that second of retrieval counts; never a write, a session or a handoff.
READ_EVENT_KINDS = frozenset({"search", "show", "digest"})
READ_EVENTS_SYNC_S = 1.0
MAX_APPLIED_REQS = 50_000
REPLAYED_FIELDS = ("kind", "status", "outcome", "memory_id", "pending_id", "episode_id")
STORE_DIRS = ("memories", "tombstones", "episodes", "events", "state", "sessions")
# After a full disk, writes are refused up front until the store's filesystem has this much free
# again (so each refused write costs a statvfs, not a rollback and a reload).
RESUME_FREE_BYTES = 256 * 1024
LOW_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# What survives `reload`: runtime facts the log does not hold.
_RUNTIME_FIELDS = ("started", "stats", "suspended", "reaper_stats", "next_ttl_check", "verified_at",
                   "torn_bytes_truncated", "bad_files", "attach_tiers", "aborts", "low_space", "progress",
                   "temp_sweep_ids", "observers")


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


class Core:
    def __init__(self, root: Path, config: Config, clock: Clock = time.time) -> None:
        self.root = root
        self.config = config
        self.clock = clock
        self.files = store.FileStore(root)
        self.log = EventLog(root / "events")
        self.sessions = SessionTable()
        self.journal = Journal(root, self.files)
        self.logged_episodes: set[str] = set()      # ids an episode_write event names
        self.removed_episodes: set[str] = set()     # ids deleted by promote or prune
        self.applied_reqs: OrderedDict[str, Sequence[Any]] = OrderedDict()  # req -> REPLAYED_FIELDS values
        # Older request keys a checkpoint restored, still packed (a thunk that decodes them), and
        # the connections they belong to: decoded only when one of those connections calls again
        # (a bridge resending across the restart), or at the next checkpoint (`thaw_requests`).
        self.cold_reqs: Callable[[], OrderedDict[str, Sequence[Any]]] | None = None
        self.cold_conns: frozenset[str] = frozenset()
        self.last_run_ids: set[str] = set()   # record ids named since the last daemon_start
        self.run_ids_from = 0  # replay notes them from this seq on (`EventLog.last_seq_of`)
        self._noted_session: Any = None  # the last session id `note_session_id` counted
        self.suspended: dict[str, float] = {}  # session id -> reattach deadline after a restart
        self.next_ttl_check = 0.0             # the reaper's next episode-TTL pass (epoch s)
        self.verified_at = 0.0                # the last slice of the check after start (reaper)
        self.reaper_stats: dict[str, Any] = {"last_run": None, "episodes_pruned": 0}
        self.started = clock()
        self.stats = {"dropped_frames": 0, "bad_requests": 0}
        self.torn_bytes_truncated = 0         # by the last start (memory_health reports it)
        self.bad_files: list[dict[str, str]] = []  # found at start by tiers without their own list
        self.extensions: list[Any] = []  # tiers that add appliers and recovery (memories, reaper)
        self.memories: Any = None        # the durable tier, set by `memories.attach`
        # Set by the daemon's start-up: re-attaches the tiers when `reload` rebuilds the state.
        self.attach_tiers: Callable[[Core], None] | None = None
        self.aborts = 0                   # commits rolled back (a server compares it across a call)
        self.low_space = False            # a write failed for space: refuse writes until it returns
        self.space_checked = False        # `writable` looked at the free space in this pass
        self._mark = self.log.checkpoint()  # where the durable log ends (see `abort`)
        self.must_sync = False  # an event other than a read's audit was logged since the last sync
        self.reads_logged_at: float | None = None  # monotonic time of the oldest unsynced read event
        # Ids of episodes written since the feed was last emptied, so a parked `wait_for` looks
        # only at what is new (O(new events), not O(journal)); `feed_base` is the id of entry 0.
        self.episode_feed: list[str] = []
        self.feed_base = 0
        self.progress: Progress = no_progress  # lifecycle shows a start's progress (status, log)
        # After a resumed start: the ids the stopped run's events named, for the temp-file sweep
        # `verify_files` does then (None: done, or done at start).
        self.temp_sweep_ids: set[str] | None = None
        # Called with each event `record` appends live (never on replay): runtime listeners such as
        # the ring of recent commits the hooks announce to sibling sessions (sessions/news.py).
        self.observers: list[Callable[[dict[str, Any]], None]] = []

    def now(self) -> str:
        return iso(self.clock())

    # -- the one write path -------------------------------------------------------------------

    def record(self, kind: str, actor: Session | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event (ids, counts, hashes only — never content) and apply it."""
        event: dict[str, Any] = {"ts": self.now(), "kind": kind}
        if actor is not None:
            event["session"] = actor.id
        event.update({k: v for k, v in fields.items() if v is not None})
        try:
            self.log.append(event)
        except OSError as exc:  # a full buffer flushed into a full disk: the pass cannot commit
            self.abort()
            raise StorageError.from_os(exc, self.log.dir) from exc
        if kind not in READ_EVENT_KINDS:
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
        """Make every file and event of this pass durable (one round of fsyncs: group commit).

        With `defer_reads` (the server's loop), a pass that logged nothing but reads' audit
        events and staged no file returns at once: those wait, up to READ_EVENTS_SYNC_S, for the
        next write's fsync or the loop's next timer.

        All or nothing: when the flush fails (ENOSPC, EIO, ...) `abort` undoes the pass — log,
        staged files and the state in memory — and `StorageError` is raised for the caller to
        answer every call of the pass with. Once the flush succeeded the pass is committed:
        publishing never raises (a rename that fails is retried, see `FileStore.publish`)."""
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
        """Undo everything since the last sync: the events are cut from the log, the staged
        files dropped, and the state in memory rebuilt from disk, which is now the only record
        of what was committed (appliers and tiers keep no undo log; a failed commit is rare)."""
        self.log.rollback(self._mark)
        self.files.abort()
        self.reload()
        self.aborts += 1

    def note_storage_error(self, exc: StorageError) -> None:
        """A write failed for lack of space: refuse writes up front until space returns."""
        if exc.errno in LOW_SPACE_ERRNOS:
            self.low_space = True

    def writable(self) -> bool:
        """False while the store is out of space. One statvfs (~6 µs) per pass that writes, and
        one per write while low: refusing up front is cheap, while a write that fails part-way
        costs an `abort`, which rebuilds the state from disk."""
        if self.low_space or not self.space_checked:
            self.space_checked = True
            try:
                st = os.statvfs(self.root)
            except OSError:
                return not self.low_space
            self.low_space = st.f_bavail * st.f_frsize < RESUME_FREE_BYTES or (
                self.low_space and not self.log.reserve())
        return not self.low_space

    def reload(self) -> None:
        """Rebuild the domain state from the durable log and the files on disk, in place (the
        server and parked calls keep their reference to this object), keeping runtime facts:
        connection ownership, disabled scopes, client-session keys, last words, counters."""
        kept = {name: getattr(self, name) for name in _RUNTIME_FIELDS}
        feed_end = self.feed_end
        old_sessions, files = self.sessions.sessions, self.files
        Core.__init__(self, self.root, self.config, self.clock)
        self.__dict__.update(kept)
        self.files, self.journal = files, Journal(self.root, files)
        if self.attach_tiers is not None:
            self.attach_tiers(self)
        self.log.replay(self._replay)
        self._load_files()
        for session in self.sessions.sessions.values():
            old = old_sessions.get(session.id)
            if old is not None:
                session.conn, session.disabled_scopes, session.client_session = (
                    old.conn, old.disabled_scopes, old.client_session)
                session.last_words, session.injected = old.last_words, old.injected
        self.suspended = {sid: t for sid, t in self.suspended.items() if sid in self.sessions.open_ids}
        self.episode_feed, self.feed_base = [], feed_end  # parked calls' cursors stay valid
        self._mark = self.log.checkpoint()
        log.warning("state rebuilt from disk after a failed commit (%d events)", self.log.seq)

    def _load_files(self, resumed: bool = False) -> dict[str, Any]:
        """Index the record files after replay (start and `reload`); returns the reconcile counts.
        Files that cannot be changed are reported, never fatal, so a start cannot crash-loop.
        `resumed`: the start follows a clean stop (checkpoint), whose caches list every file."""
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
                report["session_temp_files"] = self._settle_temp_files(
                    self.last_run_ids, deep=found is None, found=found)
            self.journal.load(self.progress, listed_at=self.log.seq if resumed else None)
            report.update(self._reconcile_episodes())
            for extension in self.extensions:
                report.update(extension.reconcile())
        finally:
            self.files.strict = True
        return report

    def verify_files(self, budget: int | None) -> int:
        """Compare up to `budget` (None: all) record files loaded unread from the caches at start
        with the files themselves; returns how many remain. A start trusts the caches so it need
        not stat 180k files; a hand edit made while the daemon was stopped is found here, a slice
        per loop pass (reaper), at once when `memory_health` asks. The first call also sweeps
        the top-level folders for stray temp files after a resumed start (`open`): listing 100k
        names was 0.15-0.3 s of a warm start."""
        if self.temp_sweep_ids is not None:
            self._sweep_temp_files(self.temp_sweep_ids)
        left = self.journal.verify_some(budget)
        self._note_session_dirs()
        memories = self.memories
        if memories is not None:
            left += memories.verify_some(budget)
        late = (self.journal.found_late or self.journal.dropped_late
                or (memories is not None and (memories.found_late or memories.dropped_late)))
        if not left and late:
            self._record_late_finds()
        return left

    def _sweep_temp_files(self, logged_ids: set[str]) -> None:
        self.temp_sweep_ids = None
        counts = self._settle_temp_files(logged_ids, deep=False)
        if counts["temp_files_removed"] or counts["temp_files_rolled_forward"]:
            log.warning("stray temp files found after start: %s", counts)

    def _settle_temp_files(self, logged_ids: set[str], deep: bool,
                           found: tuple[str, ...] | None = None) -> dict[str, int]:
        """Recover temp files (`FileStore.recover_temp_files`); those it cannot touch are bad files."""
        counts = self.files.recover_temp_files(logged_ids, deep, found)
        self.bad_files.extend(self.files.stuck[len(self.files.stuck) - counts["temp_files_stuck"]:])
        return counts

    def _record_late_finds(self) -> None:
        """Log what the after-start check found in the episode and memory folders, as the
        `recovery` event would have had the start listed them (`files_checked`, docs/storage.md)."""
        counts = {"local": 0, "untracked": 0, "unaccounted": 0}
        found = [e for e in map(self.journal.by_id.get, self.journal.found_late) if e is not None]
        for episode in found:
            counts[self.provenance(episode.id, episode.created)] += 1
        memories = self.memories
        memory_counts = {} if memories is None else {
            "memories_parsed": len(memories.found_late), "memories_dropped": memories.dropped_late}
        self.record("files_checked", None, episodes_parsed=len(found), episodes_untracked=counts["untracked"],
                    episodes_unaccounted=counts["unaccounted"], episodes_dropped=self.journal.dropped_late,
                    **memory_counts)
        if self.journal.dropped_late:  # a cached file that is gone: `missing` if the log names it
            self.missing_episodes = self._missing_episodes()
        self.journal.found_late, self.journal.dropped_late = [], 0
        if memories is not None:
            memories.found_late, memories.dropped_late = [], 0

    def apply(self, event: dict[str, Any]) -> None:
        handler = _APPLIERS.get(event["kind"])
        if handler is not None:
            handler(self, event)
        for extension in self.extensions:
            extension.apply(event)
        session = self.sessions.get(event.get("session", ""))
        if session is not None and event["kind"] not in NON_CALL_KINDS:
            self.sessions.touch(session, event["ts"])
        if "req" in event:  # kept small: only what a retry's replayer reads (server.REPLAYERS)
            self.applied_reqs[event["req"]] = tuple(map(event.get, REPLAYED_FIELDS))  # not a dict: 50k of them
            if len(self.applied_reqs) > MAX_APPLIED_REQS:
                self.applied_reqs.popitem(last=False)

    def applied(self, req: str) -> dict[str, Any] | None:
        """What the logged event of request `req` said, as far as a retry's replayer reads it."""
        values = self.applied_reqs.get(req)
        if values is None and self.cold_reqs is not None and req.partition(":")[0] in self.cold_conns:
            self.thaw_requests()
            values = self.applied_reqs.get(req)
        return None if values is None else {k: v for k, v in zip(REPLAYED_FIELDS, values) if v is not None}

    def thaw_requests(self) -> None:
        """Decode the checkpoint's request keys into `applied_reqs`, before the newer ones. Keys
        that do not decode are dropped with a warning: a retry from before the restart would
        then run again, as it would with no checkpoint holding it."""
        thunk, self.cold_reqs, self.cold_conns = self.cold_reqs, None, frozenset()
        if thunk is None:
            return
        try:
            older = thunk()
        except (TypeError, ValueError) as exc:
            log.warning("the checkpoint's request keys do not decode (%s); dropped", exc)
            return
        older.update(self.applied_reqs)
        while len(older) > MAX_APPLIED_REQS:
            older.popitem(last=False)
        self.applied_reqs = older

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
        """The text of a session's finish handoff, once the memory tier is loaded."""
        return self.memories.text_of(memory_id) if self.memories is not None else None

    # -- provenance (docs/storage.md) -----------------------------------------------------------

    def provenance(self, episode_id: str, created: str) -> str:
        if episode_id in self.logged_episodes:
            return "local"
        if self.log.first_ts is None or created < self.log.first_ts:
            return "untracked"
        return "unaccounted"

    # -- start-up ------------------------------------------------------------------------------

    def open(self, resume: Resume | None = None) -> dict[str, Any]:
        """Recovery at start: temp files, torn log tail, replay, reconcile files (docs/storage.md).
        With `resume` (the state was restored from the checkpoint) only the log's tail is replayed.

        A store that cannot be written (full, immutable files) still opens: what recovery cannot
        touch is reported as a bad file, and a start whose own events cannot be made durable
        serves reads and refuses writes until space returns (`writable`)."""
        for sub in STORE_DIRS:
            nofollow.ensure_store_dir(self.root / sub)
        if resume is None:  # no checkpoint: record files may be parsed in helpers while the log replays
            self.run_ids_from = self.log.last_seq_of("daemon_start")
            self.journal.prefetch()
            for extension in self.extensions:
                if hasattr(extension, "prefetch"):
                    extension.prefetch()
        try:
            torn = self.log.replay(self._replay, resume)
        except OSError as exc:  # a torn tail on a segment we may not shrink (chattr +a, read-only)
            raise StoreDamaged(f"the event log cannot be repaired ({exc}); make {exc.filename or self.log.dir} "
                               "writable, then start again", str(exc.filename or self.log.dir)) from exc
        self._mark = self.log.checkpoint()
        self.files.strict = False
        temp_files: dict[str, Any]
        if resume is None:  # the episode folders' own: once the prefetch helper has listed them
            temp_files = self._settle_temp_files(self.last_run_ids, deep=not self.journal.prefetching)
        else:  # after a clean stop no temp file of ours is left: a stray one can wait for the loop
            temp_files, self.temp_sweep_ids = {"temp_files_swept": "after start"}, self.last_run_ids
        self.torn_bytes_truncated = torn
        report = {**temp_files, "torn_bytes_truncated": torn, "log_quarantined": len(self.log.quarantined),
                  "replayed_from_seq": resume.seq if resume is not None else 0,
                  **self._load_files(resumed=resume is not None)}
        for key, count in report.pop("session_temp_files", {}).items():
            report[key] += count
        suspended = self._suspend_open_sessions()
        self.trim_feed()  # replay filled it with history no parked call waits for
        try:
            self.record("daemon_start", pid=_pid(), suspended_sessions=suspended)
            self.record("recovery", **report)
            self.sync()
        except StorageError as exc:
            self.note_storage_error(exc)
            log.error("the store is not writable at start (%s); serving reads, refusing writes", exc.message)
        return report

    def _replay(self, event: dict[str, Any]) -> None:
        """Apply a logged event, remembering the record ids the last run's events name."""
        if not event["seq"] % PROGRESS_EVERY:
            self.progress("replaying the event log", event["seq"], 0)
        if event["seq"] >= self.run_ids_from:  # before the last daemon_start: reset there anyway
            self._note_run_ids(event)
        self.note_session_id(event.get("session"))
        self.apply(event)

    def _note_run_ids(self, event: dict[str, Any]) -> None:
        """Keep `last_run_ids`: the record ids named since the latest `daemon_start` (the temp
        files recovery may roll forward). Live events count too, so a checkpoint holds them."""
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
        """Keep `sess-<n>` minting above every session id seen anywhere — an event, an episode
        folder, a session record — so an id is never reused, even if a `session_start` was lost
        to a quarantined log line."""
        if session_id != self._noted_session and idents.is_session_id(session_id):
            self._noted_session = session_id  # most events name the one before's session
            self.sessions.last_n = max(self.sessions.last_n, int(session_id.split("-", 1)[1]))

    def _reconcile_episodes(self) -> dict[str, Any]:
        for episode_id in self.removed_episodes & self.journal.by_id.keys():  # outlived a crash
            episode = self.journal.remove(episode_id)
            if episode is not None:
                self.files.delete_file(self.journal.path_of(episode))
        self._note_session_dirs()
        counts = self.journal.provenance_counts(self.provenance, self.logged_episodes)
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
        """Logged, not removed, and with no file: sorted. When every file's id is distinct (a start's
        `counts` add up to the ids owned) and as many logged ids have a file as are logged and not
        removed, none is missing: the 88k-id set difference (~50 ms at 10k) is skipped."""
        logged, removed, owner = self.logged_episodes, self.removed_episodes, self.journal.owner
        if counts is not None and sum(counts.values()) == len(owner) and \
                counts["local"] == len(logged) - sum(1 for i in removed if i in logged):
            return []  # (`local`: owned ids that are logged; removed ones were dropped before)
        return sorted((logged - removed).difference(owner))

    def _suspend_open_sessions(self) -> int:
        grace_until = self.clock() + 3 * self.config.heartbeat_seconds
        for session in self.sessions.open_sessions():
            self.suspended[session.id] = grace_until
        return len(self.suspended)

    # -- session lifecycle ---------------------------------------------------------------------

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

    def end_session(self, session: Session, reason: str, **fields: Any) -> None:
        if session.is_open:
            self.record("session_end", session, reason=reason, **fields)
            session.conn = None


def _pid() -> int:
    import os

    return os.getpid()


def _on_session_start(core: Core, event: dict[str, Any]) -> None:
    core.sessions.add(event)


def _on_session_end(core: Core, event: dict[str, Any]) -> None:
    session = core.sessions.get(event["session"])
    if session is not None:
        core.sessions.end(session, event["reason"], event["ts"])
        session.summary = event.get("summary", session.summary)
        session.handoff_id = event.get("handoff_id", session.handoff_id)


def _on_episode_write(core: Core, event: dict[str, Any]) -> None:
    core.logged_episodes.add(event["episode_id"])
    core.episode_feed.append(event["episode_id"])
    session = core.sessions.get(event["session"])
    if session is not None:
        written = session.episodes_written
        if type(written) is not set:  # a restored session's tuple (see Session): a set once it grows
            written = session.episodes_written = set(written)
        written.add(event["episode_id"])


def _on_episode_handoff(core: Core, event: dict[str, Any]) -> None:
    session = core.sessions.get(event["session"])
    if session is not None:
        session.handoff_calls += 1


def _on_episode_gone(core: Core, event: dict[str, Any]) -> None:
    """A promote that committed, a confirm of a promote, or a prune deleted episodes."""
    ids = event.get("episode_ids") or ([event["episode_id"]] if event.get("episode_id") else [])
    if event["kind"] in ("episode_promote", "write_confirm") and event.get("deleted") is not True:
        return
    core.removed_episodes.update(ids)
    owner = core.sessions.get(event.get("owner", ""))
    if owner is not None and event["kind"] != "episode_prune":
        owner.episodes_promoted = {*owner.episodes_promoted, *ids}


_APPLIERS: dict[str, Callable[[Core, dict[str, Any]], None]] = {
    "session_start": _on_session_start,
    "session_end": _on_session_end,
    "episode_write": _on_episode_write,
    "episode_handoff": _on_episode_handoff,
    "episode_promote": _on_episode_gone,
    "write_confirm": _on_episode_gone,
    "episode_prune": _on_episode_gone,
}
