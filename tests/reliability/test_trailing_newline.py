"""A trailing newline passes no pattern (Python's `$` matches before a final newline, so every
id, scope and label check is a `fullmatch` or ends in `\\Z`).

Through a real bridge and daemon: each value with a `\\n` appended is refused with -32602 naming
the parameter, and nothing is written; the value without it is accepted.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from harness import Env, call, call_error
from memoryd.daemon.calls.validate import python_pattern
from memoryd.daemon.identity import idents
from memoryd.daemon.memories import args as memory_args
from memoryd.daemon.tool import SCOPE_PATTERN, SESSION_PATTERN, ULID_PATTERN
from memoryd.errors import InvalidParams

INVALID_PARAMS = -32602
WT = {"MEMORYD_WORKTREE": "/w/nl"}  # its project is nl, the scope the writes name
DURABLE = "The release pipeline signs wheels with the team GPG key before upload."


def _param(error: Any) -> str:
    return str((error.data or {}).get("param", ""))


def test_tool_arguments_with_a_trailing_newline_are_refused(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT) as s:
            written = await call(s, "memory_write", content=DURABLE, scopes=["projects:nl"])
            memory_id, session = written["id"], (await call(s, "memory_digest"))["current_session"]["id"]
            episode = await call(s, "episode_write", body="ran the suite", swarm_id="sw")
            before = len(env.events())
            refused = [
                ("memory_write", {"content": DURABLE + " v2", "scopes": ["projects:nl\n"]}, "scopes[0]"),
                ("episode_write", {"body": "x", "swarm_id": "sw\n"}, "swarm_id"),
                ("episode_write", {"body": "x", "scopes": ["projects:nl\n"]}, "scopes[0]"),
                ("memory_show", {"id": memory_id + "\n"}, "id"),
                ("memory_search", {"query": "wheels", "scopes": ["projects:nl\n"]}, "scopes[0]"),
                ("episode_search", {"session_id": session + "\n"}, "session_id"),
                ("episode_search", {"swarm_id": "sw\n"}, "swarm_id"),
                ("episode_search", {"ids": [episode["id"] + "\n"]}, "ids[0]"),
                ("episode_handoff", {"prior_session_id": session + "\n"}, "prior_session_id"),
                ("memory_write_confirm", {"pending_id": "pending-1\n"}, "pending_id"),
                ("memory_verify", {"id": memory_id, "verified_commits": ["abcdef1\n"]}, "verified_commits[0]"),
                ("memory_scope_disable", {"scope": "projects:nl\n"}, "scope"),
                ("memory_session_finish", {"session_id": session + "\n"}, "session_id"),
            ]
            for tool, arguments, param in refused:
                error = await call_error(s, tool, **arguments)
                assert error.code == INVALID_PARAMS, (tool, error)
                assert _param(error) == param, (tool, error)
            assert len(env.events()) == before, "a refused call wrote an event"
            shown = await call(s, "memory_show", id=memory_id)
            assert shown["id"] == memory_id
    env.start_daemon()
    anyio.run(main)


@pytest.mark.parametrize("pattern, good", [
    (SCOPE_PATTERN, "projects:nl"), (ULID_PATTERN, "01JCZ0000000000000000000AB"), (SESSION_PATTERN, "sess-12"),
    (r"^[A-Za-z0-9_-]{1,128}$", "sw"),
])
def test_schema_patterns_end_at_the_end_of_input(pattern: str, good: str) -> None:
    compiled = python_pattern(pattern)
    assert compiled.search(good) and not compiled.search(good + "\n")


def test_id_and_scope_helpers_refuse_a_trailing_newline() -> None:
    assert idents.is_ulid("01JCZ0000000000000000000AB") and not idents.is_ulid("01JCZ0000000000000000000AB\n")
    assert idents.is_session_id("sess-3") and not idents.is_session_id("sess-3\n")
    for check, value in ((memory_args.check_pending_id, "pending-1\n"),
                         (lambda v: memory_args.check_scope_list("scopes", [v]), "projects:nl\n"),
                         (lambda v: memory_args.check_verified(None, [v]), "abcdef1\n")):
        with pytest.raises(InvalidParams):
            check(value)


def test_a_swarm_id_from_the_environment_with_a_trailing_newline_is_refused(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT, MEMORYD_SWARM_ID="sw\n") as s:
            error = await call_error(s, "episode_write", body="fan-in step")
            assert error.code == INVALID_PARAMS and _param(error) == "swarm_id", error
    env.start_daemon()
    anyio.run(main)
    assert not any(e["kind"] == "episode_write" for e in env.events())
