"""MCP protocol revisions the bridge speaks, and the 2026-07-28 per-request `_meta` envelope (docs/wire.md,
"The MCP side of the bridge"). Import contract: stdlib and errors (the fast path imports it before zmq)."""

from __future__ import annotations

from typing import Any

from memoryd import __version__
from memoryd.errors import INVALID_PARAMS

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ALL_VERSIONS = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)  # newest first

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

UNSUPPORTED_PROTOCOL_VERSION = -32022  # 2026-07-28's UnsupportedProtocolVersionError

HOUR_MS = 3_600_000
# method -> (ttlMs, cacheScope): the catalogue changes only with a new bridge; memories at any moment.
CACHE_HINTS: dict[str, tuple[int, str]] = {
    "server/discover": (HOUR_MS, "public"), "tools/list": (HOUR_MS, "public"),
    "resources/templates/list": (HOUR_MS, "public"), "resources/list": (0, "private"), "resources/read": (0, "private")}

CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": False}, "resources": {"listChanged": False}}
SERVER_INFO = {"name": "memoryd", "version": __version__}


class EnvelopeError(Exception):
    """A modern request whose envelope the bridge must refuse: (code, message, data) for the reply."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def is_modern(method: str, params: dict[str, Any]) -> bool:
    """True when the request's `_meta` names a protocol version; `initialize` is always legacy."""
    meta = params.get("_meta")
    return method != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def check_envelope(params: dict[str, Any]) -> dict[str, Any]:
    """The self-reported client name/version the modern request carries, or {}; EnvelopeError when a required
    key is bad (-32602) or its version is not ours (-32022)."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise EnvelopeError(INVALID_PARAMS, "params._meta must be an object carrying "
                            f"'{PROTOCOL_VERSION_KEY}' and '{CLIENT_CAPABILITIES_KEY}'",
                            {"param": "_meta", "reason": "must be an object"})
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        raise EnvelopeError(INVALID_PARAMS, f"params._meta lacks the required key(s): {', '.join(missing)}",
                            {"param": f"_meta.{missing[0]}", "reason": "is required"})
    for key, kind, what, shape in ((PROTOCOL_VERSION_KEY, str, "protocol version", "a string"),
                                   (CLIENT_CAPABILITIES_KEY, dict, "client capabilities", "an object")):
        if not isinstance(meta[key], kind):
            raise EnvelopeError(INVALID_PARAMS, f"the {what} in params._meta must be {shape}",
                                {"param": f"_meta.{key}", "reason": f"must be {shape}"})
    version = meta[PROTOCOL_VERSION_KEY]
    if version not in MODERN_VERSIONS:
        # Handshake versions are listed too: a dual-era client falls back to `initialize` on them.
        raise EnvelopeError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                            {"supported": list(ALL_VERSIONS), "requested": version})
    info = meta.get(CLIENT_INFO_KEY)
    return info if isinstance(info, dict) else {}


def finish(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A new dict (the cached tool list is shared): `result` with resultType, cache hints and serverInfo."""
    done = {**result, "resultType": "complete"}
    if method in CACHE_HINTS:
        done["ttlMs"], done["cacheScope"] = CACHE_HINTS[method]
    meta = done.get("_meta")
    done["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: SERVER_INFO}
    return done


def discover_result() -> dict[str, Any]:
    from memoryd import instructions

    return finish("server/discover", {"supportedVersions": list(ALL_VERSIONS), "capabilities": CAPABILITIES,
                                      "instructions": instructions.own()})
