"""The official `mcp` SDK client is the conformance judge: handshake, list, call, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp import Client

from harness import Env, call, call_error
from memoryd.client.connection import Connection
from memoryd.daemon import catalogue
from memoryd.errors import MemorydError


@pytest.mark.parametrize("profile", ["core", "full"])
def test_sdk_client_session_handshakes_and_lists_the_profiles_tools(env: Env, profile: str) -> None:
    """`core` (the default) lists the tools an agent calls on its own, `full` all 22 (docs/tools.md)."""
    async def main() -> None:
        async with env.session(**({"MEMORYD_TOOLS": "full"} if profile == "full" else {})) as session:
            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            assert names == ([n for n in catalogue.TOOLS if n in catalogue.CORE] if profile == "core"
                             else list(catalogue.TOOLS))
            assert {"episode_write", "episode_handoff", "episode_promote", "memory_session_finish"} <= set(names)
            for tool in listed.tools:
                assert tool.description and tool.input_schema["type"] == "object"
                assert tool.annotations is not None and tool.annotations.open_world_hint is False
    anyio.run(main)


def test_a_tool_the_core_profile_does_not_list_still_answers_a_call(env: Env) -> None:
    """A profile trims what an agent pays for in context; it is no permission. Hints, hook context
    and the docs name tools that `core` leaves out, and a client may call any tool by name."""
    async def main() -> None:
        async with env.session() as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert "memory_list" not in names and "memory_scope_disable" not in names
            listed = await call(session, "memory_list")
            assert listed["total"] == 0
            hidden = await call(session, "memory_scope_disable", scope="projects:x")
            assert hidden["disabled_scopes"] == ["projects:x"]
            err = await call_error(session, "no_such_tool")
            assert err.code == -32602
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


def test_every_declared_tool_is_served_and_refuses_an_argument_it_does_not_declare(env: Env) -> None:
    """Each tool of the catalogue reaches its handler's validation through a real bridge: an
    argument outside its declared schema is a -32602 naming that argument, and nothing is written."""
    async def main() -> None:
        async with env.session(MEMORYD_TOOLS="full") as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert list(listed) == list(catalogue.TOOLS)
            for name, tool in catalogue.TOOLS.items():
                assert listed[name].input_schema == tool.wire()["inputSchema"], name
                err = await call_error(session, name, not_a_parameter=1)
                assert err.code == -32602, (name, err)
                assert err.data["param"] in {"not_a_parameter", *tool.required}, (name, err.data)
            health = await call(session, "memory_health")
            assert health["memories"] == 0
    anyio.run(main)


def test_tools_list_fits_the_17000_character_budget(env: Env) -> None:
    """Every agent pays for tools/list in context on every session (the spec's budget, for all 22
    with their output schemas; what Claude Code sends is tests/integration/test_tool_list_size.py)."""
    async def main() -> None:
        async with env.session(MEMORYD_TOOLS="full") as session:
            listed = await session.list_tools()
            assert len(listed.tools) == 22
            wire = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
            assert len(json.dumps({"tools": wire}, separators=(",", ":"))) <= 17_000
    anyio.run(main)


@pytest.mark.parametrize("how", ["--tools", "config"])
def test_full_is_chosen_by_the_bridge_argument_or_the_config_key(env: Env, how: str) -> None:
    if how == "config":
        with (env.base / "config.yaml").open("a") as config:
            config.write("tools: full\n")
    params = env.bridge_params()
    if how == "--tools":
        params.args = [*params.args, "--tools", "full"]

    async def main() -> None:
        async with Client(params) as client:
            assert len((await client.list_tools()).tools) == 22
    anyio.run(main)


def test_a_bridge_asked_for_an_unknown_profile_refuses_to_start_naming_the_choices(env: Env) -> None:
    for extra, env_vars in ((["--tools", "most"], {}), ([], {"MEMORYD_TOOLS": "all"})):
        done = subprocess.run([sys.executable, "-m", "memoryd", "mcp", *extra], env=env.environ(**env_vars),
                              input="", capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 2 and done.stdout == ""
        assert "must be one of core, full" in done.stderr
        assert ("--tools" if extra else "MEMORYD_TOOLS") in done.stderr


def test_the_daemons_tools_op_lists_a_profile_and_refuses_an_unknown_one_by_name(daemon: Env) -> None:
    """What the bridge asks the daemon: `tools {profile}`; absent, the config's `tools` (core)."""
    conn = Connection({"worktree": "/w/profiles"}, endpoint=(daemon.status() or {})["endpoint"], autospawn=False)
    try:
        conn.connect()
        listed = {profile: [t["name"] for t in conn.call("tools", {"profile": profile})["tools"]]
                  for profile in ("core", "full")}
        assert listed == {"core": [n for n in catalogue.TOOLS if n in catalogue.CORE], "full": list(catalogue.TOOLS)}
        assert [t["name"] for t in conn.call("tools", {})["tools"]] == listed["core"]
        with pytest.raises(MemorydError) as refused:
            conn.call("tools", {"profile": "everything"})
        assert refused.value.code == -32602 and refused.value.data["param"] == "profile"
        assert "core, full" in refused.value.message
    finally:
        conn.close()
