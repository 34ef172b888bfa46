"""One logical connection to the daemon: a DEALER socket, request ids, hello, deadlines, resend.

The connection id (`conn`) outlives sockets: after a timeout the socket is replaced and the same
request id is resent, and the daemon's per-connection reply cache makes that resend harmless.
"""

from __future__ import annotations

import os
import time
from typing import Any

import zmq

from memoryd import PROTOCOL, __version__, paths
from memoryd.client import spawn
from memoryd.errors import DaemonUnavailable, MemorydError, from_wire
from memoryd.protocol import decode_reply, encode_request

CALL_TIMEOUT_S = 10.0
# pyzmq's flag and option enums cost microseconds per use; the per-call paths pass plain ints.
_NOBLOCK, _EVENTS, _POLLIN = int(zmq.NOBLOCK), int(zmq.EVENTS), int(zmq.POLLIN)


class Connection:
    def __init__(self, identity: dict[str, Any], endpoint: str | None = None, autospawn: bool = True) -> None:
        self.identity = identity
        self.endpoint = endpoint or paths.endpoint()
        self.autospawn = autospawn
        self.conn_id = os.urandom(12).hex()
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.sock: zmq.Socket[bytes] | None = None
        self.monitor: zmq.Socket[bytes] | None = None
        self.last_id = 0
        self.session_id: str | None = None
        self.hello: dict[str, Any] = {}

    # -- sockets -------------------------------------------------------------------------------

    def open_socket(self) -> zmq.Socket[bytes]:
        self.close_socket()
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)      # the default (-1) would hang ctx.term() on exit
        sock.setsockopt(zmq.IMMEDIATE, 1)   # with no peer, a send fails fast instead of queueing
        self.monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(self.endpoint)
        self.sock = sock
        return sock

    def close_socket(self) -> None:
        if self.sock is not None:
            try:
                self.sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self.sock.close(linger=0)
            self.sock = None
        if self.monitor is not None:
            self.monitor.close(linger=0)
            self.monitor = None

    def daemon_went_away(self) -> bool:
        """Drain the monitor; True when the daemon side of the socket disconnected."""
        gone = False
        while self.monitor is not None:
            try:
                self.monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            gone = True
        return gone

    # -- requests ------------------------------------------------------------------------------

    def new_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def send(self, req_id: int, op: str, args: dict[str, Any]) -> bool:
        """Send without blocking; False when no daemon is connected (the caller reconnects).

        Raises `InvalidParams` naming the argument when the request could not cross the wire (too
        big for a frame, too deep, not encodable): sent anyway, libzmq would drop the connection.
        """
        frame = encode_request(req_id, op, args, self.conn_id)
        if self.sock is None:
            return False
        try:
            self.sock.send(frame, _NOBLOCK)
        except zmq.Again:
            return False
        return True

    def recv_ready(self) -> list[dict[str, Any]]:
        replies = []
        while self.sock is not None and int(self.sock.get(_EVENTS)) & _POLLIN:  # cheaper than a zmq.Again
            try:
                frame = self.sock.recv(_NOBLOCK)
            except zmq.Again:
                break
            try:
                reply = decode_reply(frame)
            except MemorydError:
                continue
            if isinstance(reply, dict) and isinstance(reply.get("id"), int):
                replies.append(reply)
        return replies

    def wait_reply(self, req_id: int, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while self.sock is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.sock.poll(int(remaining * 1000) + 1):
                return None
            for reply in self.recv_ready():
                if reply["id"] == req_id:
                    return reply
        return None

    def call(self, op: str, args: dict[str, Any], timeout_s: float = CALL_TIMEOUT_S) -> Any:
        """A synchronous call with a deadline, one resend on a fresh socket, then DaemonUnavailable."""
        req_id = self.new_id()
        for attempt in range(2):
            if self.sock is None or attempt:
                self.reconnect()
            if self.send(req_id, op, args):
                reply = self.wait_reply(req_id, timeout_s)
                if reply is not None:
                    return unwrap(reply)
        raise DaemonUnavailable(self.endpoint, f"no reply to '{op}' within {timeout_s:g} s")

    # -- hello and reconnect -------------------------------------------------------------------

    def connect(self) -> dict[str, Any]:
        """Reach a daemon (auto-spawning it) and say hello, reattaching to our session if any."""
        if self.autospawn and not spawn.ensure_daemon(self.endpoint):
            raise DaemonUnavailable(self.endpoint, "could not start the daemon (see `memoryd doctor`)")
        self.open_socket()
        try:
            return self._hello()
        except BaseException:
            self.close_socket()  # a socket without a session must not look connected
            raise

    def _hello(self) -> dict[str, Any]:
        req_id = self.new_id()
        args = {"protocol": PROTOCOL, "client_version": __version__, "identity": self.identity,
                "session_id": self.session_id}
        if not self.send(req_id, "hello", args):
            self._wait_for_peer()
            if not self.send(req_id, "hello", args):
                raise DaemonUnavailable(self.endpoint, "the daemon does not accept connections")
        reply = self.wait_reply(req_id, 5.0)
        if reply is None:
            raise DaemonUnavailable(self.endpoint, "no reply to hello within 5 s")
        self.hello = unwrap(reply)
        self.session_id = self.hello["session_id"]
        return self.hello

    def _wait_for_peer(self, timeout_s: float = 1.0) -> None:
        # IMMEDIATE makes the first send fail until the ipc connection is up (a few ms after connect).
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.send(self.new_id(), "heartbeat", {}):
                return
            time.sleep(0.005)

    def reconnect(self) -> dict[str, Any]:
        self.close_socket()
        return self.connect()

    def close(self, say_bye: bool = True) -> None:
        if say_bye and self.sock is not None:
            req_id = self.new_id()
            if self.send(req_id, "bye", {}):
                self.wait_reply(req_id, 0.2)
        self.close_socket()


def unwrap(reply: dict[str, Any]) -> Any:
    if reply.get("ok"):
        return reply.get("result")
    raise from_wire(reply.get("error") or {})
