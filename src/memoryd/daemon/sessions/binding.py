"""Which session a connection's calls belong to (`Bindings`), and the `hook` op (docs/architecture.md,
'Sessions'). A hook process never owns a session, nor starts one only to end it."""

from __future__ import annotations

import itertools
from typing import Any

from memoryd.config import SESSION_MIN_FULL_CHARS
from memoryd.daemon.core import Core
from memoryd.daemon.identity.session_table import DRY_RUN_SESSION, Conn, Session, client_name, is_operator_client
from memoryd.daemon.sessions import hooks, receipts
from memoryd.daemon.sessions.news import News
from memoryd.errors import BadRequest

# How a session ended that a resumed conversation may reopen: its client went away, nothing more
# (a `/clear` starts a new conversation; a finish or a new bracket closed it on purpose).
RESUMABLE = frozenset({"client:other", "client:prompt_input_exit", "client:logout", "bye", "lost", "idle"})


class Bindings:
    """Connections and client sessions to memoryd sessions, and each operator client's session."""

    def __init__(self, core: Core, conns: dict[str, Conn]) -> None:
        self.core = core
        self.conns = conns
        self.client_sessions = hooks.ClientSessions()
        self.operator_sessions: dict[str, str] = {}  # operator client name -> its session id
        # The operator's session outlives restarts: it is not ended as `daemon_restart`.
        for session_id in [sid for sid in core.suspended if (s := core.sessions.get(sid)) and s.is_operator]:
            del core.suspended[session_id]

    def open_of(self, conn: Conn) -> Session | None:
        """The connection's session while it is open (None before it needed one, or once it ended)."""
        session = self.core.sessions.get(conn.session_id)
        return session if session is not None and session.is_open else None

    def current(self, conn: Conn) -> Session:
        """The connection's session, a fresh one once it ended (docs/tools.md); an operator's shared one."""
        session = self.open_of(conn)
        if session is not None:
            return session
        if conn.dry_run:
            return self._dry_run_session(conn)
        if is_operator_client(conn.identity.get("client")):
            session = self.operator_session(conn.identity, create=True)
            assert session is not None
        else:
            key = conn.identity.get("client_session")
            session = self.client_sessions.open_session(self.core, key) if conn.transient else None
            if session is None:
                session = self.core.start_session(conn.identity, conn.id)
                if conn.transient:
                    session.conn = None
                self.client_sessions.bind(key, session)
        conn.session_id = session.id
        return session

    def _dry_run_session(self, conn: Conn) -> Session:
        """Its client's open session, else one never registered nor logged (`DomainState.record` drops it)."""
        found = self.client_sessions.open_session(self.core, conn.identity.get("client_session"))
        if found is not None:
            return found
        now = self.core.now()
        return Session(id=DRY_RUN_SESSION, worktree=conn.identity.get("worktree"), repo=conn.identity.get("repo"),
                       project=conn.identity.get("project"), client=conn.identity.get("client"),
                       started_at=now, last_active=now)

    def after_call(self, conn: Conn, before: Session) -> None:
        """Move the client-session key to the connection's new session; note a handoff."""
        self.client_sessions.note_finished(before)
        current = self.core.sessions.get(conn.session_id) if conn.session_id != before.id else None
        if current is not None and before.client_session:
            self.client_sessions.bind(before.client_session, current)

    def attach_or_start(self, conn_id: str, identity: dict[str, Any], wanted: Any,
                         transient: bool = False) -> Session | None:
        """Reattach to `wanted` (a bridge after a daemon restart), else join the open session of the caller's
        client session, else start one; a transient caller (a hook process) starts none (`current` does)."""
        key = identity.get("client_session")
        session = self.core.sessions.get(wanted) if isinstance(wanted, str) else None
        owner_gone = session is not None and (session.conn in (None, conn_id) or session.conn not in self.conns)
        if not (session is not None and session.is_open and owner_gone):
            session = self.client_sessions.open_session(self.core, key)
            if session is not None and (transient or session.conn == conn_id):
                return session
        if session is not None:
            session.conn = conn_id
            self.core.suspended.pop(session.id, None)
            self.core.record("session_attach", session, conn=conn_id)
        elif transient:
            return None
        else:
            session = self.reopen_for(identity) or self.core.start_session(identity, conn_id)
            session.conn = conn_id
        self.client_sessions.bind(key, session)
        return session

    def reopen_for(self, identity: dict[str, Any]) -> Session | None:
        """The session a resumed client conversation (same client session key) last had in this
        worktree, reopened when it ended only by the client going away (RESUMABLE); else None."""
        key = identity.get("client_session")
        if not key or self.client_sessions.open_session(self.core, key) is not None:
            return None
        walk = itertools.islice(self.core.sessions.walk_back(identity.get("worktree"), skip=""), hooks.MAX_WALK_BACK)
        session = next((s for s in walk if s.client_session == key), None)
        if session is None or session.is_open or session.handoff_id is not None or session.ended not in RESUMABLE:
            return None
        self.core.reopen_session(session)
        self.client_sessions.bind(key, session)
        return session

    def operator_session(self, identity: dict[str, Any], create: bool) -> Session | None:
        """The open session an operator client's connections share, owned by none; `create` starts it."""
        name = client_name(identity.get("client"))
        table = self.core.sessions
        session = table.get(self.operator_sessions.get(name, ""))
        if session is None or not session.is_open:
            session = next((s for s in table.open_sessions() if client_name(s.client) == name), None)
        if session is None and create:
            session = self.core.start_session(identity, "operator")
            session.conn = None
        if session is not None:
            self.operator_sessions[name] = session.id
        return session


