"""The bridge's fast path: answer `initialize` before importing zmq and the client.

An MCP host waits for `initialize` before anything else, so the first line is handled with
json/os/sys only; the heavier imports (~40 ms) then happen while the agent reads the answer.
"""

from __future__ import annotations

import json
import os
import sys


def read_first_line() -> tuple[bytes, bytes]:
    """(first line, whatever came after it) from stdin, blocking; (b"", b"") at EOF."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return data, b""
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest


def answer_initialize(line: bytes) -> dict[str, object] | None:
    """If `line` is an `initialize` request, answer it and return its params; else None."""
    from memoryd.mcp_bridge import jsonrpc

    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(message, dict) and message.get("method") == "initialize" and "id" in message
            and message.get("jsonrpc") == "2.0" and isinstance(message.get("params", {}), dict)):
        return None
    params = message.get("params") or {}
    sys.stdout.buffer.write(jsonrpc.response(message["id"], jsonrpc.initialize_result(params)))
    sys.stdout.buffer.flush()
    return params


def main() -> int:
    line, rest = read_first_line()
    params = answer_initialize(line) if line.strip() else None
    from memoryd.mcp_bridge.bridge import Bridge

    bridge = Bridge()
    if params is not None:
        bridge.after_initialize(params)
        bridge.buffer = rest
    else:
        bridge.buffer = line + b"\n" + rest if line else rest
    try:
        return bridge.run()
    except KeyboardInterrupt:
        return 0
