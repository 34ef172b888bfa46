"""The request loop and each op's handler: one ROUTER socket, one poller, one dispatch table (`OPS`); the daemon's
only zmq user. A handler returns the result or a `tool.Parked`, or raises from the one exception tree."""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

import zmq

from memoryd import PROTOCOL, __version__
from memoryd.daemon import catalogue
from memoryd.daemon.calls.validate import check_args
from memoryd.daemon.core import Call, Core
from memoryd.daemon.identity.session_table import Conn, is_operator_client
from memoryd.daemon.process import admin, reaper
from memoryd.daemon.process.reply_cache import remember
from memoryd.daemon.process.waiting import ParkedCalls
from memoryd.daemon.sessions import binding, hooks
from memoryd.daemon.sessions.news import News
from memoryd.daemon.tool import Parked
from memoryd.errors import BadRequest, InternalError, InvalidParams, MemorydError, ProtocolMismatch, StorageError
from memoryd.profiles import PROFILES
from memoryd.protocol import MAX_FRAME_BYTES, decode, encode, encode_reply, error_reply, recover_id, validate_request

log = logging.getLogger("memoryd.daemon")
MAX_BATCH = 512
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
TIMERS_BACKOFF_S = 5.0  # after a timed pass failed on the store
TIMERS_AFTER_REQUEST_S = 0.01  # a request may make a job due sooner; under load the timed passes run once per this
# pyzmq's flag and option enums cost microseconds per use; the loop's per-frame calls pass ints.
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)
_EVENTS, _RCVMORE, _POLLIN = int(zmq.EVENTS), int(zmq.RCVMORE), int(zmq.POLLIN)
STATEFUL_OPS = frozenset({"hello", "call", "bye", "hook", "episodes"})  # a failed commit takes their replies back


def _read_only(op: str, args: dict[str, Any]) -> bool:
    """Ops and tools that change nothing but their own audit event."""
    if op not in STATEFUL_OPS:
        return True
    name = args.get("tool")
    tool = catalogue.TOOLS.get(name) if op == "call" and isinstance(name, str) else None
    return tool is not None and tool.read_only


