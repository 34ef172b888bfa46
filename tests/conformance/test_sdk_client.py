"""The official `mcp` SDK client is the conformance judge: handshake, list, call, errors."""

from __future__ import annotations

import anyio
from harness import Env, call, call_error
from mcp import Client


def test_sdk_client_session_handshakes_and_lists_every_tool(env: Env) -> None:
    async def main() -> None:
        async with env.session() as session:
            listed = await session.list_tools()
            names = {t.name for t in listed.tools}
            assert {"episode_write", "episode_handoff", "episode_search",
                    "memory_scope_disable", "memory_scope_enable"} <= names
            for tool in listed.tools:
                assert tool.description and tool.input_schema["type"] == "object"
                assert tool.annotations is not None and tool.annotations.open_world_hint is False
    anyio.run(main)


def test_sdk_client_in_auto_mode_discovers_and_gets_instructions(env: Env) -> None:
    async def main() -> None:
        async with Client(env.bridge_params()) as client:
            assert client.instructions and "episode_handoff" in client.instructions
            assert len(client.instructions) <= 800
            result = await client.call_tool("episode_write", {"body": "auto mode works"})
            assert result.structured_content["status"] == "committed"
    anyio.run(main)


def test_episode_write_then_handoff_in_next_session(env: Env) -> None:
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE="/w/a") as first:
            written = await call(first, "episode_write", body="tried X\nstep 3 failed", takeaway="X fails at 3")
        async with env.session(MEMORYD_WORKTREE="/w/a") as second:
            handoff = await call(second, "episode_handoff")
        assert handoff["prior_session_id"] == written["session_id"]
        assert [e["id"] for e in handoff["episodes"]] == [written["id"]]
        assert handoff["episodes"][0]["provenance"] == "local"
        assert handoff["prior_session"]["ended"] == "closed"
    anyio.run(main)


def test_bad_arguments_are_typed_invalid_params_naming_the_parameter(env: Env) -> None:
    async def main() -> None:
        async with env.session() as session:
            err = await call_error(session, "episode_write", body="   ")
            assert err.code == -32602 and err.data["param"] == "body"
            err = await call_error(session, "episode_handoff", max_episodes=51)
            assert err.code == -32602 and err.data["param"] == "max_episodes"
            err = await call_error(session, "episode_handoff", prior_session_id="sess-999")
            assert err.code == -32002 and err.data == {"kind": "unknown_session", "id": "sess-999"}
            err = await call_error(session, "no_such_tool")
            assert err.code == -32602
    anyio.run(main)


def test_tools_list_fits_the_17000_character_budget(env: Env) -> None:
    """Every agent pays for tools/list in context on every session (docs/tools.md)."""
    import json

    async def main() -> None:
        async with env.session() as session:
            listed = await session.list_tools()
            assert len(listed.tools) == 22
            wire = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
            assert len(json.dumps({"tools": wire}, separators=(",", ":"))) <= 17_000
    anyio.run(main)
