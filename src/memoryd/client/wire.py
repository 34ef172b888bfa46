"""A transport for the hooks, which cannot afford pyzmq's import (docs/benchmark.md): ZMTP 3.0 (NULL
mechanism) over the daemon's ipc socket, one request at a time. Import contract: stdlib only."""

from __future__ import annotations

import select
import socket


class WireError(RuntimeError):
    """The peer did not speak ZMTP 3 as expected (the caller falls back to pyzmq)."""


# signature, version 3.0, mechanism NULL, as-server 0, filler (rfc.zeromq.org/spec/23)
GREETING = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31
_READY = b"\x05READY" + b"\x0bSocket-Type" + (6).to_bytes(4, "big") + b"DEALER"


class Wire:
    """A DEALER's half of ZMTP 3.0: the daemon's ROUTER and its ZAP uid check cannot tell it from libzmq."""

    def __init__(self, endpoint: str, timeout: float) -> None:
        if not endpoint.startswith("ipc://"):
            raise WireError("not an ipc endpoint")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.buffer = b""
        try:
            self.sock.connect(endpoint[len("ipc://"):])
            self.sock.sendall(GREETING + self._frame_bytes(_READY, command=True))
            peer = self._exact(64)
            if peer[0] != 0xFF or peer[9] != 0x7F or peer[10] < 3 or not peer[12:32].startswith(b"NULL"):
                raise WireError("peer greeting is not ZMTP 3 NULL")
            flags, body = self._frame()
            if not flags & 0x04 or not body.startswith(b"\x05READY"):
                raise WireError("handshake refused")
        except BaseException:
            self.sock.close()
            raise

    @staticmethod
    def _frame_bytes(body: bytes, command: bool = False) -> bytes:
        flags = 0x04 if command else 0x00
        if len(body) < 256:
            return bytes([flags, len(body)]) + body
        return bytes([flags | 0x02]) + len(body).to_bytes(8, "big") + body

    def _exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise WireError("the daemon closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self) -> tuple[int, bytes]:
        flags = self._exact(1)[0]
        size = int.from_bytes(self._exact(8 if flags & 0x02 else 1), "big")
        return flags, self._exact(size)

    def send(self, payload: bytes) -> bool:
        """True, or OSError past the socket's timeout."""
        self.sock.sendall(self._frame_bytes(payload))
        return True

    def wait_for_peer(self, probe: bytes, timeout_s: float = 1.0) -> None:
        """Nothing to wait for: the constructor's handshake already met the daemon."""

    def poll(self, timeout_s: float) -> bool:
        return bool(self.buffer) or bool(select.select([self.sock], [], [], max(0.0, timeout_s))[0])

    def recv_ready(self) -> list[bytes]:
        """The next message (its last frame); commands such as PING are skipped."""
        while True:
            flags, body = self._frame()
            if not flags & 0x04 and not flags & 0x01:
                return [body]

    def close(self) -> None:
        self.sock.close()
