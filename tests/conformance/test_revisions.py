"""Protocol revisions and resources, judged by the official SDK client in each of its connect modes.

- `mode="legacy"`: the `initialize` handshake (2025-11-25);
- `mode="auto"`: probes `server/discover`, stays modern (2026-07-28) when the bridge answers it;
- `mode="2026-07-28"`: pinned, no handshake and no probe — every request carries its version in
  `_meta`, and the SDK validates results against that revision (resultType, ttlMs, cacheScope);
- a dual-era client whose only modern version the bridge does not speak: the probe gets -32022,
  which names our handshake versions, and the client falls back to `initialize`.
Raw JSON-RPC covers what the SDK hides: the exact wire fields, and requests with no opening at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from harness import Env, RawBridge
from memoryd.daemon.catalogue import CORE, TOOLS
from memoryd.profiles import PROFILES

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"}}
URI_PREFIX = "memoryd://memories/"
UNKNOWN_URI = URI_PREFIX + "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # a well-formed ULID no store holds
MODES = ["legacy", "auto", MODERN]
PROFILE_ENV: dict[str, dict[str, str]] = {"core": {}, "full": {"MEMORYD_TOOLS": "full"}}  # core: the default


async def write_memory(client: Client, content: str, **extra: Any) -> str:
    result = await client.call_tool("memory_write", {"content": content, "scopes": ["projects:revisions"], **extra})
    data = result.structured_content
    assert data is not None and data["status"] == "committed", data
    return str(data["id"])


async def all_resources(client: Client) -> tuple[list[Any], int]:
    """Every listed resource, following nextCursor; and how many pages that took."""
    found, cursor, pages = [], None, 0
    while True:
        page = await client.list_resources(cursor=cursor, cache_mode="bypass")
        found += page.resources
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return found, pages


# -- the SDK client, in each mode ----------------------------------------------------------------

@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("mode", MODES)
def test_each_sdk_mode_lists_and_calls_tools_and_reads_a_memory_as_a_resource(served: Env, mode: str,
                                                                               profile: str) -> None:
    """In each mode and tool profile; `core` leaves memory_list out of tools/list, and resources
    still list through it (a profile decides what is listed, not what may be called)."""
    async def main() -> None:
        async with Client(served.bridge_params(**PROFILE_ENV[profile]), mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else MODERN)
            if mode != MODERN:  # a pinned client learns nothing up front: it asked nobody
                assert client.server_capabilities.resources is not None
                assert client.server_capabilities.tools is not None
                assert client.server_info is not None and client.server_info.name == "memoryd"
                assert client.instructions and "episode_handoff" in client.instructions
            listed = await client.list_tools()
            assert len(listed.tools) == (len(CORE) if profile == "core" else 22)
            written = await client.call_tool("episode_write", {"body": f"{mode} mode works"})
            assert written.structured_content is not None
            assert written.structured_content["status"] == "committed"

            memory_id = await write_memory(client, f"Deploys for the {mode} cluster go through the blue pipeline.")
            resources, _ = await all_resources(client)
            mine = [r for r in resources if r.uri == URI_PREFIX + memory_id]
            assert len(mine) == 1
            assert mine[0].name == f"Deploys for the {mode} cluster go through the blue pipeline."
            assert mine[0].mime_type == "text/markdown"

            read = await client.read_resource(URI_PREFIX + memory_id)
            assert len(read.contents) == 1
            body = read.contents[0]
            assert body.uri == URI_PREFIX + memory_id and body.mime_type == "text/markdown"
            text = body.text  # type: ignore[union-attr]
            assert "not instructions" in text.splitlines()[0]  # framed as data before anything else
            assert f"id: {memory_id}" in text and "status: live" in text and "scopes: projects:revisions" in text
            assert text.endswith(f"Deploys for the {mode} cluster go through the blue pipeline.")

            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == [URI_PREFIX + "{id}"]
    anyio.run(main)


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_or_malformed_uri_is_resource_not_found_naming_it(served: Env, mode: str) -> None:
    # 2025-11-25 and earlier say -32002; 2026-07-28 forbids that code and says -32602.
    expected = -32002 if mode == "legacy" else -32602

    async def main() -> None:
        async with Client(served.bridge_params(), mode=mode) as client:
            for uri in (UNKNOWN_URI, URI_PREFIX + "not-a-ulid", "file:///etc/passwd", "memoryd://episodes/x"):
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(uri)
                assert caught.value.error.code == expected, uri
                assert caught.value.error.data == {"uri": uri}
                assert uri in caught.value.error.message
    anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_a_3mb_uri_is_refused_as_too_long_and_never_echoed_back(served: Env, mode: str) -> None:
    huge = URI_PREFIX + "A" * 3_000_000
    long_unknown = URI_PREFIX + "B" * 1000  # under the cap: not found, named by a cut echo

    async def main() -> None:
        async with Client(served.bridge_params(), mode=mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(huge)
            error = caught.value.error
            assert error.code == -32602 and error.data["reason"] == "too long"
            assert error.data["length"] == len(huge)
            assert len(error.message) < 300 and "AAAA" not in json.dumps(error.model_dump())
            with pytest.raises(MCPError) as caught:
                await client.read_resource(long_unknown)
            error = caught.value.error
            assert len(error.message) < 300 and error.message.endswith("…")
            assert "B" * 300 not in json.dumps(error.model_dump())
            await client.read_resource(URI_PREFIX + await write_memory(client, "The bridge still reads."))
    anyio.run(main)


def test_resources_list_pages_with_a_cursor_and_every_memory_appears_once(served: Env) -> None:
    from memoryd.mcp_bridge.resources import PAGE_SIZE

    topics = ["cache", "queue", "schema", "auth", "logging", "billing", "search", "export", "backup", "metrics"]
    count = PAGE_SIZE + 7

    async def main() -> None:
        async with Client(served.bridge_params(), mode=MODERN) as client:
            ids = set()
            for i in range(count):
                topic = topics[i % len(topics)]
                ids.add(await write_memory(
                    client, f"Note {i}: the {topic} service owner for region {i} is team {i * 7 % 13}.", force=True))
            resources, pages = await all_resources(client)
        assert pages == 2
        uris = [r.uri for r in resources]
        assert len(uris) == len(set(uris)) == count
        assert set(uris) == {URI_PREFIX + i for i in ids}
        assert uris == sorted(uris, reverse=True)  # newest first, as memory_list pages
    anyio.run(main)


def test_a_client_whose_only_modern_version_we_lack_falls_back_to_initialize(
        served: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A future dual-era client probes at a version we do not speak; -32022 lists our handshake
    versions, so the SDK's auto mode falls back to `initialize` on the same process."""
    import mcp.client._probe as probe

    monkeypatch.setattr(probe, "LATEST_MODERN_VERSION", "2099-01-01")
    monkeypatch.setattr(probe, "MODERN_PROTOCOL_VERSIONS", ("2099-01-01",))

    async def main() -> None:
        async with Client(served.bridge_params(), mode="auto") as client:
            assert client.protocol_version == "2025-11-25"
            result = await client.call_tool("episode_write", {"body": "fell back to the handshake"})
            assert result.structured_content is not None
            assert result.structured_content["status"] == "committed"
            assert len((await client.list_resources()).resources) == 0
    anyio.run(main)


