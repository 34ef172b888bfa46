"""The bridge's single-threaded loop: one poller over stdin, the daemon socket and its monitor.

Calls are forwarded as they arrive and answered by id, so a parked `episode_search(wait_for=…)`
never holds up the agent's other calls. stdout carries protocol only; logs go to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import zmq

from memoryd import identity
from memoryd.client.connection import CALL_TIMEOUT_S, Connection
from memoryd.errors import (
    DAEMON_UNAVAILABLE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MemorydError,
)
from memoryd.mcp_bridge import jsonrpc

READ_CHUNK = 1 << 16
EOF_DRAIN_S = 2.0


@dataclass
class Pending:
    msg_id: Any          # the agent's JSON-RPC id
    op: str              # "call" or "tools"
    args: dict[str, Any]
    deadline: float
    resent: bool = False


def log(message: str) -> None:
    print(f"memoryd-mcp: {message}", file=sys.stderr, flush=True)


class Bridge:
    def __init__(self) -> None:
        self.out = sys.stdout.buffer
        self.buffer = b""
        self.conn: Connection | None = None
        self.client_info: dict[str, Any] = {}
        self.tools: list[dict[str, Any]] | None = None
        self.pending: dict[int, Pending] = {}
        self.last_sent = time.monotonic()
        self.eof = False

    # -- stdio ---------------------------------------------------------------------------------

    def write(self, line: bytes) -> None:
        self.out.write(line)
        self.out.flush()

    def read_stdin(self) -> list[bytes]:
        try:
            chunk = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return []
        if not chunk:
            self.eof = True
            return [self.buffer] if self.buffer.strip() else []
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line for line in lines if line.strip()]

    # -- daemon --------------------------------------------------------------------------------

    def ensure_connected(self) -> Connection:
        if self.conn is None or self.conn.sock is None:
            ident = identity.capture()
            name = self.client_info.get("name")
            ident["client"] = f"{name}/{self.client_info.get('version', '?')}" if name else None
            self.conn = self.conn or Connection(ident)
            self.conn.connect()
            self.last_sent = time.monotonic()
        return self.conn

    def forward(self, msg_id: Any, op: str, args: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> None:
        """Send one request and remember it by id; the answer is written when it arrives."""
        try:
            conn = self.ensure_connected()
        except MemorydError as exc:
            self.write(jsonrpc.error(msg_id, exc.code, exc.message, exc.data))
            return
        req_id = conn.new_id()
        self.pending[req_id] = Pending(msg_id, op, args, time.monotonic() + timeout)
        try:
            sent = conn.send(req_id, op, args)
        except (ValueError, OverflowError, TypeError):  # msgpack: lone surrogates, ints over 64 bits
            self.pending.pop(req_id)
            self.write(jsonrpc.error(msg_id, INVALID_PARAMS, "arguments hold a value that cannot be encoded",
                                     {"param": "arguments", "reason": "lone surrogate or integer over 64 bits"}))
            return
        if not sent:
            self.recover()
        self.last_sent = time.monotonic()

    def recover(self) -> None:
        """The daemon went away: reconnect (auto-spawning, reattaching), resend what is pending once."""
        assert self.conn is not None
        try:
            self.conn.reconnect()
        except MemorydError as exc:
            log(f"daemon unavailable: {exc.message}")
            self.fail_all(exc)
            return
        for req_id, pending in list(self.pending.items()):
            if pending.resent or not self.conn.send(req_id, pending.op, pending.args):
                self.pending.pop(req_id)
                self.write(jsonrpc.error(pending.msg_id, DAEMON_UNAVAILABLE, "daemon unavailable after a retry",
                                         {"kind": "daemon_unavailable", "endpoint": self.conn.endpoint}))
            else:
                pending.resent = True

    def fail_all(self, exc: MemorydError) -> None:
        for pending in self.pending.values():
            self.write(jsonrpc.error(pending.msg_id, exc.code, exc.message, exc.data))
        self.pending.clear()

    def on_daemon_replies(self, replies: list[dict[str, Any]]) -> None:
        for reply in replies:
            if (reply.get("error") or {}).get("kind") == "unknown_connection":
                # The daemon does not know us (it restarted): hello again, reattach, resend once.
                # The rest of this batch came from the old socket and is moot.
                self.recover()
                return
            self.on_daemon_reply(reply)

    def on_daemon_reply(self, reply: dict[str, Any]) -> None:
        error = reply.get("error") or {}
        pending = self.pending.pop(reply["id"], None)
        if pending is None:
            return  # a heartbeat, or an answer we already gave up on
        if reply.get("ok") and pending.op == "tools":
            self.tools = (reply.get("result") or {}).get("tools", [])
            self.write(jsonrpc.response(pending.msg_id, {"tools": self.tools}))
            return
        if reply.get("ok"):
            self.write(jsonrpc.response(pending.msg_id, jsonrpc.tool_result(reply.get("result") or {})))
            return
        code = int(error.get("code", INTERNAL_ERROR))
        if error.get("kind") == "unknown_tool":
            code = INVALID_PARAMS
        self.write(jsonrpc.error(pending.msg_id, code, str(error.get("message", "")), error.get("data")))

    def check_deadlines(self) -> None:
        now = time.monotonic()
        if any(p.deadline <= now for p in self.pending.values()):
            for pending in self.pending.values():
                pending.deadline = max(pending.deadline, now + CALL_TIMEOUT_S)
            self.recover()
        if self.conn is not None and self.conn.sock is not None and now - self.last_sent > self.heartbeat_s():
            self.conn.send(self.conn.new_id(), "heartbeat", {})
            self.last_sent = now

    def heartbeat_s(self) -> float:
        return float(self.conn.hello.get("heartbeat_s", 5)) if self.conn else 5.0

    # -- JSON-RPC methods ----------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> None:
        method, msg_id = message.get("method"), message.get("id")
        if method is None:
            return  # a response to something we never ask; ignore
        if "id" not in message:
            return self.notification(method, message.get("params") or {})
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return self.write(jsonrpc.error(msg_id, INVALID_PARAMS, "params must be an object"))
        handler = {"initialize": self.initialize, "ping": self.ping, "tools/list": self.tools_list,
                   "tools/call": self.tools_call}.get(method)
        if handler is None:
            return self.write(jsonrpc.error(msg_id, METHOD_NOT_FOUND, f"Method not found: {method}"))
        handler(msg_id, params)

    def notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            for req_id, pending in list(self.pending.items()):
                if pending.msg_id == params.get("requestId"):
                    self.pending.pop(req_id)  # best effort: the daemon may still finish it

    def initialize(self, msg_id: Any, params: dict[str, Any]) -> None:
        self.write(jsonrpc.response(msg_id, jsonrpc.initialize_result(params)))
        self.after_initialize(params)

    def after_initialize(self, params: dict[str, Any]) -> None:
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}
        try:  # connect now, while the agent reads the answer, so tools/list is quick
            self.ensure_connected()
        except MemorydError as exc:
            log(f"daemon unavailable at start: {exc.message}")

    def ping(self, msg_id: Any, params: dict[str, Any]) -> None:
        self.write(jsonrpc.response(msg_id, {}))

    def tools_list(self, msg_id: Any, params: dict[str, Any]) -> None:
        if self.tools is not None:
            self.write(jsonrpc.response(msg_id, {"tools": self.tools}))
        else:  # asynchronously, like calls: a blocking fetch would swallow their replies
            self.forward(msg_id, "tools", {})

    def tools_call(self, msg_id: Any, params: dict[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str):
            return self.write(jsonrpc.error(msg_id, INVALID_PARAMS, "tools/call needs a tool 'name'",
                                            {"param": "name", "reason": "is required"}))
        if not isinstance(arguments, dict):
            return self.write(jsonrpc.error(msg_id, INVALID_PARAMS, "'arguments' must be an object",
                                            {"param": "arguments", "reason": "must be an object"}))
        wait = arguments.get("timeout_s", 30) if arguments.get("wait_for") else None
        timeout = float(wait) + 5 if isinstance(wait, (int, float)) and 0 <= wait <= 300 else CALL_TIMEOUT_S
        self.forward(msg_id, "call", {"tool": name, "arguments": arguments}, timeout)

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        os.set_blocking(0, False)
        drain_until = None
        if self.buffer:  # lines that arrived together with the first one
            self.on_lines(self.read_buffered())
        while not self.eof or (self.pending and time.monotonic() < drain_until):  # type: ignore[operator]
            poller = zmq.Poller()
            poller.register(0, zmq.POLLIN)
            if self.conn is not None and self.conn.sock is not None:
                poller.register(self.conn.sock, zmq.POLLIN)
                poller.register(self.conn.monitor, zmq.POLLIN)
            ready = dict(poller.poll(250))
            if self.conn is not None and self.conn.monitor in ready and self.conn.daemon_went_away():
                self.recover()
            if self.conn is not None and self.conn.sock in ready:
                self.on_daemon_replies(self.conn.recv_ready())
            if 0 in ready and not self.eof:
                self.on_stdin()
                if self.eof:  # answer what is already in flight (briefly), then say goodbye
                    drain_until = time.monotonic() + EOF_DRAIN_S
            self.check_deadlines()
        return self.shutdown()

    def read_buffered(self) -> list[bytes]:
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line for line in lines if line.strip()]

    def on_stdin(self) -> None:
        self.on_lines(self.read_stdin())

    def on_lines(self, lines: list[bytes]) -> None:
        for line in lines:
            message, err = jsonrpc.parse(line)
            if err is not None:
                self.write(err)
            elif message is not None:
                self.handle(message)

    def shutdown(self) -> int:
        # Answers still owed are lost with stdin; tell the daemon we are leaving cleanly.
        if self.conn is not None:
            self.conn.close(say_bye=True)
        return 0


