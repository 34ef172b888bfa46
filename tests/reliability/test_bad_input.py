"""Bad input on both wires: typed errors only, the process keeps serving, nothing is written.

The daemon's wire (a raw ZeroMQ DEALER speaking msgpack) must answer `bad_request` when it can
recover a request id and drop the frame otherwise (docs/wire.md); the bridge's stdio must answer
JSON-RPC errors (-32700, -32600, -32601, -32602) and keep answering `ping` (docs/wire.md).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Env, RawBridge
from memoryd.protocol import OPS

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MIB = 1024 * 1024
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602




# -- the daemon's wire --------------------------------------------------------------------------

class Wire:
    """A raw DEALER on the daemon's endpoint."""

    def __init__(self, env: Env) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect((env.status() or {})["endpoint"])
        self.conn = "fuzz-" + os.urandom(6).hex()
        self.last_id = 0

    def close(self) -> None:
        self.ctx.destroy(linger=0)  # closes the socket too: a bare term() would wait for it forever

    def remember_counts(self) -> None:
        self.before, _ = self.status_after()

    def assert_nothing_written(self) -> None:
        after, _ = self.status_after()
        assert after["pid"] == self.before["pid"], "the daemon was replaced"
        assert after["counts"]["events"] == self.before["counts"]["events"], "bad input wrote an event"
        assert after["counts"]["episodes"] == self.before["counts"]["episodes"]

    def request(self, op: str, args: dict[str, Any], timeout_s: float = 5) -> dict[str, Any] | None:
        self.last_id += 1
        rid = self.last_id
        self.sock.send(msgpack.packb({"v": 1, "id": rid, "op": op, "args": args, "conn": self.conn}))
        return self.reply_to(rid, timeout_s)

    def reply_to(self, rid: int, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while self.sock.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            reply = msgpack.unpackb(self.sock.recv(), raw=False)
            if reply.get("id") == rid:
                return reply  # type: ignore[no-any-return]
        return None

    def status_after(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A valid `status` sent behind whatever was sent before: (its result, every other reply)."""
        others: list[dict[str, Any]] = []
        for _ in range(5):  # a refused oversized frame makes ZeroMQ reconnect: resend then
            self.last_id += 1
            rid = self.last_id
            self.sock.send(msgpack.packb({"v": 1, "id": rid, "op": "status", "args": {}, "conn": self.conn}))
            deadline = time.monotonic() + 3
            while self.sock.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                reply = msgpack.unpackb(self.sock.recv(), raw=False)
                if reply.get("ok") is True and "pid" in (reply.get("result") or {}):
                    if reply["id"] == rid:
                        return reply["result"], others
                    continue  # an answer to an earlier attempt
                others.append(reply)
        raise AssertionError(f"the daemon stopped answering status; other replies: {others}")

    def send_garbage(self, *frames: bytes, answered_id: int | None = None) -> list[dict[str, Any]]:
        """Send one message; check every reply is a bad_request (to `answered_id`, if given)."""
        self.sock.send_multipart(list(frames))
        _, others = self.status_after()
        for reply in others:
            assert reply["ok"] is False, reply
            assert reply["error"]["kind"] == "bad_request" and reply["error"]["code"] == INVALID_REQUEST, reply
        if answered_id is not None:
            assert [r["id"] for r in others] == [answered_id]
        return others


@pytest.fixture
def wire(served: Env) -> Any:
    """A raw connection that never says hello: nothing it sends may write anything."""
    w = Wire(served)
    try:
        w.remember_counts()
        yield w
        w.assert_nothing_written()
    finally:
        w.close()


def not_one(value: Any) -> bool:
    return not (value == 1 and type(value) in (int, float, bool))


INT64 = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)
JUNK = st.one_of(st.none(), st.booleans(), INT64, st.floats(allow_nan=False), st.text(max_size=40),
                 st.binary(max_size=40), st.lists(INT64, max_size=4),
                 st.dictionaries(st.text(max_size=8), INT64, max_size=4))
BAD_FIELDS = {
    "v": JUNK.filter(not_one),
    "op": JUNK.filter(lambda v: not isinstance(v, str) or v not in OPS),
    "args": JUNK.filter(lambda v: not isinstance(v, dict)),
    "conn": st.one_of(JUNK.filter(lambda v: not isinstance(v, str)), st.just(""),
                      st.text(min_size=129, max_size=300)),
}
REQUEST_IDS = st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1)


def test_random_bytes_are_dropped_or_answered_bad_request(wire: Wire) -> None:
    @FUZZ
    @given(st.binary(max_size=4096))
    def fuzz(payload: bytes) -> None:
        assert len(wire.send_garbage(payload)) <= 1

    fuzz()
    status, _ = wire.status_after()
    assert status["dropped_frames"] > 0


def test_truncated_msgpack_requests_are_dropped(wire: Wire) -> None:
    valid = [msgpack.packb({"v": 1, "id": 77, "op": op, "args": args, "conn": "truncated"})
             for op, args in (("status", {}), ("hello", {"protocol": 1, "identity": {"worktree": "/w"}}),
                              ("call", {"tool": "episode_write", "arguments": {"body": "x" * 300}}))]

    @FUZZ
    @given(st.sampled_from(valid), st.data())
    def fuzz(frame: bytes, data: st.DataObject) -> None:
        cut = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
        assert wire.send_garbage(frame[:cut]) == []

    fuzz()


def test_requests_with_a_wrong_field_type_get_bad_request_naming_their_id(wire: Wire) -> None:
    @FUZZ
    @given(REQUEST_IDS, st.sampled_from(sorted(BAD_FIELDS)), st.data(), st.booleans())
    def fuzz(rid: int, field: str, data: st.DataObject, drop: bool) -> None:
        message: dict[str, Any] = {"v": 1, "id": rid, "op": "status", "args": {}, "conn": "typed"}
        if drop and field != "args":  # a missing `args` means {} and is fine; the others are not
            del message[field]
        else:
            message[field] = data.draw(BAD_FIELDS[field])
        wire.send_garbage(msgpack.packb(message), answered_id=rid)

    fuzz()
    status, _ = wire.status_after()
    assert status["bad_requests"] > 0  # counted, as docs/wire.md asks


def test_requests_without_a_usable_id_are_dropped(wire: Wire) -> None:
    ids = st.one_of(st.none(), st.booleans(), st.floats(), st.text(max_size=10), st.binary(max_size=5),
                    st.lists(INT64, max_size=3))

    @FUZZ
    @given(ids, st.booleans())
    def fuzz(rid: Any, present: bool) -> None:
        message: dict[str, Any] = {"v": 1, "op": "status", "args": {}, "conn": "no-id"}
        if present:
            message["id"] = rid
        assert wire.send_garbage(msgpack.packb(message)) == []

    fuzz()


def test_huge_maps_and_deep_nesting_are_refused_without_harm(wire: Wire) -> None:
    big_args = {f"k{i}": i for i in range(50_000)}
    wire.send_garbage(msgpack.packb({"v": 1, "id": 5, "op": "nope", "args": big_args, "conn": "c"}), answered_id=5)
    over_limit = {f"k{i}": i for i in range(150_000)}  # above the unpacker's map limit
    assert wire.send_garbage(msgpack.packb({"v": 1, "id": 6, "op": "status", "args": over_limit, "conn": "c"})) == []
    assert wire.send_garbage(msgpack.packb(list(range(200_000)))) == []
    assert wire.send_garbage(b"\x91" * 100_000 + b"\xc0") == []  # an array nested 100k deep
    packer = msgpack.Packer()
    deep_in_args = b"".join([packer.pack_map_header(5), packer.pack("v"), packer.pack(1), packer.pack("id"),
                             packer.pack(8), packer.pack("op"), packer.pack("status"), packer.pack("conn"),
                             packer.pack("c"), packer.pack("args"), packer.pack_map_header(1), packer.pack("a"),
                             b"\x81\xa1a" * 5_000 + b"\xc0"])
    assert wire.send_garbage(deep_in_args) == []
    shallow_bad = {"v": 1, "id": 9, "op": ["nested"] * 3, "args": {"a": [[[[[[[[1]]]]]]]]}, "conn": "c"}
    wire.send_garbage(msgpack.packb(shallow_bad), answered_id=9)
    wire.send_garbage(msgpack.packb({"v": 1, "id": 10, "op": "x" * (3 * MIB), "args": {}, "conn": "c"}),
                      answered_id=10)


def test_frames_over_four_mib_are_refused_and_the_daemon_keeps_serving(wire: Wire) -> None:
    just_over = msgpack.packb({"v": 1, "id": 11, "op": "status", "args": {"blob": b"x" * (4 * MIB)}, "conn": "c"})
    assert 4 * MIB < len(just_over) < 4 * MIB + 1024
    assert wire.send_garbage(just_over) == []  # refused before it is even decoded: no reply
    far_over = msgpack.packb({"v": 1, "id": 12, "op": "status", "args": {"blob": b"x" * (5 * MIB)}, "conn": "c"})
    assert wire.send_garbage(far_over) == []


def test_multipart_and_empty_frames_are_dropped(wire: Wire) -> None:
    status = msgpack.packb({"v": 1, "id": 13, "op": "status", "args": {}, "conn": "multi"})
    assert wire.send_garbage(status, status) == []
    assert wire.send_garbage(status, b"") == []
    assert wire.send_garbage(b"") == []
    assert wire.send_garbage(b"", b"", b"") == []

    @FUZZ
    @given(st.lists(st.binary(max_size=64), min_size=2, max_size=5))
    def fuzz(frames: list[bytes]) -> None:
        assert wire.send_garbage(*frames) == []

    fuzz()


def test_a_call_before_hello_is_refused_as_a_bad_request(wire: Wire) -> None:
    reply = wire.request("call", {"tool": "episode_write", "arguments": {"body": "x"}})
    assert reply is not None and reply["ok"] is False
    assert reply["error"]["code"] == INVALID_REQUEST
    assert reply["error"]["kind"] in ("bad_request", "unknown_connection")


# -- calls with wrong-typed fields, from a connection that said hello -----------------------------

@pytest.fixture
def hello_wire(served: Env) -> Any:
    """A raw connection with a session; each test checks its refused calls wrote nothing."""
    w = Wire(served)
    try:
        reply = w.request("hello", {"protocol": 1, "client_version": "fuzz", "identity": {"worktree": "/w/fuzz"}})
        assert reply is not None and reply["ok"], reply
        w.remember_counts()
        yield w
    finally:
        w.close()


@pytest.mark.parametrize("tool", [
    5, None, 1.5, True, b"episode_write", "no_such_tool", "",
    ["episode_write"],
    {"name": "episode_write"},
])
def test_a_call_naming_no_valid_tool_is_a_typed_error(hello_wire: Wire, tool: Any) -> None:
    reply = hello_wire.request("call", {"tool": tool, "arguments": {}})
    assert reply is not None and reply["ok"] is False
    assert reply["error"]["code"] == INVALID_REQUEST, reply["error"]
    assert reply["error"]["kind"] in ("bad_request", "unknown_tool")
    hello_wire.assert_nothing_written()


@pytest.mark.parametrize("arguments", [
    "text", 5, [1, 2], {"prior_session_id": 5}, {"max_episodes": "5"}, {"unknown": 1},
    {"max_episodes": True}, {"max_episodes": 1e308},
    [],
    0,
    "",
])
def test_call_arguments_of_the_wrong_shape_are_invalid_params(hello_wire: Wire, arguments: Any) -> None:
    reply = hello_wire.request("call", {"tool": "episode_handoff", "arguments": arguments})
    assert reply is not None and reply["ok"] is False, reply
    assert reply["error"]["code"] == INVALID_PARAMS, reply["error"]
    hello_wire.assert_nothing_written()


def test_fuzzed_tool_arguments_are_refused_with_invalid_params(hello_wire: Wire) -> None:
    values = st.one_of(JUNK, st.floats(), st.text(max_size=300))
    write_args = st.fixed_dictionaries({}, optional={"body": values.filter(lambda v: not isinstance(v, str)),
                                                     "takeaway": values, "scopes": values, "swarm_id": values})

    @FUZZ
    @given(write_args)
    def fuzz(arguments: dict[str, Any]) -> None:
        reply = hello_wire.request("call", {"tool": "episode_write", "arguments": arguments})
        assert reply is not None and reply["ok"] is False, reply
        assert reply["error"]["code"] == INVALID_PARAMS, reply["error"]

    fuzz()
    hello_wire.assert_nothing_written()


def test_infinite_wait_timeouts_are_invalid_params(hello_wire: Wire) -> None:
    for timeout in (float("inf"), float("-inf"), -1, 301):
        reply = hello_wire.request("call", {"tool": "episode_search",
                                            "arguments": {"swarm_id": "s", "wait_for": 1, "timeout_s": timeout}})
        assert reply is not None and reply["ok"] is False
        assert reply["error"]["code"] == INVALID_PARAMS and reply["error"]["data"]["param"] == "timeout_s"
    hello_wire.assert_nothing_written()


def test_a_nan_wait_timeout_is_invalid_params_and_the_daemon_survives(served: Env) -> None:
    w = Wire(served)
    try:
        assert w.request("hello", {"protocol": 1, "identity": {"worktree": "/w/nan"}}) is not None
        reply = w.request("call", {"tool": "episode_search",
                                   "arguments": {"swarm_id": "s", "wait_for": 1, "timeout_s": float("nan")}})
        assert reply is not None, "no answer: the daemon died"
        assert reply["ok"] is False and reply["error"]["code"] == INVALID_PARAMS
        assert reply["error"]["data"]["param"] == "timeout_s"
    finally:
        w.close()


# -- the bridge's stdio ---------------------------------------------------------------------------

class FuzzBridge(RawBridge):
    """A raw bridge whose replies are read behind a ping, each checked to be one whole JSON-RPC line."""

    def __init__(self, env: Env) -> None:
        super().__init__(env, MEMORYD_WORKTREE="/w/stdio")
        self.ping_id = 0

    def replies_until_ping(self, also: tuple[Any, ...] = (), timeout_s: float = 20) -> list[dict[str, Any]]:
        """Send a ping behind what was sent; return every other reply, each a whole JSON-RPC line.

        The bridge answers ping itself, so replies the daemon gives (tools/call) may come after
        it: `also` names the ids to wait for as well."""
        self.ping_id += 1
        ping_id = f"ping-{self.ping_id}"
        self.send({"jsonrpc": "2.0", "id": ping_id, "method": "ping"})
        others: list[dict[str, Any]] = []
        pinged = False
        deadline = time.monotonic() + timeout_s
        while not pinged or not set(also) <= {r.get("id") for r in others}:
            reply = self.reply(max(0.01, deadline - time.monotonic()))
            assert reply.get("jsonrpc") == "2.0" and ("result" in reply) != ("error" in reply), reply
            if reply.get("id") == ping_id:
                assert reply["result"] == {}
                pinged = True
            else:
                others.append(reply)
        return others

    def errors_for(self, raw: bytes, also: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        self.send_line(raw)
        return self.replies_until_ping(also)

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "fuzz", "version": "1"}}})
        replies = self.replies_until_ping()
        assert [r["id"] for r in replies] == ["init"] and "result" in replies[0]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.fixture
def bridge(served: Env) -> Any:
    b = FuzzBridge(served)
    b.initialize()
    yield b
    b.replies_until_ping()
    status = served.memoryd("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["episodes"] == 0


def error_codes(replies: list[dict[str, Any]]) -> list[tuple[Any, int]]:
    return [(r.get("id"), r["error"]["code"]) for r in replies]


def test_malformed_json_lines_get_parse_errors(bridge: FuzzBridge) -> None:
    for raw in (b"{", b"not json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"\xff\xfe\xfd",
                b"{'single': 'quotes'}", b'{"a": 1}}', b'{"jsonrpc": "2.0", "id": 2, "method": "ping",}'):
        assert error_codes(bridge.errors_for(raw)) == [(None, PARSE_ERROR)], raw


def test_messages_that_are_not_json_rpc_requests_get_invalid_request(bridge: FuzzBridge) -> None:
    cases = [
        ([], None), (1, None), ("text", None), (None, None), ({}, None),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1),
        ({"id": 2, "method": "ping"}, 2),
        ({"jsonrpc": "2.0", "id": 3}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 7}, 4),
        ({"jsonrpc": "2.0", "id": [5], "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
        ([{"jsonrpc": "2.0", "id": 6, "method": "ping"}], None),
    ]
    for message, echoed in cases:
        assert error_codes(bridge.errors_for(json.dumps(message).encode())) == [(echoed, INVALID_REQUEST)], message


def test_unknown_methods_get_method_not_found(bridge: FuzzBridge) -> None:
    for i, method in enumerate(("nope", "tools/execute", "resources/subscribe", "prompts/get", "", "TOOLS/LIST")):
        replies = bridge.errors_for(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": {}}).encode())
        assert error_codes(replies) == [(i, METHOD_NOT_FOUND)], method
    # a notification (no id) is never answered, known or not
    assert bridge.errors_for(b'{"jsonrpc": "2.0", "method": "notifications/whatever"}') == []


def test_tools_call_with_bad_arguments_or_unknown_tools_gets_invalid_params(bridge: FuzzBridge) -> None:
    params: list[Any] = [
        {}, {"name": 5}, {"name": None}, {"name": "no_such_tool"}, {"name": "episode_write", "arguments": "x"},
        {"name": "episode_write", "arguments": [1]}, {"name": "episode_write"},
        {"name": "episode_write", "arguments": {"body": 5}},
        {"name": "episode_write", "arguments": {"body": "   "}},
        {"name": "episode_write", "arguments": {"body": "x", "scopes": "infra"}},
        {"name": "episode_write", "arguments": {"body": "x", "scopes": ["Not A Scope"]}},
        {"name": "episode_write", "arguments": {"body": "x", "swarm_id": "has space"}},
        {"name": "episode_write", "arguments": {"body": "x", "extra": 1}},
        {"name": "episode_handoff", "arguments": {"max_episodes": "5"}},
        {"name": "episode_handoff", "arguments": {"max_episodes": 0}},
        {"name": "episode_search", "arguments": {"ids": ["not-a-ulid"]}},
        {"name": "episode_search", "arguments": {"wait_for": 1, "timeout_s": "soon"}},
        [1, 2],
    ]
    for i, p in enumerate(params):
        message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": p}
        replies = bridge.errors_for(json.dumps(message).encode(), also=(i,))
        assert error_codes(replies) == [(i, INVALID_PARAMS)], p


# Integers beyond 64 bits and lone surrogates have their own tests below.
JSON_SCALARS = st.one_of(st.none(), st.booleans(), INT64, st.floats(allow_nan=False, allow_infinity=False),
                         st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)
LINE_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n"), max_size=200)


def test_random_lines_get_typed_errors_and_the_bridge_keeps_answering(bridge: FuzzBridge) -> None:
    expected = {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS}

    @FUZZ
    @given(LINE_TEXT)
    def text_lines(line: str) -> None:
        for reply in bridge.errors_for(line.encode()):
            assert reply["error"]["code"] in expected, reply

    @FUZZ
    @given(st.binary(max_size=200).filter(lambda b: b"\n" not in b))
    def byte_lines(line: bytes) -> None:
        for reply in bridge.errors_for(line):
            assert reply["error"]["code"] in expected, reply

    rpc_like = st.fixed_dictionaries({}, optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": JSON_SCALARS,
        "method": st.one_of(st.sampled_from(["tools/call", "tools/list", "nope", "ping"]), JSON_SCALARS),
        "params": st.one_of(JSON_VALUES, st.fixed_dictionaries(
            {"name": st.one_of(st.sampled_from(["episode_write", "episode_search", "nope"]), JSON_SCALARS)},
            optional={"arguments": st.dictionaries(st.sampled_from(["body", "scopes", "since", "ids", "max_results"]),
                                                   JSON_VALUES, max_size=3).filter(lambda a: "body" not in a)}))})

    @FUZZ
    @given(rpc_like)
    def rpc_shapes(message: dict[str, Any]) -> None:
        for reply in bridge.errors_for(json.dumps(message).encode()):
            if "error" in reply:
                assert reply["error"]["code"] in expected, reply

    text_lines()
    byte_lines()
    rpc_shapes()


def test_a_lone_surrogate_in_an_id_or_method_does_not_kill_the_bridge(served: Env) -> None:
    bridge = FuzzBridge(served)
    bridge.initialize()
    bridge.send_line(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "nope"}')
    bridge.replies_until_ping()
    bridge.send_line(b'{"jsonrpc": "2.0", "id": 1, "method": "\\udfff"}')
    assert error_codes(bridge.replies_until_ping()) == [(1, METHOD_NOT_FOUND)]


def test_a_lone_surrogate_in_tool_arguments_is_answered_and_does_not_kill_the_bridge(served: Env) -> None:
    bridge = FuzzBridge(served)
    bridge.initialize()
    bridge.send_line(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                     b'{"name": "episode_write", "arguments": {"body": "half an emoji \\ud83d"}}}')
    replies = bridge.replies_until_ping(also=(1,))
    assert [r["id"] for r in replies] == [1]


def test_an_integer_beyond_64_bits_in_tool_arguments_is_invalid_params(served: Env) -> None:
    bridge = FuzzBridge(served)
    bridge.initialize()
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "episode_search", "arguments": {"max_results": 10 ** 30}}}
    replies = bridge.errors_for(json.dumps(message).encode(), also=(1,))
    assert error_codes(replies) == [(1, INVALID_PARAMS)]