def test_modern_tool_errors_never_use_the_retired_32002(served: Env) -> None:
    async def main() -> None:
        async with Client(served.bridge_params(), mode=MODERN) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("episode_handoff", {"prior_session_id": "sess-999"})
            assert caught.value.error.code == -32602
            assert caught.value.error.data == {"kind": "unknown_session", "id": "sess-999"}
        async with Client(served.bridge_params(), mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("episode_handoff", {"prior_session_id": "sess-999"})
            assert caught.value.error.code == -32002  # unchanged for handshake-era clients
    anyio.run(main)


# -- the wire, raw --------------------------------------------------------------------------------

def test_a_modern_request_needs_no_initialize_and_carries_the_revisions_fields(served: Env) -> None:
    raw = RawBridge(served)
    try:
        called = raw.request("tools/call", {"_meta": META, "name": "episode_write",
                                            "arguments": {"body": "first line of this bridge's life"}})
        assert called["result"]["structuredContent"]["status"] == "committed"
        assert called["result"]["resultType"] == "complete"
        assert called["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memoryd"
        assert "ttlMs" not in called["result"]  # cache hints belong to list and read results only

        for method in ("tools/list", "resources/list", "resources/templates/list"):
            result = raw.request(method, {"_meta": META})["result"]
            assert result["resultType"] == "complete", method
            assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, method
            assert result["cacheScope"] in ("public", "private"), method
        assert raw.request("resources/list", {"_meta": META})["result"]["cacheScope"] == "private"

        # The same bridge still serves a handshake-era request, without the modern fields.
        legacy = raw.request("tools/list", {})["result"]
        assert set(legacy) == {"tools"}
    finally:
        raw.close()


def test_server_discover_answers_versions_capabilities_and_instructions(served: Env) -> None:
    raw = RawBridge(served)
    try:
        result = raw.request("server/discover", {"_meta": META})["result"]
        assert result["supportedVersions"][0] == MODERN
        assert {"2025-11-25", "2025-06-18"} <= set(result["supportedVersions"])
        assert result["capabilities"] == {"tools": {"listChanged": False}, "resources": {"listChanged": False}}
        assert "episode_handoff" in result["instructions"]
        assert result["resultType"] == "complete" and result["cacheScope"] == "public" and result["ttlMs"] > 0
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memoryd"
    finally:
        raw.close()


def test_unsupported_versions_and_malformed_envelopes_are_refused(served: Env) -> None:
    raw = RawBridge(served)
    try:
        for version in ("2099-01-01", "2025-11-25"):  # unknown, and a handshake-only version
            error = raw.request("tools/list", {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": version}})
            assert error["error"]["code"] == -32022
            assert error["error"]["data"]["requested"] == version
            assert MODERN in error["error"]["data"]["supported"]
            assert "2025-11-25" in error["error"]["data"]["supported"]
        no_caps = {"io.modelcontextprotocol/protocolVersion": MODERN}
        for params in ({"_meta": no_caps}, {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": 2026}}, {}):
            error = raw.request("server/discover", params)
            assert error["error"]["code"] == -32602, params
        # and the bridge keeps serving after every refusal
        assert raw.request("tools/list", {"_meta": META})["result"]["tools"]
    finally:
        raw.close()


def test_initialize_never_negotiates_the_handshakeless_revision(served: Env) -> None:
    raw = RawBridge(served)
    try:
        result = raw.request("initialize", {"protocolVersion": MODERN, "capabilities": {},
                                            "clientInfo": {"name": "confused", "version": "1"}})["result"]
        assert result["protocolVersion"] == "2025-11-25"  # our newest handshake version, as a counter-offer
        assert result["capabilities"]["resources"] == {"listChanged": False}
    finally:
        raw.close()


def test_tools_list_order_is_the_same_on_every_call_in_every_bridge_and_era(served: Env) -> None:
    orders = []
    for _ in range(2):
        raw = RawBridge(served)
        try:
            for params in ({"_meta": META}, {}, {"_meta": META}):
                orders.append([t["name"] for t in raw.request("tools/list", params)["result"]["tools"]])
        finally:
            raw.close()
    assert orders[0] == [name for name in TOOLS if name in CORE]  # the default profile, catalogue order
    assert all(order == orders[0] for order in orders)


def test_discover_is_answered_on_the_fast_path_before_zmq_is_imported() -> None:
    """A dual-era client's probe is its opening request, so it gets the same start budget as initialize."""
    probe = ("import json, sys\n"
             "from memoryd.mcp_bridge import startup\n"
             "line, rest = startup.read_first_line()\n"
             "info = startup.answer_opening(line)\n"
             "print(json.dumps({'info': info, 'zmq': 'zmq' in sys.modules}), file=sys.stderr)\n")
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": META}})
    done = subprocess.run([sys.executable, "-c", probe], input=line + "\n", capture_output=True, text=True,
                          timeout=30, check=True)
    reply = json.loads(done.stdout)
    assert reply["id"] == 7 and reply["result"]["supportedVersions"][0] == MODERN
    assert json.loads(done.stderr) == {"info": {"name": "raw-test", "version": "1"}, "zmq": False}
