"""The bridge's fast path: answer an opening `initialize` or `server/discover` before importing zmq and
the client, which then load while the agent reads the answer. Any other first line goes to the bridge."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from memoryd.mcp_bridge import jsonrpc, revision


def read_first_line() -> tuple[bytes, jsonrpc.LineReader]:
    """(first line, the reader holding what came after it); the line is b"" at EOF or over the cap."""
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


def answer_opening(line: bytes) -> dict[str, Any] | None:
    """If `line` is an `initialize`, or a `server/discover` the bridge serves, answer it and return the client's
    self-reported info ({} if none); else None (the bridge answers it)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(message, dict) and message.get("method") in ("initialize", "server/discover")
            and "id" in message and message.get("jsonrpc") == "2.0" and isinstance(message.get("params", {}), dict)):
        return None
    params = message.get("params") or {}
    if message["method"] == "initialize":
        result, info = jsonrpc.initialize_result(params), params.get("clientInfo")
    else:
        try:
            info = revision.check_envelope(params)
        except revision.EnvelopeError:
            return None  # the bridge refuses it
        result = revision.discover_result()
    sys.stdout.buffer.write(jsonrpc.response(message["id"], result))
    sys.stdout.buffer.flush()
    return info if isinstance(info, dict) else {}


def main(args: list[str] | None = None) -> int:
    """Run the bridge; `args` follow `memoryd mcp`."""
    from memoryd import profiles

    try:
        profile = profiles.for_bridge(sys.argv[2:] if args is None else args, os.environ)
    except profiles.ProfileError as exc:
        print(f"memoryd mcp: {exc}", file=sys.stderr, flush=True)
        return 2
    line, reader = read_first_line()
    hello = answer_opening(line)
    if hello is None and line:
        reader.ready.insert(0, line)  # the bridge answers it
    from memoryd.mcp_bridge.bridge import Bridge

    bridge = Bridge(profile, reader)
    if hello is not None:
        bridge.after_hello(hello)
    try:
        return bridge.run()
    except KeyboardInterrupt:
        return 0
