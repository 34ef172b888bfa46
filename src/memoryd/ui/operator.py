"""The operator's connection to the daemon: agent tools and `admin` reads, one lock, one session.

Shared by the terminal verbs (one short-lived `Operator` per command) and the web view (one for
its lifetime, kept alive by `keepalive`). Import contract: client, errors, the stdlib.
"""

from __future__ import annotations

import threading
from typing import Any

from memoryd import __version__
from memoryd.errors import MemorydError

DAEMON_UNAVAILABLE = -32001


class Operator:
    """Calls the daemon as `memoryd-cli` / `memoryd-ui`; thread-safe (one lock around the socket).

    Does not start a daemon: an operator looking at memory wants to know the daemon is down
    (DaemonUnavailable), not to get a fresh one on an unexpected store.
    """

    def __init__(self, client: str = "memoryd-cli", endpoint: str | None = None) -> None:
        self.identity = {"client": f"{client}/{__version__}"}
        self.endpoint = endpoint
        self.lock = threading.Lock()
        self.conn: Any = None

    def _connection(self) -> Any:
        if self.conn is None:
            from memoryd.client.connection import Connection  # pyzmq loads only when used

            conn = Connection(self.identity, endpoint=self.endpoint, autospawn=False)
            conn.connect()
            self.conn = conn
        return self.conn

    def request(self, op: str, args: dict[str, Any], timeout_s: float = 10.0) -> Any:
        """One op with a deadline; a connection the daemon forgot (restart, idle loss) is said
        hello again once. Raises MemorydError (DaemonUnavailable: code -32001)."""
        with self.lock:
            for attempt in range(2):
                conn = self._connection()
                try:
                    return conn.call(op, args, timeout_s)
                except MemorydError as exc:
                    if attempt or exc.kind != "unknown_connection":
                        raise
                    conn.close(say_bye=False)
                    self.conn = None
        raise AssertionError("unreachable")

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """An agent tool, called as the operator's session (arguments left None are omitted)."""
        clean = {k: v for k, v in arguments.items() if v is not None}
        return self.request("call", {"tool": name, "arguments": clean})  # type: ignore[no-any-return]

    def admin(self, action: str, **args: Any) -> dict[str, Any]:
        """An operator read (daemon/admin.py), or `resolve` of a pending write."""
        clean = {k: v for k, v in args.items() if v is not None}
        return self.request("admin", {"action": action, **clean})  # type: ignore[no-any-return]

    def keepalive(self) -> None:
        """A heartbeat, so a long-lived operator session is not ended as lost between requests."""
        with self.lock:
            if self.conn is not None:
                try:
                    self.conn.call("heartbeat", {}, 2.0)
                except MemorydError:
                    self.conn.close(say_bye=False)
                    self.conn = None  # said hello again on the next request

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None


def is_unavailable(exc: MemorydError) -> bool:
    return exc.code == DAEMON_UNAVAILABLE or exc.kind == "daemon_unavailable"
