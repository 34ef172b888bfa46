"""The bridge's fast path: answer the agent's opening request before importing zmq and the client.

An MCP host waits for its opening request before anything else: `initialize` (legacy revisions)
or `server/discover` (2026-07-28, and dual-era clients probing). The first line is handled with
json/os/sys only; the heavier imports (docs/benchmark.md) then happen while the agent reads the answer.
Anything else on the first line (a malformed line, a modern request that needs the daemon, a
discover the bridge must refuse, a line over the cap) goes to the full bridge, which answers it
the same way.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from memoryd.mcp_bridge import jsonrpc


def read_first_line() -> tuple[bytes, jsonrpc.LineReader]:
    """(first line, the reader holding whatever came after it) from stdin, blocking.

    The line is b"" at EOF, and when the first line is over the cap: the reader then holds its
    `Oversize` item (and skips the rest of it), so no first line is ever buffered whole.
    """
    reader = jsonrpc.LineReader()
    while not reader.ready:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            reader.finish()
            break
        reader.feed(chunk)
    if reader.ready and isinstance(reader.ready[0], bytes):
        return reader.ready.pop(0), reader  # type: ignore[return-value]
    return b"", reader


def _request(line: bytes, method: str) -> dict[str, Any] | None:
    """`line` parsed, if it is a well-formed JSON-RPC request for `method` with object params."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # the bridge answers these in full
        return None
    if (isinstance(message, dict) and message.get("method") == method and "id" in message
            and message.get("jsonrpc") == "2.0" and isinstance(message.get("params", {}), dict)):
        return message
    return None


def _reply(msg_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.buffer.write(jsonrpc.response(msg_id, result))
    sys.stdout.buffer.flush()


def answer_initialize(line: bytes) -> dict[str, Any] | None:
    """If `line` is an `initialize` request, answer it and return its clientInfo ({} if none); else None."""
    message = _request(line, "initialize")
    if message is None:
        return None
    params = message.get("params") or {}
    _reply(message["id"], jsonrpc.initialize_result(params))
    info = params.get("clientInfo")
    return info if isinstance(info, dict) else {}


def answer_discover(line: bytes) -> dict[str, Any] | None:
    """If `line` is a `server/discover` the bridge serves, answer it and return its clientInfo; else None."""
    from memoryd.mcp_bridge import revision

    message = _request(line, "server/discover")
    if message is None:
        return None
    params = message.get("params") or {}
    try:
        revision.check_envelope(params)
    except revision.EnvelopeError:
        return None  # the bridge refuses it, in the same words as on any later line
    _reply(message["id"], revision.discover_result())
    return revision.client_info(params)


def main(args: list[str] | None = None) -> int:
    """Run the bridge; `args` are what follows `memoryd mcp` (only `--tools PROFILE`)."""
    from memoryd import profiles

    try:  # a typo in the profile refuses to start, before the agent is told anything
        profile = profiles.for_bridge(sys.argv[2:] if args is None else args, os.environ)
    except profiles.ProfileError as exc:
        print(f"memoryd mcp: {exc}", file=sys.stderr, flush=True)
        return 2
    line, reader = read_first_line()
    hello = None
    if line:
        hello = answer_initialize(line)
        if hello is None:
            hello = answer_discover(line)
            if hello is None:
                reader.ready.insert(0, line)  # the bridge answers it
    from memoryd.mcp_bridge.bridge import Bridge

    bridge = Bridge(profile)
    bridge.reader = reader
    if hello is not None:
        bridge.after_hello(hello)
    try:
        return bridge.run()
    except KeyboardInterrupt:
        return 0
