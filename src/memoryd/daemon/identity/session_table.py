"""The session table (rebuilt by replaying `session_*` events; each worktree's sessions kept in
activity order for the handoff walk) and the runtime connection record."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

OPEN = "open"
NO_INJECTIONS: Mapping[str, int] = MappingProxyType({})  # shared, like the empty sets below
# The operator's own clients: each shares one session no agent list, walk or digest shows (sessions/binding.py).
OPERATOR_CLIENTS = ("memoryd-cli", "memoryd-ui", "memoryd-import")


def client_name(client: str | None) -> str:
    """`memoryd-cli` of `memoryd-cli/0.1.0`."""
    return (client or "").split("/", 1)[0]


def is_operator_client(client: str | None) -> bool:
    return client_name(client) in OPERATOR_CLIENTS


@dataclass(slots=True)
class Session:
    id: str
    worktree: str | None
    repo: str | None
    project: str | None
    client: str | None
    started_at: str
    last_active: str
    calls: int = 0
    handoff_calls: int = 0
    # A tuple when restored from a checkpoint (11k closed sessions held 7 MB of sets), a set once it grows.
    episodes_written: set[str] | tuple[str, ...] = field(default_factory=set)
    # The sets below are replaced, never changed in place: one shared empty frozenset saves ~7 MB at 11k.
    episodes_promoted: AbstractSet[str] = frozenset()
    ended: str = OPEN
    ended_at: str | None = None
    summary: str | None = None
    handoff_id: str | None = None
    conn: str | None = None  # runtime: the connection it belongs to now
    disabled_scopes: AbstractSet[str] = frozenset()  # runtime, session-local by contract
    client_session: str | None = None
    last_words: str | None = None
    injected: AbstractSet[str] = frozenset()
    pointed: AbstractSet[str] = frozenset()  # memories the prompt hook pointed to (a line, not the text)
    # The pre-tool hook's calls, and at which of them each memory was last injected (TOOL_WINDOW).
    tool_calls: int = 0
    injected_at: Mapping[str, int] = field(default_factory=lambda: NO_INJECTIONS)
    auto_chars: int = 0  # chars of automatic context its hooks injected (receipts)
    receipts: int = 0

    @property
    def is_open(self) -> bool:
        return self.ended == OPEN

    @property
    def is_operator(self) -> bool:
        """An operator client's session (shared, hidden from agents' lists and walks)."""
        return is_operator_client(self.client)


DRY_RUN_SESSION = "dry-run"  # what a dry run's calls run as when its client has no open session


@dataclass
class Conn:
    id: str
    routing_id: bytes
    identity: dict[str, Any]
    session_id: str | None  # None until a call needs one (operator and hook connections)
    last_seen: float
    replies: OrderedDict[int, bytes] = field(default_factory=OrderedDict)  # daemon/process/reply_cache.py
    reply_bytes: int = 0  # held in `replies`
    in_flight: set[int] = field(default_factory=set)
    transient: bool = False  # a hook process: uses a session, never owns it (ends nothing on exit)
    dry_run: bool = False  # a hook's --dry-run: joins an open session if there is one, else none


class SessionTable:
    """Sessions by id, per-worktree activity order, and the counter behind `sess-<n>`; a checkpoint's
    sessions stay packed rows until first read (`get`, docs/benchmark.md)."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}  # the sessions read or made so far
        self.rows: dict[str, bytes] = {}  # id -> a checkpoint's packed row, not read yet
        self.thaw: Callable[[bytes], Session] | None = None  # a row -> its Session (checkpoint.py)
        self.by_worktree: dict[str | None, OrderedDict[str, None]] = {}
        self.open_ids: dict[str, None] = {}  # kept so listing open sessions never scans them all
        self.last_n = 0
        # Per worktree, its latest session's (repo, project), made on first use; `derived` is emptied on change.
        self._identities: dict[str, tuple[str | None, str | None]] | None = None
        self.derived: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self.sessions) + len(self.rows)

    def get(self, session_id: str | None) -> Session | None:
        if session_id is None:  # a connection that has no session yet
            return None
        session = self.sessions.get(session_id)
        if session is None and session_id in self.rows and self.thaw is not None:
            session = self.sessions[session_id] = self.thaw(self.rows.pop(session_id))
        return session

    def every(self) -> dict[str, Session]:
        """Every session by id, each row read first."""
        for session_id in list(self.rows):
            self.get(session_id)
        return self.sessions

    def next_id(self) -> str:
        return f"sess-{self.last_n + 1}"

    def latest_identities(self) -> dict[str, tuple[str | None, str | None]]:
        """Per worktree any agent worked in: the (repo, project) of its latest session."""
        if self._identities is None:
            latest = {worktree: self.get(next(reversed(ids))) for worktree, ids in self.by_worktree.items()
                      if worktree and ids}
            self._identities = {worktree: (s.repo, s.project) for worktree, s in latest.items() if s is not None}
        return self._identities

    def _now_latest(self, session: Session) -> None:
        """`session` just became the last of its worktree's walk."""
        walk = self.by_worktree.get(session.worktree)
        if self._identities is not None and session.worktree and walk and next(reversed(walk)) == session.id:
            identity = (session.repo, session.project)
            if self._identities.get(session.worktree) != identity:
                self._identities[session.worktree] = identity
                self.derived.clear()

    def open_sessions(self) -> list[Session]:
        return [session for sid in self.open_ids if (session := self.get(sid)) is not None]

    def add(self, event: dict[str, Any]) -> Session:
        session = Session(id=event["session"], worktree=event.get("worktree"), repo=event.get("repo"),
                          project=event.get("project"), client=event.get("client"),
                          started_at=event["ts"], last_active=event["ts"])
        self.rows.pop(session.id, None)
        self.sessions[session.id] = session
        self.open_ids[session.id] = None
        self.last_n = max(self.last_n, int(session.id.split("-", 1)[1]))
        if not is_operator_client(session.client):  # the handoff walk sees agents' sessions only
            self.by_worktree.setdefault(session.worktree, OrderedDict())[session.id] = None
            self._now_latest(session)
        return session

    def touch(self, session: Session, ts: str) -> None:
        session.last_active = ts
        session.calls += 1
        self._move_to_end(session)

    def end(self, session: Session, reason: str, ts: str) -> None:
        session.ended, session.ended_at = reason, ts
        self.open_ids.pop(session.id, None)

    def reopen(self, session: Session, ts: str) -> None:
        """A resumed client conversation's session, open again (docs/wire.md "Resume")."""
        session.ended, session.ended_at, session.last_active = OPEN, None, ts
        self.open_ids[session.id] = None
        self._move_to_end(session)

    def _move_to_end(self, session: Session) -> None:
        walk = self.by_worktree.get(session.worktree)
        if walk is not None and session.id in walk:
            walk.move_to_end(session.id)
            self._now_latest(session)

    def walk_back(self, worktree: str | None, skip: str) -> Iterator[Session]:
        """This worktree's sessions, most recently active first, without `skip` (lazy)."""
        for sid in reversed(self.by_worktree.get(worktree, OrderedDict())):
            session = self.get(sid) if sid != skip else None
            if session is not None:
                yield session
