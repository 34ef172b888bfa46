"""The daemon's domain state: store, event log, sessions, journal — and the one way to change it.

Import contract: no zmq, no msgpack. Every change is an event appended through `record`, which
also applies it to the in-memory indexes, so replay at start and live operation share one code
path (`apply`). Time comes from an injected clock so TTLs and the reaper test without sleeping.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.config import Config
from memoryd.daemon import store
from memoryd.daemon.connections import Conn, Session, SessionTable
from memoryd.daemon.episodes.journal import Journal
from memoryd.daemon.eventlog import EventLog

Clock = Callable[[], float]
# Events that are not a caller's tool call, so they do not count as session activity.
NON_CALL_KINDS = frozenset({
    "daemon_start", "daemon_stop", "recovery", "session_start", "session_end", "session_attach",
    "pending_expired", "episode_prune", "reaper_run",
})
MAX_APPLIED_REQS = 50_000
STORE_DIRS = ("memories", "tombstones", "episodes", "events", "state", "sessions")


def iso(t: float) -> str:
    """ISO-8601 UTC with milliseconds and `Z`."""
    whole = int(t // 1)
    tm = time.gmtime(whole)
    # Zero-padded by hand: strftime's %Y gives "999" for year 999, which breaks string ordering.
    return (f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d}T{tm.tm_hour:02d}:{tm.tm_min:02d}:"
            f"{tm.tm_sec:02d}.{min(999, int((t - whole) * 1000)):03d}Z")


def parse_iso(ts: str) -> float:
    import calendar

    base, _, frac = ts.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


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
        self.applied_reqs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.last_run_ids: set[str] = set()   # record ids named since the last daemon_start
        self.suspended: dict[str, float] = {}  # session id -> reattach deadline after a restart
        self.next_ttl_check = 0.0             # the reaper's next episode-TTL pass (epoch s)
        self.reaper_stats: dict[str, Any] = {"last_run": None, "episodes_pruned": 0}
        self.started = clock()
        self.stats = {"dropped_frames": 0, "bad_requests": 0}
        self.torn_bytes_truncated = 0         # by the last start (memory_health reports it)
        self.bad_files: list[dict[str, str]] = []  # found at start by tiers without their own list
        self.extensions: list[Any] = []  # tiers that add appliers and recovery (memories, reaper)
        self.memories: Any = None        # the durable tier, set by `memories.attach`

    def now(self) -> str:
        return iso(self.clock())

    # -- the one write path -------------------------------------------------------------------

    def record(self, kind: str, actor: Session | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event (ids, counts, hashes only — never content) and apply it."""
        event: dict[str, Any] = {"ts": self.now(), "kind": kind}
        if actor is not None:
            event["session"] = actor.id
        event.update({k: v for k, v in fields.items() if v is not None})
        self.log.append(event)
        self.apply(event)
        return event

    def sync(self) -> None:
        """Make every file and event of this pass durable (one round of fsyncs: group commit)."""
        log_fd = self.log.flush()
        self.files.flush(extra_fds=() if log_fd is None else (log_fd,))
        if log_fd is not None:
            self.log.mark_durable()
        self.files.publish()

    def apply(self, event: dict[str, Any]) -> None:
        handler = _APPLIERS.get(event["kind"])
        if handler is not None:
            handler(self, event)
        for extension in self.extensions:
            extension.apply(event)
        session = self.sessions.get(event.get("session", ""))
        if session is not None and event["kind"] not in NON_CALL_KINDS:
            self.sessions.touch(session, event["ts"])
        if "req" in event:
            self.applied_reqs[event["req"]] = event
            if len(self.applied_reqs) > MAX_APPLIED_REQS:
                self.applied_reqs.popitem(last=False)

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

    def open(self) -> dict[str, Any]:
        """Recovery at start: temp files, torn log tail, replay, reconcile files (docs/storage.md)."""
        for sub in STORE_DIRS:
            store.ensure_store_dir(self.root / sub)
        torn = self.log.replay(self._replay)
        temp_files = self.files.recover_temp_files(self.last_run_ids)
        self.journal.load()
        for extension in self.extensions:
            extension.load()
        report = {**temp_files, "torn_bytes_truncated": torn,
                  "log_quarantined": len(self.log.quarantined), **self._reconcile_episodes()}
        self.torn_bytes_truncated = torn
        for extension in self.extensions:
            report.update(extension.reconcile())
        suspended = self._suspend_open_sessions()
        self.record("daemon_start", pid=_pid(), suspended_sessions=suspended)
        self.record("recovery", **report)
        self.sync()
        return report

    def _replay(self, event: dict[str, Any]) -> None:
        """Apply a logged event, remembering the record ids the last run's events name."""
        if event["kind"] == "daemon_start":
            self.last_run_ids = set()
        else:
            for value in event.values():
                for item in value if isinstance(value, list) else (value,):
                    if type(item) is str and len(item) == 26 and store.is_ulid(item):
                        self.last_run_ids.add(item)
            if event.get("summary_sha"):  # a session record written in this run (sessions/records)
                self.last_run_ids.add(event["session"])
        self.note_session_id(event.get("session"))
        self.apply(event)

    def note_session_id(self, session_id: Any) -> None:
        """Keep `sess-<n>` minting above every session id seen anywhere — an event, an episode
        folder, a session record — so an id is never reused, even if a `session_start` was lost
        to a quarantined log line."""
        if store.is_session_id(session_id):
            self.sessions.last_n = max(self.sessions.last_n, int(session_id.split("-", 1)[1]))

    def _reconcile_episodes(self) -> dict[str, Any]:
        counts = {"local": 0, "untracked": 0, "unaccounted": 0}
        for session_id in self.journal.session_dirs:
            self.note_session_id(session_id)
        for episode in self.journal.all():
            counts[self.provenance(episode.id, episode.created)] += 1
        missing = self.logged_episodes - self.removed_episodes - self.journal.by_id.keys()
        self.missing_episodes = sorted(missing)
        return {"episodes_untracked": counts["untracked"], "episodes_unaccounted": counts["unaccounted"],
                "episodes_missing": len(missing), "bad_files": len(self.journal.bad_files) + len(self.bad_files)}

    def _suspend_open_sessions(self) -> int:
        grace_until = self.clock() + 3 * self.config.heartbeat_seconds
        for session in self.sessions.open_sessions():
            self.suspended[session.id] = grace_until
        return len(self.suspended)

    # -- session lifecycle ---------------------------------------------------------------------

    def start_session(self, identity: dict[str, Any], conn_id: str) -> Session:
        fields = {k: identity.get(k) for k in ("worktree", "repo", "project", "client")}
        event = self.record("session_start", None, session=self.sessions.next_id(), conn=conn_id, **fields)
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
    session = core.sessions.get(event["session"])
    if session is not None:
        session.episodes_written.add(event["episode_id"])


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
        owner.episodes_promoted.update(ids)


_APPLIERS: dict[str, Callable[[Core, dict[str, Any]], None]] = {
    "session_start": _on_session_start,
    "session_end": _on_session_end,
    "episode_write": _on_episode_write,
    "episode_handoff": _on_episode_handoff,
    "episode_promote": _on_episode_gone,
    "write_confirm": _on_episode_gone,
    "episode_prune": _on_episode_gone,
}
