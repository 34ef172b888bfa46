"""Parked calls: `wait_for` tool calls that answered "not yet" (a `tool.Parked`), re-checked by the
loop after a pass that added episodes or once their deadline passed; no thread per call."""

from __future__ import annotations

import time
from typing import NamedTuple

from memoryd.daemon.identity.session_table import Conn
from memoryd.daemon.process.reply_cache import remember
from memoryd.daemon.tool import Parked
from memoryd.errors import MemorydError, ResourceState
from memoryd.protocol import encode, encode_reply, error_reply

MAX_PARKED_PER_CONN = 16
MAX_PARKED = 1024


class ParkedCall(NamedTuple):
    conn_id: str
    req_id: int
    parked: Parked


class ParkedCalls:
    """The parked calls in the order they parked; `mark`: where this pass's calls begin."""

    def __init__(self) -> None:
        self.calls: list[ParkedCall] = []
        self.mark = 0

    def check_room(self, conn_id: str) -> None:
        """Refuse a `wait_for` call up front (before it logs anything) when it could not park."""
        mine = sum(1 for p in self.calls if p.conn_id == conn_id)
        if mine >= MAX_PARKED_PER_CONN or len(self.calls) >= MAX_PARKED:
            raise ResourceState(
                "too_many_waiting", conn_id,
                f"too many wait_for calls are parked ({mine} of this connection's {MAX_PARKED_PER_CONN}, "
                f"{len(self.calls)} of {MAX_PARKED} in all); wait for one to return, or call without wait_for")

    def park(self, conn: Conn, req_id: int, parked: Parked) -> None:
        conn.in_flight.add(req_id)
        self.calls.append(ParkedCall(conn.id, req_id, parked))

    def drop(self, conn_id: str) -> None:
        self.calls = [p for p in self.calls if p.conn_id != conn_id]

    def wake(self, conns: dict[str, Conn], timed_out: bool) -> list[list[bytes]]:
        """The replies of the calls that are done: every call looks, or with `timed_out` only the expired."""
        outgoing, still = [], []
        now = time.monotonic()
        for entry in self.calls:
            expired = timed_out and now >= entry.parked.deadline
            result = None if timed_out and not expired else entry.parked.check(expired)
            conn = conns.get(entry.conn_id)
            if result is None:
                still.append(entry)
            elif conn is not None:
                reply = encode_reply(entry.req_id, result)
                remember(conn, entry.req_id, reply)
                outgoing.append([conn.routing_id, reply])
        self.calls = still
        return outgoing

    def void(self, conns: dict[str, Conn], cause: MemorydError) -> list[list[bytes]]:
        """Unpark the calls parked since `mark` (their pass was undone); their replies say `cause`."""
        outgoing = []
        for entry in self.calls[self.mark:]:
            if (conn := conns.get(entry.conn_id)) is not None:
                reply = encode(error_reply(entry.req_id, cause.to_wire()))
                remember(conn, entry.req_id, reply)
                outgoing.append([conn.routing_id, reply])
        del self.calls[self.mark:]
        return outgoing
