"""Who may use the web view: the values derived from a launch's secret (path prefix, session cookie,
CSRF value), its one-time sign-in codes, and the Host and Origin values accepted (docs/security.md)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from memoryd.client.connection import Operator

HOST = "127.0.0.1"
PORT_BASE, PORT_SPAN = 47000, 2000
READ_TIMEOUT_S = 20.0
SIGN_IN_FAILURES_PER_MINUTE = 10  # wrong codes before every sign-in is refused (429; docs/security.md)
SIGN_IN_WINDOW_S = 60.0


class SignInLimited(Exception):
    """Too many wrong codes lately: no sign-in is tried for `retry_after_s` seconds."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many sign-in attempts; retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class Attempts:
    """The failed sign-ins of the last window: at `cap` of them, none is tried until the oldest ages
    out. Not thread-safe on its own (UI holds its lock around it)."""

    def __init__(self, cap: int = SIGN_IN_FAILURES_PER_MINUTE, window_s: float = SIGN_IN_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cap, self.window_s, self.clock = cap, window_s, clock
        self.failures: deque[float] = deque()

    def wait_s(self) -> float:
        """Seconds until a sign-in may be tried again; 0 when it may now."""
        now = self.clock()
        while self.failures and self.failures[0] <= now - self.window_s:
            self.failures.popleft()
        return self.failures[0] + self.window_s - now if len(self.failures) >= self.cap else 0.0

    def failed(self) -> None:
        self.failures.append(self.clock())


def matches(candidate: str | None, secret: str) -> bool:
    """In constant time: a session cookie or CSRF value against ours."""
    return candidate is not None and hmac.compare_digest(candidate.encode(), secret.encode())


def default_port(uid: int | None = None) -> int:
    """A port per user, so two users of one machine do not collide: 47000 + uid mod 2000."""
    return PORT_BASE + (os.getuid() if uid is None else uid) % PORT_SPAN


class UI:
    """What every request handler shares: the daemon, the secret's derived values, the unspent codes."""

    def __init__(self, operator: Operator, port: int, secret: str, events_dir: Path,
                 read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.operator, self.port, self.events_dir, self.read_timeout_s = operator, port, events_dir, read_timeout_s
        self.stopping = threading.Event()
        self.hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = f"memoryd_ui_{port}"
        def derive(purpose: str) -> str:  # bound to this port: another launch's values are worthless here
            return hmac.new(secret.encode(), f"{purpose}:{port}".encode(), hashlib.sha256).hexdigest()

        self.prefix, self.session, self.csrf = "/" + derive("path")[:32], derive("session"), derive("csrf")
        self.codes: set[str] = set()
        self.codes_lock, self.attempts = threading.Lock(), Attempts()

    def new_code(self) -> str:
        code = secrets.token_urlsafe(24)
        with self.codes_lock:
            self.codes.add(code)
        return code

    def spend_code(self, code: str) -> bool:
        """True once per code. Past the cap of wrong codes a minute, `SignInLimited` whatever the code:
        guesses not even looked at teach a guesser nothing."""
        with self.codes_lock:
            wait_s = self.attempts.wait_s()
            if wait_s > 0:
                raise SignInLimited(wait_s)
            if code in self.codes:
                self.codes.discard(code)
                return True
            self.attempts.failed()
        return False

    def url(self, code: str) -> str:
        return f"http://{HOST}:{self.port}/?code={code}"

    def inside(self, path: str) -> str | None:
        """The page path under our secret prefix (`/memories` for `<prefix>/memories`), else None."""
        head, rest = path[:len(self.prefix)], path[len(self.prefix):]
        if not hmac.compare_digest(head.encode(), self.prefix.encode()) or not (rest == "" or rest.startswith("/")):
            return None
        return rest or "/"
