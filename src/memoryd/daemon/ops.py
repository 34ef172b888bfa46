"""The wire's op handlers and the state they share with the loop (`Daemon`); each returns the result
or a `tool.Parked`, or raises from the one exception tree."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

from memoryd import PROTOCOL, __version__
from memoryd.daemon import catalogue
from memoryd.daemon.calls.validate import check_args
from memoryd.daemon.core import Call, Core
from memoryd.daemon.identity.session_table import Conn, is_operator_client
from memoryd.daemon.process import admin
from memoryd.daemon.process.waiting import ParkedCalls
from memoryd.daemon.sessions import binding, hooks
from memoryd.daemon.sessions.news import News
from memoryd.daemon.tool import Parked
from memoryd.errors import BadRequest, InvalidParams, ProtocolMismatch, StorageError
from memoryd.profiles import PROFILES


class Daemon:
    def __init__(self, core: Core, on_stop: Callable[[], None]) -> None:
        self.core = core
        self.on_stop = on_stop
        self.running = True
        self.conns: dict[str, Conn] = {}
        self.parked = ParkedCalls()
        self.bindings = binding.Bindings(core, self.conns)
        self.news = News()
        core.observers.append(self.news.observe)
        self.refused_peers = 0  # peers of another uid (server.Server.answer_zap)

    def connection(self, conn_id: str, doing: str) -> Conn:
        if (conn := self.conns.get(conn_id)) is None:
            raise BadRequest(f"unknown connection: say hello {doing}", kind="unknown_connection")
        return conn


def hello(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
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


def tools(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    """The tools of the profile asked for, else the config's; `call` serves every known tool."""
    profile = args.get("profile") or d.core.config.tools
    if profile not in PROFILES:
        raise InvalidParams("profile", f"must be one of {', '.join(PROFILES)}")
    return catalogue.payload(profile)


def call(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> Any:
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


def admin_op(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    """Operator reads and decisions; a decision is logged as the operator session's, so bind one first."""
    conn = d.conns.get(conn_id)
    if conn is not None and args.get("action") in ("resolve", "sync_resolve"):
        d.bindings.current(conn)
    return admin.handle(d.core, conn, args)


def episodes(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    return admin.episodes(d.core, args)


def hook(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    return binding.hook(d.core, d.bindings, d.news, d.connection(conn_id, "before hook calls"), args)


def heartbeat(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    d.connection(conn_id, "again")
    return {}


def bye(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    if (conn := d.conns.pop(conn_id, None)) is not None:
        if (session := d.core.sessions.get(conn.session_id)) is not None and session.conn == conn_id:
            hooks.end_session(d.core, session, "closed", d.bindings.client_sessions)
        d.parked.drop(conn_id)
    return {}


def status(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    core = d.core
    counts = {"episodes": len(core.journal.by_id), "sessions": len(core.sessions), "events": core.log.seq}
    if core.memories is not None:
        counts.update(core.memories.counts())
    return {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL,
            "uptime_s": round(core.clock() - core.started, 1), "connections": len(d.conns),
            "open_sessions": len(core.sessions.open_sessions()), "store": str(core.root),
            "counts": counts, "refused_peers": d.refused_peers, **core.stats}


def stop(d: Daemon, conn_id: str, routing_id: bytes, args: dict[str, Any]) -> dict[str, Any]:
    d.running = False
    d.on_stop()  # removes the status file *before* the reply: a dying daemon must not look alive
    return {}