class Server:
    def __init__(self, core: Core, endpoint: str, on_stop: Callable[[], None] = lambda: None) -> None:
        self.core = core
        self.on_stop = on_stop
        self.running = True
        self.conns: dict[str, Conn] = {}
        self.parked = ParkedCalls()
        self.bindings = binding.Bindings(core, self.conns)
        self.news = News()
        core.observers.append(self.news.observe)
        self.refused_peers = 0  # peers of another uid (`answer_zap`)
        self.endpoint = endpoint
        self.timers_resume_at = 0.0  # core clock; a failed timed pass backs off until then
        self.timers_at = 0.0  # core clock; when the timed passes run next (see `run_timers`)
        self._pass_replies: list[tuple[str, int, list[bytes]]] = []
        self._pass_out: list[list[bytes]] = []
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 1000)
        self.router.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)
        self.wakeup_fd: int | None = None
        # Second gate after the 0700 runtime dir: the kernel's peer credentials, seen through ZAP.
        self.zap = self.ctx.socket(zmq.REP)
        self.zap.setsockopt(zmq.LINGER, 0)
        self.zap.bind(ZAP_ENDPOINT)
        self.router.setsockopt(zmq.ZAP_DOMAIN, b"memoryd")

    def connection(self, conn_id: str, doing: str) -> Conn:
        if (conn := self.conns.get(conn_id)) is None:
            raise BadRequest(f"unknown connection: say hello {doing}", kind="unknown_connection")
        return conn

    def bind(self) -> None:
        self.router.bind(self.endpoint)
        if self.endpoint.startswith("ipc://"):
            os.chmod(self.endpoint[len("ipc://"):], 0o600)

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
        self._pass_replies, self._pass_out, self.parked.mark = [], outgoing, len(self.parked.calls)
        self.core.space_checked = False
        router = self.router
        for _ in range(MAX_BATCH):
            if not int(router.get(_EVENTS)) & _POLLIN:  # cheaper than ending on a zmq.Again
                break
            frames = [router.recv(_NOBLOCK)]
            while router.get(_RCVMORE):
                frames.append(router.recv(_NOBLOCK))
            if (reply := self.handle_frames(frames)) is not None:
                outgoing.append(reply)
            if not self.running:
                break
        try:
            self.core.sync(defer_reads=True)
        except StorageError as exc:  # the pass was undone: nobody in it may hear "committed"
            self.core.note_storage_error(exc)
            self._void_pass(exc)
        self._pass_replies = []
        if self.parked.calls and self.core.feed_end != feed_before:
            outgoing.extend(self.parked.wake(self.conns, timed_out=False))
        self.core.trim_feed()  # every parked call has now looked at every new episode
        self.send_all(outgoing)
        self.timers_at = min(self.timers_at, self.core.clock() + TIMERS_AFTER_REQUEST_S)

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
            self.timers_at = now + min(reaper.next_due_in(self.core, now), self.core.config.heartbeat_seconds)
        outgoing = self.parked.wake(self.conns, timed_out=True) if self.parked.calls else []
        try:
            self.core.sync(defer_reads=True)
        except StorageError as exc:  # undone; the jobs are due again after the back-off
            self._timers_failed(now, exc)
        self.send_all(outgoing)

    def _timed_passes(self, now: float, idle: bool) -> None:
        """Liveness, hook idleness and the reaper's jobs; one failing on the store retries after a back-off."""
        aborts = self.core.aborts
        try:
            lost = reaper.liveness_pass(self.core, self.conns, now, self.bindings.client_sessions)
            hooks.idle_pass(self.core, self.bindings.client_sessions, now)
            for conn_id in lost:
                self.parked.drop(conn_id)
            reaper.run_due(self.core, now, idle)
        except (StorageError, OSError) as exc:
            if self.core.aborts == aborts:
                self.core.abort()
            self._timers_failed(now, exc)

    def _typed(self, op: str, exc: Exception) -> MemorydError:
        """`exc` in the one exception tree: an OSError is a storage error (noted), anything else internal (logged)."""
        if isinstance(exc, OSError):
            log.error("storage error in %s: %s", op, exc)
            exc = StorageError.from_os(exc)
        elif not isinstance(exc, MemorydError):
            log.exception("internal error in %s", op)
            exc = InternalError(f"internal error: {type(exc).__name__}")
        if isinstance(exc, StorageError):
            self.core.note_storage_error(exc)
        return exc

    def _timers_failed(self, now: float, exc: Exception) -> None:
        error = self._typed("timers", exc)
        self.timers_resume_at = now + TIMERS_BACKOFF_S
        log.error("a timed pass could not commit and was undone (retried in %g s): %s", TIMERS_BACKOFF_S, error.message)

    def _timeout_ms(self) -> int:
        deadlines = [p.parked.deadline - time.monotonic() for p in self.parked.calls]
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
            if (rid := recover_id(message)) is None:
                self.core.stats["dropped_frames"] += 1
                return None
            return [routing_id, encode(error_reply(rid, exc.to_wire()))]
        if (conn := self.conns.get(conn_id)) is not None:
            conn.routing_id, conn.last_seen = routing_id, self.core.clock()
            if (cached := conn.replies.get(req_id)) is not None:
                return [routing_id, cached]
            if req_id in conn.in_flight:
                return None  # a resend of a parked call: its answer will go to the new routing id
        core = self.core
        before = (core.log.seq, core.files.changes, core.aborts)
        try:
            result = OPS[op](self, conn_id, routing_id, {**args, "_req_id": req_id})
        except Exception as exc:  # noqa: BLE001 - a bug must not take the daemon down: `_typed` logs it
            reply = encode(error_reply(req_id, self._undo_failed(op, args, exc, before).to_wire()))
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
        """The typed error for a call that raised, after undoing the pass if it may have written anything."""
        error = self._typed(op, exc)
        core = self.core
        partial = (core.log.seq, core.files.changes) != before[:2] or (
            isinstance(error, StorageError) and not _read_only(op, args))
        if partial and core.aborts == before[2]:
            core.abort()
        if core.aborts != before[2]:
            self._void_pass(error if isinstance(error, StorageError) else InternalError(
                "not applied: a call in the same commit failed (internal error); retry"))
        return error

    def _void_pass(self, cause: MemorydError) -> None:
        """The pass was undone: its stateful replies and parked calls answer `cause` instead."""
        # A connection whose session the undo took away must say hello again.
        for conn_id in [c.id for c in self.conns.values()
                        if c.session_id is not None and self.core.sessions.get(c.session_id) is None]:
            del self.conns[conn_id]
        for conn_id, req_id, frames in self._pass_replies:
            frames[1] = encode(error_reply(req_id, cause.to_wire()))
            self._remember(conn_id, req_id, frames[1])
        self._pass_replies = []
        self._pass_out.extend(self.parked.void(self.conns, cause))

    def _remember(self, conn_id: str, req_id: int, reply: bytes) -> None:
        if (conn := self.conns.get(conn_id)) is not None:
            remember(conn, req_id, reply)

    def close(self) -> None:
        self.router.close(linger=1000)
        self.zap.close(linger=0)
        self.ctx.term()


