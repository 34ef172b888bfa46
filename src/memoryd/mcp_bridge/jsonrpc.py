"""The few JSON-RPC 2.0 shapes the bridge speaks on stdio (newline-delimited, MCP's stdio framing)."""

from __future__ import annotations

import json
from typing import Any

from memoryd.errors import INVALID_REQUEST, PARSE_ERROR
from memoryd.mcp_bridge.revision import CAPABILITIES, HANDSHAKE_VERSIONS

SUPPORTED_VERSIONS = HANDSHAKE_VERSIONS  # what `initialize` negotiates; 2026-07-28 has no handshake


def response(msg_id: Any, result: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": msg_id, "result": result})


def error(msg_id: Any, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return _line({"jsonrpc": "2.0", "id": msg_id, "error": err})


def _line(obj: dict[str, Any]) -> bytes:
    # ASCII escapes keep any echoed value (even a lone surrogate) encodable.
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def parse(line: bytes) -> tuple[dict[str, Any] | None, bytes | None]:
    """(message, None) for a well-formed JSON-RPC message, else (None, the error line to send)."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None, error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")
    msg_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None, error(msg_id if _valid_id(msg_id) else None, INVALID_REQUEST,
                           "Invalid Request: expected a JSON-RPC 2.0 object")
    if "method" in message and not isinstance(message["method"], str):
        return None, error(msg_id if _valid_id(msg_id) else None, INVALID_REQUEST,
                           "Invalid Request: 'method' must be a string")
    if "id" in message and not _valid_id(msg_id):
        return None, error(None, INVALID_REQUEST, "Invalid Request: 'id' must be a string or integer")
    if "method" not in message and "result" not in message and "error" not in message:
        return None, error(msg_id, INVALID_REQUEST, "Invalid Request: no method")
    return message, None


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def negotiate(requested: Any) -> str:
    """The client's version when we speak it, else our newest handshake version (its counter-offer)."""
    return requested if requested in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    from memoryd import __version__
    from memoryd.instructions import INSTRUCTIONS

    return {
        "protocolVersion": negotiate(params.get("protocolVersion")),
        "capabilities": CAPABILITIES,
        "serverInfo": {"name": "memoryd", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """A tool's result object as MCP wants it: structured, and the same JSON as one text block."""
    text = json.dumps(result, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": result, "isError": False}
