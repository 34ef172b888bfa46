"""The reply cache: each connection's recent replies by request id, so a resent request gets the
answer it was given instead of running twice (docs/wire.md, 'Deadlines, resend and the reply cache')."""

from __future__ import annotations

from memoryd.daemon.identity.session_table import Conn

REPLY_CACHE_SIZE = 256
REPLY_CACHE_BYTES = 4 * 1024 * 1024


def remember(conn: Conn, req_id: int, reply: bytes) -> None:
    """Cache `reply` (its call no longer waits): at most REPLY_CACHE_SIZE replies and REPLY_CACHE_BYTES
    (80 cached 3.9 MB reads once took 280 MB), oldest out first; the newest always stays."""
    replies = conn.replies
    held = conn.reply_bytes - len(replies.pop(req_id, b"")) + len(reply)
    replies[req_id] = reply
    conn.in_flight.discard(req_id)
    while len(replies) > 1 and (len(replies) > REPLY_CACHE_SIZE or held > REPLY_CACHE_BYTES):
        held -= len(replies.popitem(last=False)[1])
    conn.reply_bytes = held
