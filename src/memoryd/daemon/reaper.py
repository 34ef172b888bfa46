"""The reaper: pure passes over the daemon's state with an injected `now`, each action logged.

Driven by the server loop: `next_due_in` becomes the poll timeout, `run_due` runs what is due.
"""

from __future__ import annotations

from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.sessions import Conn


def liveness_pass(core: Core, conns: dict[str, Conn], now: float) -> list[str]:
    """End the session of every connection silent for 3 heartbeats as `lost`; returns their ids."""
    limit = 3 * core.config.heartbeat_seconds
    lost = [cid for cid, conn in conns.items() if now - conn.last_seen > limit]
    for conn_id in lost:
        conn = conns.pop(conn_id)
        session = core.sessions.get(conn.session_id)
        if session is not None and session.conn == conn_id:
            core.end_session(session, "lost")
    return lost


def grace_pass(core: Core, now: float) -> list[str]:
    """Sessions open at the last stop whose bridge did not reattach in time end as `daemon_restart`."""
    ended = [sid for sid, deadline in core.suspended.items() if now >= deadline]
    for session_id in ended:
        del core.suspended[session_id]
        session = core.sessions.get(session_id)
        if session is not None:
            core.end_session(session, "daemon_restart")
    return ended


JOBS = [grace_pass]


def run_due(core: Core, now: float) -> dict[str, Any]:
    return {job.__name__: job(core, now) for job in JOBS}


def next_due_in(core: Core, now: float) -> float:
    """Seconds until the earliest job could have work (the loop's poll timeout)."""
    waits = [deadline - now for deadline in core.suspended.values()]
    return max(0.01, min(waits, default=60.0))
