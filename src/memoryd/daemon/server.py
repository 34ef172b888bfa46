"""The daemon's request loop: one ROUTER socket, one poller, one dispatch table. The only
daemon-side module that touches zmq.

Each pass drains every waiting frame, handles them in order, makes their writes durable with one
round of fsyncs (group commit), then sends the replies — so "committed" is never said before the
bytes are on disk. The poll timeout is the earliest deadline (a parked call, a heartbeat, a reaper
job), so nothing needs a thread.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from memoryd import PROTOCOL, __version__
from memoryd.daemon import admin, catalogue, reaper
from memoryd.daemon.connections import Conn, Session, is_operator_client
from memoryd.daemon.core import Call, Core
from memoryd.daemon.episodes.tools import episode_view, replay_episode_write
from memoryd.daemon.memories.writes import (
    replay_episode_promote,
    replay_memory_write,
    replay_write_confirm,
)
from memoryd.daemon.sessions import anchored, hooks
from memoryd.daemon.sessions.news import News
from memoryd.daemon.tool import Parked
from memoryd.daemon.validate import check_args
from memoryd.errors import (
    BadRequest,
    InternalError,
    InvalidParams,
    MemorydError,
    ProtocolMismatch,
    ResourceState,
    StorageError,
)
from memoryd.profiles import PROFILES
from memoryd.protocol import (
    MAX_FRAME_BYTES,
    decode,
    encode,
    encode_reply,
    error_reply,
    recover_id,
    validate_request,
)

log = logging.getLogger("memoryd.daemon")
MAX_BATCH = 512
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
REPLY_CACHE_SIZE = 256
# The reply cache answers a resend after a reconnect; a bridge resends only what is in flight, so a
# few recent replies are enough. Bytes bound it too (80 cached 3.9 MB reads once took 280 MB):
# past the budget the oldest go, but the newest reply is always kept.
REPLY_CACHE_BYTES = 4 * 1024 * 1024
TIMERS_BACKOFF_S = 5.0  # after a timed pass failed on the store (see `_timed_passes`)
# The timed passes run when a job is due, and this soon after a request (which may have made one
# due sooner): under load they run about once per this interval, not once per request.
TIMERS_AFTER_REQUEST_S = 0.01
# pyzmq's flag and option enums cost microseconds per use; the loop's per-frame calls pass ints.
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)
_EVENTS, _RCVMORE, _POLLIN = int(zmq.EVENTS), int(zmq.RCVMORE), int(zmq.POLLIN)
# Parked `wait_for` calls each hold a closure and are checked when episodes arrive.
MAX_PARKED_PER_CONN = 16
MAX_PARKED = 1024
# Ops whose reply says the state changed (or was read in a pass that changed it): a pass whose
# commit fails answers these with the storage error. heartbeat/status/tools/stop touch no state.
STATEFUL_OPS = frozenset({"hello", "call", "bye", "hook", "episodes"})
# Results a retried request gets when its first attempt was applied before a daemon restart.
REPLAYERS: dict[str, Callable[[Core, dict[str, Any]], dict[str, Any] | None]] = {
    "episode_write": replay_episode_write,
    "memory_write": replay_memory_write,
    "memory_write_confirm": replay_write_confirm,
    "episode_promote": replay_episode_promote,
}


def _typed(op: str, exc: Exception) -> MemorydError:
    """`exc` as a member of the one exception tree: an OSError from the store is a storage
    error (path, errno), anything else unexpected an internal error (logged with its trace)."""
    if isinstance(exc, MemorydError):
        return exc
    if isinstance(exc, OSError):
        log.error("storage error in %s: %s", op, exc)
        return StorageError.from_os(exc)
    log.exception("internal error in %s", op)
    return InternalError(f"internal error: {type(exc).__name__}")


def _read_only(op: str, args: dict[str, Any]) -> bool:
    """Ops and tools that change nothing but their own audit event."""
    if op not in STATEFUL_OPS:
        return True
    name = args.get("tool")
    tool = catalogue.TOOLS.get(name) if op == "call" and isinstance(name, str) else None
    return tool is not None and tool.read_only


@dataclass
class ParkedCall:
    conn_id: str
    req_id: int
    parked: Parked


class Server:
    def __init__(self, core: Core, endpoint: str, on_stop: Callable[[], None] = lambda: None) -> None:
        self.core = core
        self.endpoint = endpoint
        self.on_stop = on_stop
        self.conns: dict[str, Conn] = {}
        self.parked: list[ParkedCall] = []
        self.reply_bytes: dict[str, int] = {}  # conn id -> bytes in its reply cache
        self.timers_resume_at = 0.0  # core clock; a failed timed pass backs off until then
        self.timers_at = 0.0  # core clock; when the timed passes run next (see `run_timers`)
        # This pass's replies that a failed commit must take back, where they go, and where the
        # calls it parked begin in `parked` (see `_void_pass`).
        self._pass_replies: list[tuple[str, int, list[bytes]]] = []
        self._pass_out: list[list[bytes]] = []
        self._parked_mark = 0
        self.running = True
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 1000)
        self.router.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)
        self.ops: dict[str, Callable[[str, bytes, dict[str, Any]], Any]] = {
            "hello": self.op_hello, "tools": self.op_tools, "call": self.op_call,
            "heartbeat": self.op_heartbeat, "bye": self.op_bye, "status": self.op_status,
            "stop": self.op_stop, "episodes": self.op_episodes, "hook": self.op_hook,
            "admin": self.op_admin,
        }
        self.client_sessions = hooks.ClientSessions()
        self.news = News()  # recent commits, announced to sibling sessions by their hooks
        core.observers.append(self.news.observe)
        self.operator_sessions: dict[str, str] = {}  # operator client name -> its session id
        # The operator's session outlives restarts (nobody reattaches it, and it is no agent run):
        # it is not ended as `daemon_restart` like the agents' sessions open at the last stop.
        for session_id in [sid for sid in core.suspended if _is_operator(core.sessions.get(sid))]:
            del core.suspended[session_id]
        self.wakeup_fd: int | None = None
        # Second gate after the 0700 runtime dir: the kernel's peer credentials, seen through ZAP.
        self.zap = self.ctx.socket(zmq.REP)
        self.zap.setsockopt(zmq.LINGER, 0)
        self.zap.bind(ZAP_ENDPOINT)
        self.router.setsockopt(zmq.ZAP_DOMAIN, b"memoryd")
        self.refused_peers = 0

    def bind(self) -> None:
        self.router.bind(self.endpoint)
        if self.endpoint.startswith("ipc://"):
            os.chmod(self.endpoint[len("ipc://"):], 0o600)

    # -- the loop ------------------------------------------------------------------------------

    def serve_forever(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.zap, zmq.POLLIN)
        if self.wakeup_fd is not None:
            poller.register(self.wakeup_fd, zmq.POLLIN)
        while self.running:
            ready = dict(poller.poll(self._timeout_ms()))
            if self.wakeup_fd is not None and self.wakeup_fd in ready:
                os.read(self.wakeup_fd, 512)  # a signal arrived; its handler cleared `running`
            if self.zap in ready:
                self.answer_zap()
            if self.router in ready:
                self.run_pass()
            self.run_timers(idle=not ready)

    def run_pass(self) -> None:
        outgoing: list[list[bytes]] = []
        feed_before = self.core.feed_end
        self._pass_replies, self._pass_out, self._parked_mark = [], outgoing, len(self.parked)
        self.core.space_checked = False
        router = self.router
        for _ in range(MAX_BATCH):
            if not int(router.get(_EVENTS)) & _POLLIN:  # cheaper than ending on a zmq.Again
                break
            reply = self.handle_frames(self._recv_frames())
            if reply is not None:
                outgoing.append(reply)
            if not self.running:
                break
        try:
            self.core.sync(defer_reads=True)
        except StorageError as exc:  # the pass was undone: nobody in it may hear "committed"
            self.core.note_storage_error(exc)
            self._void_pass(exc)
        self._pass_replies = []
        if self.parked and self.core.feed_end != feed_before:
            outgoing.extend(self.wake_parked(timed_out=False))
        self.core.trim_feed()  # every parked call has now looked at every new episode
        self.send_all(outgoing)
        self.timers_at = min(self.timers_at, self.core.clock() + TIMERS_AFTER_REQUEST_S)

    def _recv_frames(self) -> list[bytes]:
        router = self.router
        frames = [router.recv(_NOBLOCK)]
        while router.get(_RCVMORE):
            frames.append(router.recv(_NOBLOCK))
        return frames

    def send_all(self, outgoing: list[list[bytes]]) -> None:
        router = self.router
        for frames in outgoing:
            try:
                for frame in frames[:-1]:
                    router.send(frame, _SNDMORE | _NOBLOCK)
                router.send(frames[-1], _NOBLOCK)
            except zmq.ZMQError:  # the peer is gone or its queue is full: it will retry
                pass

    def run_timers(self, idle: bool = True) -> None:
        """The timed passes when due; `idle`: the poll found nothing to do (no call waits)."""
        now = self.core.clock()
        if now >= self.timers_at and now >= self.timers_resume_at:
            self._timed_passes(now, idle)
            wait = min(reaper.next_due_in(self.core, now), self.core.config.heartbeat_seconds)
            self.timers_at = now + wait
        outgoing = self.wake_parked(timed_out=True) if self.parked else []
        try:
            self.core.sync(defer_reads=True)
        except StorageError as exc:  # undone; the jobs are due again after the back-off
            self._timers_failed(now, exc)
        self.send_all(outgoing)

    def _timed_passes(self, now: float, idle: bool) -> None:
        """Liveness, hook idleness and the reaper's jobs. One that fails on the store (a full disk
        under a fallback handoff, an undeletable episode) is undone with everything since the
        last commit and retried after TIMERS_BACKOFF_S, so a lasting fault cannot spin the loop."""
        aborts = self.core.aborts
        try:
            self._end_lost_with_fallback(now)
            lost = reaper.liveness_pass(self.core, self.conns, now)
            hooks.idle_pass(self.core, self.client_sessions, now)
            for conn_id in lost:
                self.parked = [p for p in self.parked if p.conn_id != conn_id]
                self.reply_bytes.pop(conn_id, None)
            reaper.run_due(self.core, now, idle)
        except (StorageError, OSError) as exc:
            if self.core.aborts == aborts:
                self.core.abort()
            self._timers_failed(now, exc)

    def _timers_failed(self, now: float, exc: Exception) -> None:
        error = _typed("timers", exc)
        if isinstance(error, StorageError):
            self.core.note_storage_error(error)
        self.timers_resume_at = now + TIMERS_BACKOFF_S
        log.error("a timed pass could not commit and was undone (retried in %g s): %s",
                  TIMERS_BACKOFF_S, error.message)

    def _end_lost_with_fallback(self, now: float) -> None:
        """Sessions the liveness pass is about to end as `lost` that hold hook last words end here
        first, the same way, so their last words still become the fallback handoff."""
        limit = 3 * self.core.config.heartbeat_seconds
        for conn in self.conns.values():
            session = self.core.sessions.get(conn.session_id)
            if (now - conn.last_seen > limit and session is not None and session.conn == conn.id
                    and hooks.needs_fallback(self.core, session, self.client_sessions)):
                hooks.end_session(self.core, session, "lost", self.client_sessions)

    def _timeout_ms(self) -> int:
        deadlines = [p.parked.deadline - time.monotonic() for p in self.parked]
        deadlines.append(max(self.timers_at, self.timers_resume_at) - self.core.clock())
        deadlines.append(self.core.sync_due_in())  # read events waiting for an fsync
        soonest = min(deadlines)
        return max(1, int(soonest * 1000)) if math.isfinite(soonest) else 1

    def answer_zap(self) -> None:
        """Admit only peers running as our own uid (libzmq puts `…:uid:gid:pid` in the address)."""
        frames = self.zap.recv_multipart()
        request_id = frames[1] if len(frames) > 1 else b""
        address = frames[3].decode(errors="replace") if len(frames) > 3 else ""
        parts = address.rsplit(":", 3)
        same_user = len(parts) == 4 and parts[1] == str(os.getuid())
        if not same_user:
            self.refused_peers += 1
            log.warning("refused a connection from another user (peer %s)", address)
        status, text = (b"200", b"OK") if same_user else (b"400", b"peer uid is not the daemon's")
        self.zap.send_multipart([b"1.0", request_id, status, text, b"", b""])

    # -- one frame ------------------------------------------------------------------------------

    def handle_frames(self, frames: list[bytes]) -> list[bytes] | None:
        if len(frames) != 2:
            self.core.stats["dropped_frames"] += 1
            return None
        routing_id, payload = frames
        message: Any = None
        try:
            message = decode(payload)
            req_id, op, args, conn_id = validate_request(message)
        except BadRequest as exc:
            self.core.stats["bad_requests"] += 1
            rid = recover_id(message)
            if rid is None:
                self.core.stats["dropped_frames"] += 1
                return None
            return [routing_id, encode(error_reply(rid, exc.to_wire()))]
        return self.handle_request(routing_id, req_id, op, args, conn_id)

    def handle_request(self, routing_id: bytes, req_id: int, op: str, args: dict[str, Any],
                       conn_id: str) -> list[bytes] | None:
        conn = self.conns.get(conn_id)
        if conn is not None:
            conn.routing_id, conn.last_seen = routing_id, self.core.clock()
            cached = conn.replies.get(req_id)
            if cached is not None:
                return [routing_id, cached]
            if req_id in conn.in_flight:
                return None  # a resend of a parked call: its answer will go to the new routing id
        core = self.core
        before = (core.log.seq, core.files.changes, core.aborts)
        try:
            result = self.ops[op](conn_id, routing_id, {**args, "_req_id": req_id})
        except Exception as exc:  # noqa: BLE001 - a bug must not take the daemon down: `_typed` logs it
            error = self._undo_failed(op, args, exc, before)
            reply = encode(error_reply(req_id, error.to_wire()))
        else:
            if isinstance(result, Parked):
                return None
            reply = encode_reply(req_id, result)  # over the frame limit: a typed error instead
        self._remember(conn_id, req_id, reply)
        frames = [routing_id, reply]
        if op in STATEFUL_OPS and core.aborts == before[2]:
            self._pass_replies.append((conn_id, req_id, frames))
        return frames

    def _undo_failed(self, op: str, args: dict[str, Any], exc: Exception,
                     before: tuple[int, int, int]) -> MemorydError:
        """The typed error for a call that raised, after making sure it left nothing behind: a call
        that errors writes nothing (README). A failure after the call logged an event or staged
        a file — or an I/O failure part-way through a write, which may follow changes in memory no
        counter sees — undoes the whole pass so far (`Core.abort`); its other calls hear why."""
        error = _typed(op, exc)
        core = self.core
        if isinstance(error, StorageError):
            core.note_storage_error(error)
        partial = (core.log.seq, core.files.changes) != before[:2] or (
            isinstance(error, StorageError) and not _read_only(op, args))
        if partial and core.aborts == before[2]:
            core.abort()
        if core.aborts != before[2]:
            self._void_pass(error if isinstance(error, StorageError) else InternalError(
                "not applied: a call in the same commit failed (internal error); retry"))
        return error

    def _void_pass(self, cause: MemorydError) -> None:
        """The pass so far was undone: each of its replies that said something changed, and each
        call it parked, is answered with `cause` instead. A connection whose session the undo
        took away (its `session_start` was in the pass) must say hello again: its session id
        will be minted anew, for someone else."""
        for conn_id in [c.id for c in self.conns.values()
                        if c.session_id is not None and self.core.sessions.get(c.session_id) is None]:
            del self.conns[conn_id]
            self.reply_bytes.pop(conn_id, None)
        for conn_id, req_id, frames in self._pass_replies:
            frames[1] = encode(error_reply(req_id, cause.to_wire()))
            self._remember(conn_id, req_id, frames[1])
        self._pass_replies = []
        for entry in self.parked[self._parked_mark:]:
            conn = self.conns.get(entry.conn_id)
            if conn is not None:
                reply = encode(error_reply(entry.req_id, cause.to_wire()))
                self._remember(entry.conn_id, entry.req_id, reply)
                self._pass_out.append([conn.routing_id, reply])
        del self.parked[self._parked_mark:]

    def _remember(self, conn_id: str, req_id: int, reply: bytes) -> None:
        """Cache `reply` for a resend: at most REPLY_CACHE_SIZE replies and REPLY_CACHE_BYTES per
        connection (oldest out first; the newest always stays, whatever its size)."""
        conn = self.conns.get(conn_id)
        if conn is None:
            return
        replies = conn.replies
        held = self.reply_bytes.get(conn_id, 0) - len(replies.pop(req_id, b"")) + len(reply)
        replies[req_id] = reply
        conn.in_flight.discard(req_id)
        while len(replies) > 1 and (len(replies) > REPLY_CACHE_SIZE or held > REPLY_CACHE_BYTES):
            held -= len(replies.popitem(last=False)[1])
        self.reply_bytes[conn_id] = held

    # -- ops -------------------------------------------------------------------------------------

    def op_hello(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("protocol") != PROTOCOL:
            raise ProtocolMismatch(
                f"bridge speaks protocol {args.get('protocol')!r}, daemon {__version__} speaks {PROTOCOL}; "
                "run `memoryd restart` so both are the same version")
        identity = _clean_identity(args.get("identity"))
        raw = args.get("identity")
        # A hook process says so in its identity (the client library's hello carries no flags).
        transient = isinstance(raw, dict) and raw.get("transient") is True
        if is_operator_client(identity.get("client")):
            session = self.operator_session(identity, create=False)
        else:
            session = self._attach_or_start(conn_id, identity, args.get("session_id"), transient)
        old = self.conns.get(conn_id)
        conn = Conn(id=conn_id, routing_id=routing_id, identity=identity, session_id=session and session.id,
                    last_seen=self.core.clock(), transient=transient)
        if old is not None:
            conn.replies = old.replies
        self.conns[conn_id] = conn
        reply = {"session_id": conn.session_id, "daemon_version": __version__, "protocol": PROTOCOL,
                 "tools_etag": catalogue.ETAG, "heartbeat_s": self.core.config.heartbeat_seconds}
        if transient:
            reply["hook"] = hooks.settings(self.core)
        return reply

    def _attach_or_start(self, conn_id: str, identity: dict[str, Any], wanted: Any,
                         transient: bool = False) -> Session | None:
        """Reattach to `wanted` (a bridge after a daemon restart), else join the open session of
        the caller's client session, else start one. A transient caller (a hook process) never
        becomes a session's owner, so its exit ends nothing, and starts none here: a hook after
        the agent finished (stop, session-end) must not leave an empty session behind; the first
        call that needs one starts it (`_current_session`)."""
        key = identity.get("client_session")
        session = self.core.sessions.get(wanted) if isinstance(wanted, str) else None
        owner_gone = session is not None and (session.conn in (None, conn_id) or session.conn not in self.conns)
        if not (session is not None and session.is_open and owner_gone):
            session = self.client_sessions.open_session(self.core, key)
            if session is not None and (transient or session.conn == conn_id):
                return session
        if session is not None:
            self._attach(session, conn_id)
        elif transient:
            return None
        else:
            session = self.core.start_session(identity, conn_id)
        self.client_sessions.bind(key, session)
        return session

    def operator_session(self, identity: dict[str, Any], create: bool) -> Session | None:
        """The one open session every connection of an operator client shares (`memoryd-cli`,
        `memoryd-ui`, `memoryd-import`): their calls are attributed to it, pending writes they
        stage belong to it, and no connection owns it, so a verb's exit ends nothing. Found again
        after a restart; with `create`, started when there is none (the first call needing one)."""
        name = _client_name(identity.get("client"))
        table = self.core.sessions
        session = table.get(self.operator_sessions.get(name, ""))
        if session is None or not session.is_open:
            session = next((s for s in table.open_sessions() if _client_name(s.client) == name), None)
        if session is None and create:
            session = self.core.start_session(identity, "operator")
            session.conn = None
        if session is not None:
            self.operator_sessions[name] = session.id
        return session

    def _attach(self, session: Session, conn_id: str) -> None:
        session.conn = conn_id
        self.core.suspended.pop(session.id, None)
        self.core.record("session_attach", session, conn=conn_id)

    def op_tools(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        """The tools a bridge lists: the profile it asks for (`--tools` / MEMORYD_TOOLS), else the
        config's `tools`. Listing is all a profile decides: `op_call` serves every known tool."""
        profile = args.get("profile") or self.core.config.tools
        if profile not in PROFILES:
            raise InvalidParams("profile", f"must be one of {', '.join(PROFILES)}")
        return catalogue.payload(profile)

    def op_call(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> Any:
        conn = self.conns.get(conn_id)
        if conn is None:  # e.g. the daemon restarted under the bridge: it must say hello again
            raise BadRequest("unknown connection: say hello before calling tools", kind="unknown_connection")
        name = args.get("tool")
        tool = catalogue.TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            raise BadRequest(f"unknown tool {str(name)[:100]!r}", {"param": "name"}, kind="unknown_tool")
        req = f"{conn_id}:{args['_req_id']}"
        applied = self.core.applied(req)
        if applied is not None and tool.name in REPLAYERS:
            replayed = REPLAYERS[tool.name](self.core, applied)
            if replayed is not None:
                return replayed
        raw = args.get("arguments")
        arguments = check_args(tool.input_schema, {} if raw is None else raw)
        if not tool.read_only and not self.core.writable():
            raise StorageError(str(self.core.root), errno.ENOSPC,
                               f"the store at {self.core.root} is out of space: {tool.name} was not applied; "
                               "reads still work, writes resume once space is freed")
        if arguments.get("wait_for") is not None:
            self._check_park_room(conn_id)
        session = self._current_session(conn)
        result = tool.handler(Call(self.core, conn, session, req), arguments)
        self._after_call(conn, session)
        if isinstance(result, Parked):
            conn.in_flight.add(args["_req_id"])
            self.parked.append(ParkedCall(conn_id, args["_req_id"], result))
        return result

    def _current_session(self, conn: Conn) -> Session:
        """The connection's session; a finished one is replaced by a fresh session (docs/tools.md),
        the operator's by the operator session."""
        session = self.core.sessions.get(conn.session_id) if conn.session_id else None
        if (session is None or not session.is_open) and is_operator_client(conn.identity.get("client")):
            session = self.operator_session(conn.identity, create=True)
            assert session is not None
            conn.session_id = session.id
        if session is None or not session.is_open:
            key = conn.identity.get("client_session")
            session = self.client_sessions.open_session(self.core, key) if conn.transient else None
            if session is None:
                session = self.core.start_session(conn.identity, conn.id)
                if conn.transient:
                    session.conn = None
                self.client_sessions.bind(key, session)
            conn.session_id = session.id
        return session

    def _after_call(self, conn: Conn, before: Session) -> None:
        """Keep the client-session key on the connection's current session (a finish or a
        `memory_session_start` moves it), and remember a client session whose agent handed off."""
        self.client_sessions.note_finished(before)
        if conn.session_id != before.id and before.client_session:
            current = self.core.sessions.get(conn.session_id)
            if current is not None:
                self.client_sessions.bind(before.client_session, current)

    def op_admin(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        """Operator reads and decisions (daemon/admin.py); a decision is logged as the operator
        session's, so one is found or started for it first."""
        conn = self.conns.get(conn_id)
        if conn is not None and args.get("action") in ("resolve", "sync_resolve"):
            self._current_session(conn)
        return admin.handle(self.core, conn, args)

    def op_heartbeat(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        if conn_id not in self.conns:
            raise BadRequest("unknown connection: say hello again", kind="unknown_connection")
        return {}

    def op_bye(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        conn = self.conns.pop(conn_id, None)
        if conn is not None:
            session = self.core.sessions.get(conn.session_id)
            if session is not None and session.conn == conn_id:
                hooks.end_session(self.core, session, "closed", self.client_sessions)
            self.parked = [p for p in self.parked if p.conn_id != conn_id]
        self.reply_bytes.pop(conn_id, None)
        return {}

    def op_status(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        core = self.core
        counts = {"episodes": len(core.journal.by_id), "sessions": len(core.sessions),
                  "events": core.log.seq}
        memories = core.memories
        if memories is not None:
            counts.update(memories.counts())
        return {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL,
                "uptime_s": round(core.clock() - core.started, 1), "connections": len(self.conns),
                "open_sessions": len(core.sessions.open_sessions()), "store": str(core.root),
                "counts": counts, "refused_peers": self.refused_peers, **core.stats}

    def op_stop(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        self.running = False
        self.on_stop()  # removes the status file *before* the reply: a dying daemon must not look alive
        return {}

    def op_hook(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        """What a hook process asks beyond the tools (daemon/sessions/hooks.py): `latest_handoff`,
        `take_unseen` (ids, limit; `peek_unseen` marks nothing; with `news`, also what `news` gives),
        `news` (sibling sessions' commits since this client session's last hook, sessions/news.py),
        `anchored` (tool, paths, command, limit, peek: what a tool call touches, sessions/anchored.py),
        `last_words` (text), `end` (reason)."""
        conn = self.conns.get(conn_id)
        if conn is None:
            raise BadRequest("unknown connection: say hello before hook calls", kind="unknown_connection")
        action = args.get("action")
        if self._nothing_to_end(conn, action):
            self.client_sessions.forget(conn.identity.get("client_session") if action == "end" else None)
            return {"kept": False} if action == "last_words" else {"session_id": None, "ended": None}
        if action == "anchored" and not self._joined_open(conn):
            return {"memories": [], "session_id": None}  # a tool call joins a session, never starts one
        session = self._current_session(conn)
        if action == "latest_handoff":  # the session-start hook: what to continue from, and where
            return {**hooks.continuity(self.core, session), "session_id": session.id}
        if action in ("take_unseen", "peek_unseen"):  # peek: a dry run, nothing marked as shown
            mark = action == "take_unseen"
            taken = {"ids": hooks.take_unseen(session, args.get("ids"), args.get("limit"), mark)}
            # The prompt hook's one call for both: news after the hits, so none is shown twice.
            return {**taken, **self.news.take(self.core, session, conn.identity, mark, taken["ids"])} \
                if args.get("news") else taken
        if action == "news":  # a tool hook's light call
            return self.news.take(self.core, session, conn.identity)
        if action == "anchored":  # the pre-tool hook: memories the tool call is about to touch
            return {**anchored.anchored(self.core, session, args), "session_id": session.id}
        if action == "last_words":
            if not (session.is_open and self.core.config.hook_last_words):
                return {"kept": False}
            return hooks.keep_last_words(session, args.get("text"))
        if action == "end":
            reason = str(args.get("reason") or "other")[:64]
            result = hooks.end_session(self.core, session, f"client:{reason}", self.client_sessions)
            self.client_sessions.forget(session.client_session)
            return result
        raise BadRequest(f"unknown hook action {str(action)[:64]!r}", {"param": "action"})

    def _joined_open(self, conn: Conn) -> bool:
        """Whether the connection joined an open session at hello. The pre-tool hook sends a thin
        identity (no git process on a tool's critical path), so it must not start one."""
        session = self.core.sessions.get(conn.session_id) if conn.session_id else None
        return session is not None and session.is_open

    def _nothing_to_end(self, conn: Conn, action: Any) -> bool:
        """A hook that would start a session only to close it: `end` with no open session, or
        `last_words` after the agent finished its session (the stop hook of its last turn)."""
        session = self.core.sessions.get(conn.session_id) if conn.session_id else None
        if action not in ("last_words", "end") or (session is not None and session.is_open):
            return False
        bound = self.core.sessions.get(self.client_sessions.by_key.get(conn.identity.get("client_session") or "", ""))
        return action == "end" or (bound is not None and not bound.is_open)

    def op_episodes(self, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
        """Operator view of the journal tier (`memoryd episodes list|prune`)."""
        if args.get("action") == "prune":
            due = reaper.episode_ttl_pass(self.core, self.core.clock(), dry_run=bool(args.get("dry_run")))
            return {"dry_run": bool(args.get("dry_run")), "sessions": due,
                    "episodes": sum(entry["episodes"] for entry in due)}
        session = args.get("session")
        if isinstance(session, str):
            return {"session": session, "episodes": [
                {**episode_view(self.core, e, with_body=False), "swarm_id": e.swarm_id}
                for e in self.core.journal.of_session(session)]}
        rows = [{"session": sid, "episodes": count, "newest": newest,
                 "ended": getattr(self.core.sessions.get(sid), "ended", "unknown")}
                for sid, count, newest in self.core.journal.summaries()]
        return {"sessions": sorted(rows, key=lambda r: r["newest"], reverse=True)}

    # -- parked calls ----------------------------------------------------------------------------

    def _check_park_room(self, conn_id: str) -> None:
        """Refuse a `wait_for` call up front (before it logs anything) when it could not park."""
        mine = sum(1 for p in self.parked if p.conn_id == conn_id)
        if mine >= MAX_PARKED_PER_CONN or len(self.parked) >= MAX_PARKED:
            raise ResourceState(
                "too_many_waiting", conn_id,
                f"too many wait_for calls are parked ({mine} of this connection's {MAX_PARKED_PER_CONN}, "
                f"{len(self.parked)} of {MAX_PARKED} in all); wait for one to return, or call without wait_for")

    def wake_parked(self, timed_out: bool) -> list[list[bytes]]:
        """timed_out=False: episodes arrived, so each parked call looks at them (O(new) each);
        True: only calls whose deadline passed are answered (nothing is new between passes)."""
        outgoing, still = [], []
        now = time.monotonic()
        for entry in self.parked:
            expired = timed_out and now >= entry.parked.deadline
            if timed_out and not expired:
                still.append(entry)
                continue
            result = entry.parked.check(expired)
            conn = self.conns.get(entry.conn_id)
            if result is None:
                still.append(entry)
            elif conn is not None:
                reply = encode_reply(entry.req_id, result)
                self._remember(entry.conn_id, entry.req_id, reply)
                outgoing.append([conn.routing_id, reply])
        self.parked = still
        return outgoing

    def close(self) -> None:
        self.router.close(linger=1000)
        self.zap.close(linger=0)
        self.ctx.term()


def _is_operator(session: Session | None) -> bool:
    return session is not None and is_operator_client(session.client)


def _client_name(client: str | None) -> str:
    """`memoryd-cli` of `memoryd-cli/0.1.0`."""
    return (client or "").split("/", 1)[0]


def _clean_identity(raw: Any) -> dict[str, Any]:
    """Keep the known identity fields, as strings (or None); anything else is ignored."""
    raw = raw if isinstance(raw, dict) else {}
    out: dict[str, Any] = {}
    for key in ("worktree", "repo", "project", "client", "swarm_id", "client_session"):
        value = raw.get(key)
        out[key] = value[:4096] if isinstance(value, str) and value else None
    out["pid"] = raw.get("pid") if isinstance(raw.get("pid"), int) else None
    return out
