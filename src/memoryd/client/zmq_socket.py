"""pyzmq's DEALER, with a disconnect monitor the bridge polls. Import contract: pyzmq and the stdlib."""

from __future__ import annotations

import contextlib
import time

import zmq

# pyzmq's flag and option enums cost microseconds per use; the per-call paths pass plain ints.
_NOBLOCK, _EVENTS, _POLLIN = int(zmq.NOBLOCK), int(zmq.EVENTS), int(zmq.POLLIN)


class ZmqSocket:
    def __init__(self, endpoint: str) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)      # the default (-1) would hang ctx.term() on exit
        sock.setsockopt(zmq.IMMEDIATE, 1)   # with no peer, a send fails fast instead of queueing
        self.monitor: zmq.Socket[bytes] = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(endpoint)
        self.sock: zmq.Socket[bytes] = sock

    def send(self, frame: bytes) -> bool:
        """Send without blocking; False when no daemon is connected (IMMEDIATE)."""
        try:
            self.sock.send(frame, _NOBLOCK)
        except zmq.Again:
            return False
        return True

    def wait_for_peer(self, probe: bytes, timeout_s: float = 1.0) -> None:
        """Send `probe` until one is taken: IMMEDIATE fails sends until the ipc connection is up."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.send(probe):
            time.sleep(0.005)

    def poll(self, timeout_s: float) -> bool:
        return bool(self.sock.poll(int(timeout_s * 1000) + 1))

    def recv_ready(self) -> list[bytes]:
        """Every frame already received, without blocking."""
        frames = []
        while int(self.sock.get(_EVENTS)) & _POLLIN:  # cheaper than a zmq.Again
            try:
                frames.append(self.sock.recv(_NOBLOCK))
            except zmq.Again:
                break
        return frames

    def went_away(self) -> bool:
        """Drain the monitor; True when the daemon side of the socket disconnected."""
        gone = False
        while True:
            try:
                self.monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return gone
            gone = True

    def close(self) -> None:
        with contextlib.suppress(zmq.ZMQError):
            self.sock.disable_monitor()
        self.sock.close(linger=0)
        self.monitor.close(linger=0)
