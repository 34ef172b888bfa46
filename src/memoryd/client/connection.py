"""The one client of the daemon: hello, deadlines, one resend (docs/wire.md, "Deadlines, resend and the
reply cache"). Import contract: stdlib, paths, protocol, errors, client.spawn, client.wire; pyzmq only
once a pyzmq transport opens (the hooks cannot afford it)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Self, cast

from memoryd import PROTOCOL, __version__, paths
from memoryd.client import spawn
from memoryd.client.wire import Wire, WireError
from memoryd.errors import DAEMON_UNAVAILABLE, DaemonUnavailable, MemorydError, from_wire
from memoryd.protocol import decode_reply, encode_request

if TYPE_CHECKING:
    from memoryd.client.zmq_socket import ZmqSocket

CALL_TIMEOUT_S = 10.0
HELLO_TIMEOUT_S = 5.0
BYE_WAIT_S = 0.2


class Connection:
    """One logical connection. `autospawn`: seconds it may spend starting a daemon (True: SPAWN_WAIT_S, 0: never).
    `stdlib`: the wire without pyzmq. `retry`: resend once, hello again once. A lock serializes calls."""

    def __init__(self, identity: dict[str, Any], endpoint: str | None = None, autospawn: bool | float = True,
                 timeout_s: float = CALL_TIMEOUT_S, stdlib: bool = False, retry: bool = True) -> None:
        self.identity, self.endpoint = identity, endpoint or paths.endpoint()
        self.spawn_s = spawn.SPAWN_WAIT_S if autospawn is True else float(autospawn)
        self.timeout_s, self.stdlib, self.retry = timeout_s, stdlib, retry
        self.conn_id = os.urandom(12).hex()
        self.transport: ZmqSocket | Wire | None = None
        self.last_id = 0
        self.session_id: str | None = None
        self.hello: dict[str, Any] = {}
        self.lock = threading.RLock()

    def close_socket(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def new_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def send(self, req_id: int, op: str, args: dict[str, Any]) -> bool:
        """False when no daemon is connected; `InvalidParams` when the request cannot cross the wire."""
        frame = encode_request(req_id, op, args, self.conn_id)
        return self.transport is not None and self.transport.send(frame)

    def recv_ready(self) -> list[dict[str, Any]]:
        replies = []
        for frame in self.transport.recv_ready() if self.transport is not None else []:
            try:
                reply = decode_reply(frame)
            except MemorydError:
                continue
            if isinstance(reply, dict) and isinstance(reply.get("id"), int):
                replies.append(reply)
        return replies

    def wait_reply(self, req_id: int, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while self.transport is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.transport.poll(remaining):
                return None
            for reply in self.recv_ready():
                if reply["id"] == req_id:
                    return reply
        return None

    def call(self, op: str, args: dict[str, Any], timeout_s: float | None = None) -> Any:
        """A synchronous call with a deadline, connecting first if need be; DaemonUnavailable after the retry."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        with self.lock:
            req_id = self.new_id()
            for attempt in range(2 if self.retry else 1):
                if self.transport is None or attempt:
                    self.reconnect()
                if self.send(req_id, op, args):
                    reply = self.wait_reply(req_id, timeout_s)
                    forgot = reply is not None and (reply.get("error") or {}).get("kind") == "unknown_connection"
                    if reply is not None and not (forgot and self.retry and not attempt):
                        return unwrap(reply)
        raise DaemonUnavailable(self.endpoint, f"no reply to '{op}' within {timeout_s:g} s")

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """An agent tool, called as this connection's session (None arguments are omitted)."""
        return cast("dict[str, Any]", self.call("call", {"tool": name, "arguments": _given(arguments)}))

    def admin(self, action: str, **args: Any) -> dict[str, Any]:
        return cast("dict[str, Any]", self.call("admin", {"action": action, **_given(args)}))

    def hook(self, action: str, **args: Any) -> dict[str, Any]:
        return cast("dict[str, Any]", self.call("hook", {"action": action, **args}))

    def connect(self) -> dict[str, Any]:
        """Reach a daemon and say hello; over the stdlib wire one is started only when its socket is missing."""
        self.close_socket()
        if self.stdlib:
            with contextlib.suppress(WireError):  # a peer that is no ZMTP 3 daemon: try pyzmq
                try:
                    return self._hello_over(stdlib=True)
                except (FileNotFoundError, ConnectionRefusedError):
                    self._start_daemon()
                    return self._hello_over(stdlib=True)
        elif self.spawn_s:
            self._start_daemon()
        return self._hello_over(stdlib=False)

    def _start_daemon(self) -> None:
        if not self.spawn_s or not spawn.ensure_daemon(self.endpoint, wait_s=self.spawn_s):
            raise DaemonUnavailable(self.endpoint, "could not start the daemon (see `memoryd doctor`)")

    def _hello_over(self, stdlib: bool) -> dict[str, Any]:
        """Open a transport (pyzmq's loads only here) and say hello on it, reattaching to our session if any."""
        try:
            if stdlib:
                transport: ZmqSocket | Wire = Wire(self.endpoint, self.timeout_s)
            else:
                from memoryd.client.zmq_socket import ZmqSocket

                transport = ZmqSocket(self.endpoint)
            self.transport = transport
            req_id = self.new_id()
            args = {"protocol": PROTOCOL, "client_version": __version__, "identity": self.identity,
                    "session_id": self.session_id}
            if not self.send(req_id, "hello", args):
                transport.wait_for_peer(encode_request(self.new_id(), "heartbeat", {}, self.conn_id))
                if not self.send(req_id, "hello", args):
                    raise DaemonUnavailable(self.endpoint, "the daemon does not accept connections")
            wait_s = min(HELLO_TIMEOUT_S, self.timeout_s)
            reply = self.wait_reply(req_id, wait_s)
            if reply is None:
                raise DaemonUnavailable(self.endpoint, f"no reply to hello within {wait_s:g} s")
            self.hello = unwrap(reply)
            self.session_id = self.hello["session_id"]
            return self.hello
        except BaseException:
            self.close_socket()  # a socket without a session must not look connected
            raise

    reconnect = connect

    def keepalive(self) -> None:
        """A heartbeat, so a long-lived operator session is not ended as lost between requests."""
        with self.lock:
            if self.transport is not None:
                try:
                    self.call("heartbeat", {}, 2.0)
                except MemorydError:
                    self.close_socket()  # said hello again on the next request

    def close(self, say_bye: bool = True, wait_s: float = BYE_WAIT_S) -> None:
        with self.lock:
            if say_bye and self.transport is not None:
                req_id = self.new_id()
                with contextlib.suppress(OSError):
                    if self.send(req_id, "bye", {}):
                        self.wait_reply(req_id, wait_s)
            self.close_socket()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Operator(Connection):
    """The CLI's or web view's: never starts a daemon (an operator wants to know it is down)."""

    def __init__(self, client: str = "memoryd-cli", endpoint: str | None = None) -> None:
        super().__init__({"client": f"{client}/{__version__}"}, endpoint, autospawn=False)


def is_unavailable(exc: MemorydError) -> bool:
    return exc.code == DAEMON_UNAVAILABLE or exc.kind == "daemon_unavailable"


def _given(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None}


def unwrap(reply: dict[str, Any]) -> Any:
    if reply.get("ok"):
        return reply.get("result")
    raise from_wire(reply.get("error") or {})