def hook(core: Core, bindings: Bindings, news: News, conn: Conn, args: dict[str, Any]) -> dict[str, Any]:
    """What a hook process asks beyond the tools, by `action`: `latest_handoff`, `take_unseen` / `peek_unseen`
    (ids, limit, pointer_ids, window, news), `news`, `anchored`, `receipt`, `last_words` (text), `end` (reason)."""
    action = args.get("action")
    keys = bindings.client_sessions
    if _nothing_to_end(core, bindings, conn, action):
        keys.forget(conn.identity.get("client_session") if action == "end" else None)
        return {"kept": False} if action == "last_words" else {"session_id": None, "ended": None}
    if action == "latest_handoff" and bindings.open_of(conn) is None:  # a resumed conversation's start
        resumed = bindings.reopen_for(conn.identity)
        if resumed is not None:
            conn.session_id = resumed.id
    # The pre-tool hook's thin identity (no git on a tool's critical path) never starts a session.
    if action == "anchored" and bindings.open_of(conn) is None:
        return {"memories": [], "session_id": None}
    session = bindings.current(conn)
    if action == "latest_handoff":  # the session-start hook: what to continue from, and where
        return {**hooks.continuity(core, session), "session_id": session.id}
    if action in ("take_unseen", "peek_unseen"):  # peek: a dry run, nothing marked as shown
        mark, window = action == "take_unseen", args.get("window") is True  # window: the pre-tool hook's
        wanted, pointers = args.get("ids"), args.get("pointer_ids")
        # Too little budget left for a memory in full: the prompt hook points instead.
        if receipts.budget_left(core, session) < SESSION_MIN_FULL_CHARS and isinstance(wanted, list):
            wanted, pointers = [], [*wanted, *(pointers if isinstance(pointers, list) else [])]
        ids = hooks.take_unseen(session, wanted, args.get("limit"), mark, window)
        taken: dict[str, Any] = {"ids": ids, "pointer_ids": hooks.take_unpointed(session, pointers, ids, mark, window),
                                 "budget_left": receipts.budget_left(core, session)}
        # The prompt hook's one call for both: news after the hits, so none is shown twice.
        return {**taken, **news.take(core, session, conn.identity, mark, ids + taken["pointer_ids"])} \
            if args.get("news") else taken
    if action == "news":
        return news.take(core, session, conn.identity)
    if action == "anchored":
        return {**hooks.anchored(core, session, args), "session_id": session.id}
    if action == "receipt":
        return receipts.record(core, session, args)
    if action == "last_words":
        keeping = session.is_open and core.config.hook_last_words
        return hooks.keep_last_words(session, args.get("text")) if keeping else {"kept": False}
    if action == "end":
        reason = str(args.get("reason") or "other")[:64]
        result = hooks.end_session(core, session, f"client:{reason}", keys)
        keys.forget(session.client_session)
        return result
    raise BadRequest(f"unknown hook action {str(action)[:64]!r}", {"param": "action"})


def _nothing_to_end(core: Core, bindings: Bindings, conn: Conn, action: Any) -> bool:
    """`end` with no open session, or `last_words` after the agent finished its session."""
    if action not in ("last_words", "end") or bindings.open_of(conn) is not None:
        return False
    by_key = bindings.client_sessions.by_key
    bound = core.sessions.get(by_key.get(conn.identity.get("client_session") or "", ""))
    return action == "end" or (bound is not None and not bound.is_open)

