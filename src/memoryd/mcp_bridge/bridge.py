"""The bridge's single-threaded loop: one poller over stdin, the daemon socket and its monitor; calls are
forwarded as they arrive and answered by id (docs/wire.md, "The MCP side of the bridge")."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from memoryd import errors, identity, names
from memoryd.client.connection import CALL_TIMEOUT_S, Connection
from memoryd.client.zmq_socket import ZmqSocket
from memoryd.mcp_bridge import jsonrpc, resources, revision

READ_CHUNK = 1 << 16
EOF_DRAIN_S = 2.0


@dataclass(frozen=True)
class Ask:
    """One request from the agent: its id, its method, and its era (see revision.py)."""
    msg_id: Any
    method: str
    modern: bool = False


Shape = Callable[[dict[str, Any]], dict[str, Any]]  # the daemon's answer -> the MCP result
# What the bridge answers itself, a fresh result each time (discover's, already finished, finishes the same again).
ANSWERED_HERE: dict[str, Callable[[], dict[str, Any]]] = {
    "ping": dict, "server/discover": revision.discover_result, "resources/templates/list": resources.TEMPLATES.copy}


@dataclass
class Pending:
    ask: Ask             # whom to answer, and in which era
    op: str              # "call" or "tools"
    args: dict[str, Any]
    deadline: float
    shape: Shape = jsonrpc.tool_result
    uri: str | None = None  # a resources/read's: the daemon's unknown_memory is its "Resource not found"
    resent: bool = False


def log(message: str) -> None:
    print(f"memoryd-mcp: {message}", file=sys.stderr, flush=True)


class Bridge:
    def __init__(self, profile: str | None = None, reader: jsonrpc.LineReader | None = None) -> None:
        self.profile = profile  # the tool profile to list (profiles.py); None: the daemon's config says
        self.out = sys.stdout.buffer
        self.reader = reader or jsonrpc.LineReader()  # startup.py's holds what came after the first line
        self.conn: Connection | None = None
        self.client_info: dict[str, Any] = {}
        self.tools: list[dict[str, Any]] | None = None
        self.pending: dict[int, Pending] = {}
        self.last_sent = time.monotonic()
        self.eof = False

    def write(self, line: bytes) -> None:
        self.out.write(line)
        self.out.flush()

    def answer(self, ask: Ask, result: dict[str, Any]) -> None:
        self.write(jsonrpc.response(ask.msg_id, revision.finish(ask.method, result) if ask.modern else result))

    def fail(self, ask: Ask, code: int, message: str, data: Any = None) -> None:
        if ask.modern and code == errors.RESOURCE_STATE:
            code = errors.INVALID_PARAMS  # 2026-07-28 forbids -32002; data.kind still says which state it was
        self.write(jsonrpc.error(ask.msg_id, code, message, data))

    def bad_param(self, ask: Ask, message: str, param: str, reason: str, **more: Any) -> None:
        self.fail(ask, errors.INVALID_PARAMS, message, {"param": param, "reason": reason, **more})

    def read_stdin(self) -> list[bytes | jsonrpc.Oversize]:
        try:
            chunk = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return []
        if chunk:
            self.reader.feed(chunk)
        else:
            self.eof = True
            self.reader.finish()
        return self.reader.take()

    def ensure_connected(self) -> Connection:
        if self.conn is None or self.conn.transport is None:
            ident = identity.own()
            name = self.client_info.get("name")
            ident["client"] = f"{name}/{self.client_info.get('version', '?')}" if name else None
            self.conn = self.conn or Connection(ident)
            self.conn.connect()
            self.last_sent = time.monotonic()
        return self.conn

    def forward(self, ask: Ask, op: str, args: dict[str, Any], timeout: float = CALL_TIMEOUT_S,
                shape: Shape = jsonrpc.tool_result, uri: str | None = None) -> None:
        """Send one request and remember it by id; its answer is written (through `shape`) when it arrives."""
        try:
            conn = self.ensure_connected()
            req_id = conn.new_id()
            sent = conn.send(req_id, op, args)
        except errors.MemorydError as exc:  # no daemon, or the request cannot cross the wire
            return self.fail(ask, exc.code, exc.message, exc.data)
        self.pending[req_id] = Pending(ask, op, args, time.monotonic() + timeout, shape, uri)
        if not sent:
            self.recover()
        self.last_sent = time.monotonic()

    def recover(self) -> None:
        """The daemon went away: reconnect (auto-spawning, reattaching), resend what is pending once."""
        assert self.conn is not None
        try:
            self.conn.reconnect()
        except errors.MemorydError as exc:
            log(f"daemon unavailable: {exc.message}")
            for pending in self.pending.values():
                self.fail(pending.ask, exc.code, exc.message, exc.data)
            return self.pending.clear()
        for req_id, pending in list(self.pending.items()):
            if pending.resent or not self.conn.send(req_id, pending.op, pending.args):
                self.pending.pop(req_id)
                self.fail(pending.ask, errors.DAEMON_UNAVAILABLE, "daemon unavailable after a retry",
                          {"kind": "daemon_unavailable", "endpoint": self.conn.endpoint})
            else:
                pending.resent = True

    def on_daemon_replies(self, replies: list[dict[str, Any]]) -> None:
        for reply in replies:
            if (reply.get("error") or {}).get("kind") == "unknown_connection":  # the daemon restarted:
                return self.recover()  # hello again, resend once; the rest of this batch is moot
            self.on_daemon_reply(reply)

    def on_daemon_reply(self, reply: dict[str, Any]) -> None:
        error = reply.get("error") or {}
        pending = self.pending.pop(reply["id"], None)
        if pending is None:
            return  # a heartbeat, or an answer we already gave up on
        if reply.get("ok"):
            result = reply.get("result") or {}
            if pending.op == "tools":
                self.tools = result.get("tools", [])
            return self.answer(pending.ask, {"tools": self.tools} if pending.op == "tools" else pending.shape(result))
        if pending.uri is not None and error.get("kind") == "unknown_memory":
            return self.fail(pending.ask, *self.not_found(pending.uri))
        code = int(error.get("code", errors.INTERNAL_ERROR))
        code = errors.INVALID_PARAMS if error.get("kind") == "unknown_tool" else code
        self.fail(pending.ask, code, str(error.get("message", "")), error.get("data"))

    def check_deadlines(self) -> None:
        now = time.monotonic()
        if any(p.deadline <= now for p in self.pending.values()):
            for pending in self.pending.values():
                pending.deadline = max(pending.deadline, now + CALL_TIMEOUT_S)
            self.recover()
        beat_s = float(self.conn.hello.get("heartbeat_s", 5)) if self.conn else 5.0
        if self.conn is not None and self.conn.transport is not None and now - self.last_sent > beat_s:
            self.conn.send(self.conn.new_id(), "heartbeat", {})
            self.last_sent = now

    def handle(self, message: dict[str, Any]) -> None:
        method, msg_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:
            return  # a response to something we never ask; ignore
        if "id" not in message:
            return self.notification(method, params)
        if not isinstance(params, dict):
            return self.write(jsonrpc.error(msg_id, errors.INVALID_PARAMS, "params must be an object"))
        ask = Ask(msg_id, method, revision.is_modern(method, params))
        if ask.modern or method == "server/discover":  # discover exists only in the modern era
            try:
                info = revision.check_envelope(params)
            except revision.EnvelopeError as exc:
                return self.write(jsonrpc.error(msg_id, exc.code, exc.message, exc.data))
            self.client_info = self.client_info or info
        if method in ANSWERED_HERE:
            return self.answer(ask, ANSWERED_HERE[method]())
        handler = {"initialize": self.initialize, "tools/list": self.tools_list, "tools/call": self.tools_call,
                   "resources/list": self.resources_list, "resources/read": self.resources_read}.get(method)
        if handler is None:
            return self.write(jsonrpc.error(msg_id, errors.METHOD_NOT_FOUND, f"Method not found: {method}"))
        handler(ask, params)

    def notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            for req_id, pending in list(self.pending.items()):
                if pending.ask.msg_id == params.get("requestId"):
                    self.pending.pop(req_id)  # best effort: the daemon may still finish it

    def initialize(self, ask: Ask, params: dict[str, Any]) -> None:
        self.write(jsonrpc.response(ask.msg_id, jsonrpc.initialize_result(params)))
        info = params.get("clientInfo")
        self.after_hello(info if isinstance(info, dict) else {})

    def after_hello(self, client_info: dict[str, Any]) -> None:
        """The agent's opening request is answered: connect now, while it reads, so tools/list is quick."""
        self.client_info = client_info
        try:
            self.ensure_connected()
        except errors.MemorydError as exc:
            log(f"daemon unavailable at start: {exc.message}")

    def tools_list(self, ask: Ask, params: dict[str, Any]) -> None:
        if self.tools is not None:
            self.answer(ask, {"tools": self.tools})
        else:  # asynchronously, like calls: a blocking fetch would swallow their replies
            self.forward(ask, "tools", {"profile": self.profile} if self.profile else {})

    def tools_call(self, ask: Ask, params: dict[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str):
            return self.bad_param(ask, "tools/call needs a tool 'name'", "name", "is required")
        if not isinstance(arguments, dict):
            return self.bad_param(ask, "'arguments' must be an object", "arguments", "must be an object")
        wait = arguments.get("timeout_s", 30) if arguments.get("wait_for") else None
        timeout = float(wait) + 5 if isinstance(wait, (int, float)) and 0 <= wait <= 300 else CALL_TIMEOUT_S
        self.forward(ask, "call", {"tool": name, "arguments": arguments}, timeout)

    def resources_list(self, ask: Ask, params: dict[str, Any]) -> None:
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            return self.bad_param(ask, "'cursor' must be a string", "cursor", "must be a string")
        self.forward(ask, "call", {"tool": names.MEMORY_LIST, "arguments": resources.list_arguments(cursor)},
                     shape=resources.list_result)

    def resources_read(self, ask: Ask, params: dict[str, Any]) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str):
            return self.bad_param(ask, "resources/read needs a 'uri' string", "uri", "is required")
        if len(uri) > resources.MAX_URI_CHARS:
            return self.bad_param(ask, f"'uri' is too long ({len(uri)} characters; at most {resources.MAX_URI_CHARS})",
                                  "uri", "too long", length=len(uri))
        memory_id = resources.memory_id(uri)
        if memory_id is None:
            return self.fail(ask, *self.not_found(uri))
        self.forward(ask, "call", {"tool": names.MEMORY_SHOW, "arguments": {"id": memory_id}},
                     shape=lambda shown: resources.read_result(uri, shown), uri=uri)

    @staticmethod
    def not_found(uri: str) -> tuple[int, str, Any]:
        echoed = resources.echo(uri)  # `fail` turns -32002 into 2026-07-28's -32602
        return errors.RESOURCE_STATE, f"Resource not found: {echoed}", {"uri": echoed}

    def run(self) -> int:
        os.set_blocking(0, False)
        drain_until = None
        self.on_lines(self.reader.take())  # lines that arrived together with the first one
        poller, polled = zmq.Poller(), None
        while not self.eof or (self.pending and time.monotonic() < drain_until):  # type: ignore[operator]
            transport = self.conn.transport if self.conn is not None else None
            sockets = (transport.sock, transport.monitor) if isinstance(transport, ZmqSocket) else (None, None)
            if sockets != polled:  # connected, or reconnected on new sockets: poll those
                poller, polled = zmq.Poller(), sockets
                for sock in (0, *(s for s in sockets if s is not None)):
                    poller.register(sock, zmq.POLLIN)
            ready = dict(poller.poll(250))
            if isinstance(transport, ZmqSocket) and transport.monitor in ready and transport.went_away():
                self.recover()
            if self.conn is not None and self.conn.transport is transport and sockets[0] in ready:
                self.on_daemon_replies(self.conn.recv_ready())
            if 0 in ready and not self.eof:
                self.on_lines(self.read_stdin())
                if self.eof:  # answer what is already in flight (briefly), then say goodbye
                    drain_until = time.monotonic() + EOF_DRAIN_S
            self.check_deadlines()
        if self.conn is not None:  # answers still owed are lost with stdin; leave cleanly
            self.conn.close()
        return 0

    def on_lines(self, lines: list[bytes | jsonrpc.Oversize]) -> None:
        for line in lines:
            message = jsonrpc.parse(line)
            if isinstance(message, bytes):
                self.write(message)  # the error answer to a line that is no request
                continue
            try:
                self.handle(message)
            except Exception as exc:  # noqa: BLE001 - a bug must not cost the agent its memory for the session
                log(f"internal error on {str(message.get('method'))[:64]!r}: {type(exc).__name__}: {exc}"[:500])
                if "id" in message and "method" in message:
                    self.write(jsonrpc.error(message["id"], errors.INTERNAL_ERROR,
                                             f"internal error: {type(exc).__name__}"))


