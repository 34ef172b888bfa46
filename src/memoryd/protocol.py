"""Message shapes and the msgpack codec shared by daemon and client (docs/wire.md, "Frames and codec").
Import contract: msgpack only — no zmq, no store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from memoryd import PROTOCOL
from memoryd.errors import BadRequest, InvalidParams, MemorydError

MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64  # real frames nest ~5 deep; this keeps recursive walks far from Python's recursion limit
OPS = ("hello", "tools", "call", "heartbeat", "bye", "status", "stop", "episodes", "hook", "admin")


def encode(message: dict[str, Any]) -> bytes:
    frame: bytes = msgpack.packb(message, use_bin_type=True)
    return frame


def decode(frame: bytes) -> Any:
    """Unpack one frame with limits (size, lengths, nesting); any failure is a `BadRequest`."""
    message = decode_reply(frame)
    if depth(message) > MAX_DEPTH:
        raise BadRequest(f"frame nests maps/arrays deeper than {MAX_DEPTH} levels")
    return message


def decode_reply(frame: bytes) -> Any:
    """`decode` without the nesting walk (~40 µs a call), for replies built from requests the daemon checked."""
    if len(frame) > MAX_FRAME_BYTES:
        raise BadRequest(f"frame of {len(frame)} bytes is over the {MAX_FRAME_BYTES}-byte limit")
    try:  # explicit limits: a hostile frame cannot make the unpacker allocate more than the frame holds
        return msgpack.unpackb(frame, raw=False, max_str_len=MAX_FRAME_BYTES, max_bin_len=MAX_FRAME_BYTES,
                               max_array_len=100_000, max_map_len=100_000, max_ext_len=0)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise BadRequest(f"undecodable msgpack frame: {type(exc).__name__}") from exc


_CONTAINERS = (dict, list, tuple)


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep `value`'s maps and arrays nest (a scalar is 0), without recursion; limit + 1 once past it."""
    layer, level = [value] if isinstance(value, _CONTAINERS) else [], 0
    while layer:
        level += 1
        if level > limit:
            return limit + 1
        layer = [v for item in layer for v in (item.values() if isinstance(item, dict) else item)
                 if isinstance(v, _CONTAINERS)]
    return level


def encode_request(req_id: int, op: str, args: dict[str, Any], conn: str) -> bytes:
    """One frame the daemon accepts, or `InvalidParams` naming the argument (else libzmq drops the connection)."""
    message = request(req_id, op, args, conn)
    if depth(message) > MAX_DEPTH:
        raise InvalidParams(_worst_argument(op, args, depth),
                            f"nests deeper than the {MAX_DEPTH}-level limit of a request")
    try:
        frame = encode(message)
    except (ValueError, OverflowError, TypeError) as exc:
        raise InvalidParams(_worst_argument(op, args, _unencodable), f"holds a value msgpack cannot carry "
                            f"({exc.__class__.__name__}: a lone surrogate or an integer over 64 bits)") from None
    if len(frame) > MAX_FRAME_BYTES:
        raise InvalidParams(_worst_argument(op, args, lambda v: len(encode({"v": v}))), f"makes the request "
                            f"{len(frame)} bytes, over the frame limit of {MAX_FRAME_BYTES} bytes (4 MiB)")
    return frame


def _unencodable(value: Any) -> int:
    try:
        encode({"v": value})
    except (ValueError, OverflowError, TypeError):
        return 1
    return 0


def _worst_argument(op: str, args: dict[str, Any], score: Callable[[Any], int]) -> str:
    """The argument (inside `arguments` for a call) with the highest `score`, else "arguments"."""
    inner = args.get("arguments") if op == "call" else args
    if not isinstance(inner, dict) or not inner:
        return "arguments"
    return str(max(inner, key=lambda key: score(inner[key])))


def encode_reply(req_id: Any, result: Any) -> bytes:
    """The ok reply as one frame, or a -32603 error for the same id when it cannot be or is over MAX_FRAME_BYTES."""
    try:
        frame = encode({"v": PROTOCOL, "id": req_id, "ok": True, "result": result})
    except (ValueError, OverflowError, TypeError) as exc:
        error = MemorydError(f"the reply could not be encoded ({type(exc).__name__})",
                             {"kind": "unencodable_reply"}, kind="unencodable_reply")
    else:
        if len(frame) <= MAX_FRAME_BYTES:
            return frame
        error = MemorydError(
            f"the reply is {len(frame)} bytes, over the frame limit of {MAX_FRAME_BYTES} bytes (4 MiB); "
            "ask for less (fewer results, no bodies)",
            {"kind": "reply_too_large", "bytes": len(frame), "limit": MAX_FRAME_BYTES}, kind="reply_too_large")
    return encode(error_reply(req_id, error.to_wire()))


def request(req_id: int, op: str, args: dict[str, Any], conn: str) -> dict[str, Any]:
    return {"v": PROTOCOL, "id": req_id, "op": op, "args": args, "conn": conn}


def error_reply(req_id: Any, error: dict[str, Any]) -> dict[str, Any]:
    return {"v": PROTOCOL, "id": req_id, "ok": False, "error": error}


def recover_id(message: Any) -> int | None:
    """The request id of a malformed message, when one can be recovered for an error reply."""
    rid = message.get("id") if isinstance(message, dict) else None
    return rid if isinstance(rid, int) and not isinstance(rid, bool) else None


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
