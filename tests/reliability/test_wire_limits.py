"""The wires' limits: hostile sizes and nesting on both wires get typed errors, never a dead
bridge or a disconnect (docs/wire.md).

- deeply nested JSON on the bridge's stdio (first line or later) is -32700, and the bridge keeps
  answering `ping`; arguments nested past the frame's depth limit are -32602 naming the argument;
- a stdio line over the 8 MiB cap is answered -32600 (to its id) while it is still arriving,
  skipped unread: quick, the bridge's peak memory grows by less than the line, and it keeps serving;
- an argument that would push a request over the 4 MiB frame limit is -32602 naming it, refused
  by the bridge before the socket (libzmq would drop the connection over it);
- episode_search / episode_handoff with bodies over episodes totalling more than 4 MiB answer a
  capped reply (`total`, `truncated`, `bodies_omitted`), and the omitted bodies read by id;
- a reply the daemon cannot fit into a frame is a typed error (`reply_too_large`), not a timeout.

Real daemon, real bridges (harness.Env kills every process at teardown).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import msgpack
import pytest
import zmq

from harness import Env, RawBridge, call, call_error
from memoryd.client.connection import Connection
from memoryd.errors import MemorydError
from memoryd.mcp_bridge.jsonrpc import MAX_LINE_BYTES, LineReader, head_id
from memoryd.protocol import MAX_DEPTH, MAX_FRAME_BYTES

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
MB = 1_000_000
WT = {"MEMORYD_WORKTREE": "/w/frames"}


class StdioBridge(RawBridge):
    """A raw bridge whose liveness is a ping behind everything sent, and whose memory is read from /proc."""

    def __init__(self, env: Env) -> None:
        super().__init__(env, **WT)
        self.pings = 0

    def ping(self) -> None:
        """The bridge is alive and serving: a ping behind everything sent is answered."""
        self.pings += 1
        self.send({"jsonrpc": "2.0", "id": f"ping-{self.pings}", "method": "ping"})
        assert self.reply_to(f"ping-{self.pings}")["result"] == {}
        assert self.proc.poll() is None

    def peak_rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM in /proc")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def tool_call(msg_id: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


# -- nesting and line length on the bridge's stdio -------------------------------------------------

@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_json_is_a_parse_error_and_the_bridge_keeps_serving(served: Env, depth: int) -> None:
    bridge = StdioBridge(served)
    bridge.send_line(nested(depth))  # as the first line: the startup fast path must not die either
    assert bridge.reply()["error"]["code"] == PARSE_ERROR
    bridge.initialize()
    for line in (nested(depth),
                 b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": ' + nested(depth) + b"}}",
                 json.dumps(tool_call(2, "episode_write", {"body": "x"}))[:-2].encode()
                 + b', "deep": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}}"):
        bridge.send_line(line)
        error = bridge.reply()["error"]
        assert error["code"] == PARSE_ERROR, error
        bridge.ping()


def test_arguments_nested_past_the_frame_limit_are_invalid_params_naming_them(served: Env) -> None:
    bridge = StdioBridge(served)
    bridge.initialize()
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    bridge.send(tool_call(3, "episode_search", {"ids": deep, "max_results": 5}))
    error = bridge.reply_to(3)["error"]
    assert error["code"] == INVALID_PARAMS and error["data"]["param"] == "ids", error
    bridge.ping()


def test_a_line_over_the_cap_is_refused_quickly_with_bounded_memory(served: Env) -> None:
    bridge = StdioBridge(served)
    bridge.initialize()
    bridge.ping()  # fully started: zmq imported, connected
    peak_before = bridge.peak_rss_kib()
    line = json.dumps(tool_call("big", "episode_write", {"body": "x" * (20 * MB)})).encode()
    assert len(line) > 2 * MAX_LINE_BYTES
    began = time.monotonic()
    writer = threading.Thread(target=bridge.send_line, args=(line,))
    writer.start()
    error = bridge.reply_to("big", timeout_s=10)["error"]  # answered while the line is still arriving
    assert error["code"] == INVALID_REQUEST and error["data"] == {"reason": "line_too_long", "limit": MAX_LINE_BYTES}
    writer.join(timeout=10)
    bridge.ping()
    assert time.monotonic() - began < 5, "an over-cap line must not take seconds"
    grown_mib = (bridge.peak_rss_kib() - peak_before) / 1024
    assert grown_mib < len(line) / 2 ** 20 / 2, f"the bridge's peak memory grew {grown_mib:.0f} MiB"
    # the same as the very first line, before the startup fast path hands over to the bridge
    first = StdioBridge(served)
    first.send_line(line)
    assert first.reply_to("big", timeout_s=10)["error"]["code"] == INVALID_REQUEST
    first.initialize()
    first.ping()


# -- frames over 4 MiB ------------------------------------------------------------------------------

def test_an_argument_over_the_frame_limit_is_invalid_params_and_the_bridge_stays_connected(env: Env) -> None:
    env.start_daemon()

    async def main() -> None:
        async with env.session(**WT) as s:
            before = await call(s, "episode_write", body="before the big one")
            error = await call_error(s, "episode_write", body="x" * (5 * MB))
            assert error.code == INVALID_PARAMS and error.data["param"] == "body", error
            assert str(MAX_FRAME_BYTES) in error.data["reason"]
            capped = await call_error(s, "episode_write", body="x" * (2 * MB))  # the daemon's own cap
            assert capped.code == INVALID_PARAMS and capped.data["param"] == "body"
            after = await call(s, "episode_write", body="after the big one")
            assert after["session_id"] == before["session_id"], "the bridge lost its connection"
    anyio.run(main)
    status = json.loads(env.memoryd("status", "--json").stdout)
    assert status["counts"]["episodes"] == 2 and status["dropped_frames"] == 0


def test_episode_search_with_bodies_over_4_mib_is_capped_with_a_total(env: Env) -> None:
    env.start_daemon()
    body = "b" * (900 * 1000)  # six of these: 5.4 MB of bodies, each under the 1 MB write cap

    async def main() -> None:
        async with env.session(**WT) as s:
            written = [await call(s, "episode_write", body=f"{i} {body}", swarm_id="big") for i in range(6)]
            ids = [w["id"] for w in written]
            found = await call(s, "episode_search", swarm_id="big", include_bodies=True)
            assert found["total"] == 6 and [e["id"] for e in found["episodes"]] == ids
            assert found["truncated"] is True and "4 MiB" in found["hint"]
            omitted = found["bodies_omitted"]
            assert 0 < len(omitted) < 6 and omitted == ids[:len(omitted)], "the oldest bodies go first"
            for row in found["episodes"]:
                assert ("body" in row) == (row["id"] not in omitted)
                assert "body" not in row or row["body"].startswith(f"{ids.index(row['id'])} ")
            read = await call(s, "episode_search", ids=omitted[:2])
            assert [len(e["body"]) for e in read["episodes"]] == [len(body) + 2] * 2
            assert "truncated" not in read
            small = await call(s, "episode_search", swarm_id="big", max_results=2, include_bodies=True)
            assert small["total"] == 6 and "truncated" not in small
            await call(s, "memory_session_finish", session_id=written[0]["session_id"],
                       summary="wrote six large episodes")
        async with env.session(**WT) as s:
            handoff = await call(s, "episode_handoff", include_bodies=True, max_episodes=6)
            assert len(handoff["episodes"]) == 6 and handoff["truncated"] is True
            assert handoff["bodies_omitted"] == ids[:len(handoff["bodies_omitted"])]
    anyio.run(main)


def test_a_reply_over_the_frame_limit_is_a_typed_error_not_a_disconnect(daemon: Env) -> None:
    endpoint = (daemon.status() or {})["endpoint"]
    conn = Connection({"worktree": "/w/frames"}, endpoint=endpoint, autospawn=False)
    try:
        session = conn.connect()["session_id"]
        scopes = [f"s{i:02d}-" + "a" * 120 for i in range(64)]
        row = 0
        while row * (4096 + 64 * 130) < MAX_FRAME_BYTES + 512 * 1024:  # fat rows: 4 KB takeaway, 64 scopes
            conn.call("call", {"tool": "episode_write", "arguments":
                               {"body": f"row {row}", "takeaway": "t" * 4000, "scopes": scopes}})
            row += 1
        with pytest.raises(MemorydError) as refused:  # `memoryd episodes list SESSION`'s op
            conn.call("episodes", {"action": "list", "session": session}, timeout_s=5)
        assert refused.value.code == INTERNAL_ERROR and refused.value.kind == "reply_too_large"
        assert refused.value.data["limit"] == MAX_FRAME_BYTES < refused.value.data["bytes"]
        found = conn.call("call", {"tool": "episode_search", "arguments": {"session_id": session, "max_results": 200}})
        assert found["total"] == row and len(found["episodes"]) == 200
        assert conn.call("status", {})["pid"] == daemon.daemon_pid()
    finally:
        conn.close()


def test_the_daemon_drops_frames_nested_past_the_limit_and_keeps_serving(daemon: Env) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect((daemon.status() or {})["endpoint"])
    try:
        deep: Any = 1
        for _ in range(MAX_DEPTH + 1):
            deep = {"a": deep}
        sock.send(msgpack.packb({"v": 1, "id": 1, "op": "status", "args": {"x": deep}, "conn": "deep"}))
        sock.send(msgpack.packb({"v": 1, "id": 2, "op": "status", "args": {}, "conn": "deep"}))
        assert sock.poll(5000)
        reply = msgpack.unpackb(sock.recv(), raw=False)
        assert reply["id"] == 2 and reply["ok"], "the too-deep frame must be dropped, the next one served"
        assert reply["result"]["dropped_frames"] == 1 and reply["result"]["bad_requests"] == 1
    finally:
        ctx.destroy(linger=0)


def test_the_line_reader_keeps_at_most_the_cap_and_answers_only_a_top_level_id() -> None:
    reader = LineReader(limit=10)
    for chunk in (b"abc\n\n  \nde", b"f\n0123456789A", b"BCDEF", b"GH\nxyz", b"\n0123456789X\nlast"):
        reader.feed(chunk)
    reader.finish()
    items = reader.take()
    assert [i if isinstance(i, bytes) else ("over", i.head) for i in items] == [
        b"abc", b"def", ("over", b"0123456789A"), b"xyz", ("over", b"0123456789X"), b"last"]
    reader.finish()
    assert reader.take() == []
    assert head_id(b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"x": "') == 5
    assert head_id(b'{"method": "x", "id" : "a\\"b", "params"') == 'a"b'
    assert head_id(b'{"params": {"id": 7, "body": "') is None  # nested: never another request's id
    assert head_id(b'{"a": "\\"id\\": 3", "id": true}') is None  # inside a string; a bool is no id
    assert head_id(b'[{"id": 1}]') is None
