"""The JSON-RPC 2.0 shapes the bridge speaks on stdio, and its newline-delimited framing. Import
contract: json, the standard library, errors and revision (the startup fast path uses it before zmq)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from memoryd.errors import INVALID_REQUEST, PARSE_ERROR
from memoryd.mcp_bridge.revision import CAPABILITIES, HANDSHAKE_VERSIONS, SERVER_INFO

MAX_LINE_BYTES = 8 * 1024 * 1024  # twice the daemon's 4 MiB frame: any request it takes fits (docs/wire.md, "Limits")
OVERSIZE_HEAD_BYTES = 4096  # how much of an over-cap line is kept, to find its request id


def response(msg_id: Any, result: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": msg_id, "result": result})


def error(msg_id: Any, code: int, message: str, data: Any = None) -> bytes:
    extra = {} if data is None else {"data": data}
    return _line({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message, **extra}})


def _line(obj: dict[str, Any]) -> bytes:
    # ASCII escapes keep any echoed value (even a lone surrogate) encodable.
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


class Oversize(NamedTuple):
    """A line over MAX_LINE_BYTES, in place of its content: its first bytes and the cap it broke."""

    head: bytes
    limit: int


class LineReader:
    """Cuts stdin bytes into non-blank lines; one over `limit` becomes an `Oversize` at once and its rest is
    skipped. Pieces are joined once per line (re-joining per chunk made a 50 MB line take seconds)."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.skipping = False
        self.ready: list[bytes | Oversize] = []

    def feed(self, chunk: bytes) -> None:
        start = 0  # slices only what is kept: the skipped tail of an over-cap line is never copied
        while start <= len(chunk):
            newline = chunk.find(b"\n", start)
            if self.skipping:
                self.skipping = newline < 0
            else:
                self._add(chunk[start:len(chunk) if newline < 0 else newline], complete=newline >= 0)
            if newline < 0:
                return
            start = newline + 1

    def _add(self, piece: bytes, complete: bool) -> None:
        if piece:
            self.parts.append(piece)
            self.size += len(piece)
        if self.size > self.limit:
            self.ready.append(Oversize(self._head(), self.limit))
            self.parts, self.size, self.skipping = [], 0, not complete
        elif complete:
            line = b"".join(self.parts)
            self.parts, self.size = [], 0
            if line.strip():
                self.ready.append(line)

    def _head(self) -> bytes:
        """The line's first OVERSIZE_HEAD_BYTES, without joining its megabytes first."""
        head = b""
        for part in self.parts:
            head += part[:OVERSIZE_HEAD_BYTES - len(head)]
            if len(head) >= OVERSIZE_HEAD_BYTES:
                break
        return head

    def finish(self) -> None:
        """End of input: an unterminated last line counts as a line (idempotent)."""
        if not self.skipping:
            self._add(b"", complete=True)

    def take(self) -> list[bytes | Oversize]:
        items, self.ready = self.ready, []
        return items


def head_id(head: bytes) -> str | int | None:
    """The top-level `"id"` of a JSON object whose first bytes are `head` (never a nested one), or None."""
    text = head.decode("utf-8", errors="ignore")
    decoder = json.JSONDecoder()
    level, i = 0, 0
    try:  # ValueError: the head ends inside a string or the id's value
        while i < len(text):
            char = text[i]
            if char == '"':
                token, i = decoder.raw_decode(text, i)
                colon = _skip_space(text, i)
                if level == 1 and token == "id" and text[colon:colon + 1] == ":":
                    value, _ = decoder.raw_decode(text, _skip_space(text, colon + 1))
                    return value if _valid_id(value) else None
                continue
            level += 1 if char in "{[" else -1 if char in "}]" else 0
            i += 1
    except ValueError:
        pass
    return None


def _skip_space(text: str, i: int) -> int:
    return len(text) - len(text[i:].lstrip(" \t\r\n"))


def parse(line: bytes | Oversize) -> dict[str, Any] | bytes:
    """The well-formed JSON-RPC message on `line`, else the error line to send (an over-cap line's is
    addressed to its request id when its head names one)."""
    if isinstance(line, Oversize):
        return error(head_id(line.head), INVALID_REQUEST,
                     f"Invalid Request: the line is over the {line.limit}-byte ({line.limit // (1024 * 1024)} MiB) "
                     "limit of one message; it was dropped unread", {"reason": "line_too_long", "limit": line.limit})
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")
    except RecursionError:  # the C parser refuses nesting near the interpreter's recursion limit
        return error(None, PARSE_ERROR, "Parse error: the JSON nests too deeply to parse")
    msg_id = message.get("id") if isinstance(message, dict) else None
    safe_id = msg_id if _valid_id(msg_id) else None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error(safe_id, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object")
    if "method" in message and not isinstance(message["method"], str):
        return error(safe_id, INVALID_REQUEST, "Invalid Request: 'method' must be a string")
    if "id" in message and not _valid_id(msg_id):
        return error(None, INVALID_REQUEST, "Invalid Request: 'id' must be a string or integer")
    if "method" not in message and "result" not in message and "error" not in message:
        return error(msg_id, INVALID_REQUEST, "Invalid Request: no method")
    return message


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    """The client's protocol version when we speak it, else our newest handshake version (a counter-offer)."""
    from memoryd import instructions

    requested = params.get("protocolVersion")
    return {"protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0],
            "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO, "instructions": instructions.own()}


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """A tool's result object as MCP wants it: structured, and the same JSON as one text block."""
    text = json.dumps(result, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": result, "isError": False}
