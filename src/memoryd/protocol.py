"""Message shapes and the msgpack codec shared by daemon and client.

Import contract: msgpack only — no zmq, no store. `encode` and `decode` are inverses; handlers on
either side never see bytes.
"""

from __future__ import annotations

from typing import Any

import msgpack

from memoryd import PROTOCOL
from memoryd.errors import BadRequest

MAX_FRAME_BYTES = 4 * 1024 * 1024
# Explicit unpack limits: a hostile frame cannot make the unpacker allocate more than the frame holds.
_UNPACK_LIMITS = dict(
    max_str_len=MAX_FRAME_BYTES,
    max_bin_len=MAX_FRAME_BYTES,
    max_array_len=100_000,
    max_map_len=100_000,
    max_ext_len=0,
)
OPS = ("hello", "tools", "call", "heartbeat", "bye", "status", "stop", "episodes", "hook", "admin")


def encode(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)  # type: ignore[no-any-return]


def decode(frame: bytes) -> Any:
    """Unpack one frame with limits; any failure is a `BadRequest`."""
    if len(frame) > MAX_FRAME_BYTES:
        raise BadRequest(f"frame of {len(frame)} bytes is over the {MAX_FRAME_BYTES}-byte limit")
    try:
        return msgpack.unpackb(frame, raw=False, **_UNPACK_LIMITS)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise BadRequest(f"undecodable msgpack frame: {type(exc).__name__}") from exc


def request(req_id: int, op: str, args: dict[str, Any], conn: str) -> dict[str, Any]:
    return {"v": PROTOCOL, "id": req_id, "op": op, "args": args, "conn": conn}


def ok_reply(req_id: Any, result: Any) -> dict[str, Any]:
    return {"v": PROTOCOL, "id": req_id, "ok": True, "result": result}


def error_reply(req_id: Any, error: dict[str, Any]) -> dict[str, Any]:
    return {"v": PROTOCOL, "id": req_id, "ok": False, "error": error}


def recover_id(message: Any) -> int | None:
    """The request id of a malformed message, when one can be recovered for an error reply."""
    if isinstance(message, dict):
        rid = message.get("id")
        if isinstance(rid, int) and not isinstance(rid, bool):
            return rid
    return None


def validate_request(message: Any) -> tuple[int, str, dict[str, Any], str]:
    """Check a decoded request's shape; returns (id, op, args, conn) or raises `BadRequest`."""
    if not isinstance(message, dict):
        raise BadRequest("a request must be a map")
    rid = recover_id(message)
    if rid is None:
        raise BadRequest("request 'id' must be an integer")
    if message.get("v") != PROTOCOL:
        raise BadRequest(f"protocol version {message.get('v')!r} is not {PROTOCOL}")
    op, args, conn = message.get("op"), message.get("args", {}), message.get("conn")
    if op not in OPS:
        raise BadRequest(f"unknown op {op!r}; known: {', '.join(OPS)}")
    if not isinstance(args, dict):
        raise BadRequest("request 'args' must be a map")
    if not isinstance(conn, str) or not 1 <= len(conn) <= 128:
        raise BadRequest("request 'conn' must be a string of 1-128 chars")
    return rid, op, args, conn