def hello(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    """Register the connection (a re-hello keeps its reply cache)."""
    if args.get("protocol") != PROTOCOL:
        raise ProtocolMismatch(
            f"bridge speaks protocol {args.get('protocol')!r}, daemon {__version__} speaks {PROTOCOL}; "
            "run `memoryd restart` so both are the same version")
    raw = args.get("identity")
    raw = raw if isinstance(raw, dict) else {}
    identity = {key: value[:4096] if isinstance(value := raw.get(key), str) and value else None
                for key in ("worktree", "repo", "project", "client", "swarm_id", "client_session")}
    identity["pid"] = raw.get("pid") if isinstance(raw.get("pid"), int) else None
    transient = raw.get("transient") is True  # a hook process (the client library's hello carries no flags)
    session = (d.bindings.operator_session(identity, create=False) if is_operator_client(identity.get("client"))
               else d.bindings.attach_or_start(conn_id, identity, args.get("session_id"), transient))
    old = d.conns.get(conn_id)
    conn = Conn(id=conn_id, routing_id=routing_id, identity=identity, session_id=session.id if session else None,
                last_seen=d.core.clock(), transient=transient, dry_run=transient and raw.get("dry_run") is True)
    if old is not None:
        conn.replies, conn.reply_bytes = old.replies, old.reply_bytes
    d.conns[conn_id] = conn
    reply: dict[str, Any] = {"session_id": conn.session_id, "daemon_version": __version__, "protocol": PROTOCOL,
                             "tools_etag": catalogue.ETAG, "heartbeat_s": d.core.config.heartbeat_seconds}
    if transient:
        reply["hook"] = hooks.settings(d.core)
    return reply


def tools(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    """The tools of the profile asked for, else the config's; `call` serves every known tool."""
    profile = args.get("profile") or d.core.config.tools
    if profile not in PROFILES:
        raise InvalidParams("profile", f"must be one of {', '.join(PROFILES)}")
    return catalogue.payload(profile)


def call(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> Any:
    """Run one tool; a retry of a call applied before a restart gets its first result back."""
    conn = d.connection(conn_id, "before calling tools")
    name = args.get("tool")
    tool = catalogue.TOOLS.get(name) if isinstance(name, str) else None
    if tool is None:
        raise BadRequest(f"unknown tool {str(name)[:100]!r}", {"param": "name"}, kind="unknown_tool")
    core = d.core
    req = f"{conn_id}:{args['_req_id']}"
    applied = core.retries.applied(req)
    if applied is not None and tool.replay is not None and (replayed := tool.replay(core, applied)) is not None:
        return replayed
    raw = args.get("arguments")
    arguments = check_args(tool.input_schema, {} if raw is None else raw)
    if not tool.read_only and not core.writable():
        raise StorageError(str(core.root), errno.ENOSPC,
                           f"the store at {core.root} is out of space: {tool.name} was not applied; "
                           "reads still work, writes resume once space is freed")
    if arguments.get("wait_for") is not None:
        d.parked.check_room(conn_id)
    session = d.bindings.current(conn)
    result = tool.handler(Call(core, conn, session, req), arguments)
    d.bindings.after_call(conn, session)
    if isinstance(result, Parked):
        d.parked.park(conn, args["_req_id"], result)
    return result


def admin_op(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    """Operator reads and decisions; a decision is logged as the operator session's, so bind one first."""
    conn = d.conns.get(conn_id)
    if conn is not None and args.get("action") in ("resolve", "sync_resolve"):
        d.bindings.current(conn)
    return admin.handle(d.core, conn, args)


def episodes(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    return admin.episodes(d.core, args)


def hook(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    return binding.hook(d.core, d.bindings, d.news, d.connection(conn_id, "before hook calls"), args)


def heartbeat(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    d.connection(conn_id, "again")
    return {}


def bye(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    if (conn := d.conns.pop(conn_id, None)) is not None:
        if (session := d.core.sessions.get(conn.session_id)) is not None and session.conn == conn_id:
            hooks.end_session(d.core, session, "closed", d.bindings.client_sessions)
        d.parked.drop(conn_id)
    return {}


def status(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    core = d.core
    counts = {"episodes": len(core.journal.by_id), "sessions": len(core.sessions), "events": core.log.seq}
    if core.memories is not None:
        counts.update(core.memories.counts())
    return {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL,
            "uptime_s": round(core.clock() - core.started, 1), "connections": len(d.conns),
            "open_sessions": len(core.sessions.open_sessions()), "store": str(core.root),
            "counts": counts, "refused_peers": d.refused_peers, **core.stats}


def stop(d: Server, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    d.running = False
    d.on_stop()  # removes the status file *before* the reply: a dying daemon must not look alive
    return {}

OPS: dict[str, Callable[[Server, str, bytes, dict[str, Any]], Any]] = {
    "hello": hello, "tools": tools, "call": call, "heartbeat": heartbeat, "bye": bye,
    "status": status, "stop": stop, "episodes": episodes, "hook": hook, "admin": admin_op,
}
