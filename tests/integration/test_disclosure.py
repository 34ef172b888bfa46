"""The prompt hook's three tiers, end to end: the memory in full, a pointer to it, or nothing.

The pointer test runs the real Claude Code CLI with a scripted model (tests/scripted_claude.py):
the model is given a one-line pointer (short id + first words) for a prompt the gate is unsure
about, calls `memory_show` with that short id, and gets the memory. Short ids are also accepted by
the CLI and by `memory_update`, and an ambiguous one names its candidates.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from test_claude_code_recall import diagnose, meaning, wait_for_vectors  # noqa: F401 - fixture
from test_hooks import claude_binary

from harness import Env, call
from memoryd.hooks.disclosure import POINTER_HEADER, PROMPT_HEADER, prompt_query
from scripted_claude import ALLOWED_TOOLS, Request, hook_context, run_claude, tool_results

EVAL = Path(__file__).resolve().parents[2] / "src" / "memoryd" / "eval"
# A prompt the gate is unsure about (cosine ~0.58 to the memory, a third of its words shared), from
# the eval's tune split: under the full bar, over the pointer bar.
PROMPT = "how do app secrets end up in the pods"
MEMORY_KEY = "infra-secrets"
SHORT = re.compile(r"^- (m[0-9a-z]{8,9})\b", re.MULTILINE)


def infra_memories() -> list[dict[str, Any]]:
    data = yaml.safe_load((EVAL / "recall_set.yaml").read_text())
    return [m for m in data["memories"] if m.get("project") == "infra"]


def write_all(env: Env, repo: Path, memories: list[dict[str, Any]]) -> dict[str, str]:
    async def main() -> dict[str, str]:
        ids = {}
        with anyio.fail_after(120):
            async with env.session(cwd=str(repo)) as bridge:
                for memory in memories:
                    result = await call(bridge, "memory_write", content=memory["content"],
                                        scopes=memory["scopes"], acknowledge_transient=True,
                                        acknowledge_scope_mismatch=True, force=True)
                    ids[memory["key"]] = result["id"]
        return ids
    return anyio.run(main)


@pytest.mark.parametrize("typed", ["deploy to prod", "deploy to prod please", "ok so deploy to prod",
                                   "can you deploy to prod?", "hey, deploy to prod, thanks!", "please deploy to prod"])
def test_filler_is_trimmed_from_the_prompt_before_it_is_searched(typed: str) -> None:
    assert prompt_query(typed) == "deploy to prod"


def test_a_prompt_of_filler_alone_is_searched_as_typed() -> None:
    assert prompt_query("please") == "please"


def test_real_claude_code_gets_a_pointer_and_opens_it_with_memory_show(meaning: Env) -> None:  # noqa: F811
    env = meaning
    claude = claude_binary()
    home = env.base / "home"
    home.mkdir()
    repo = env.base / "infra"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, timeout=30)
    repo = repo.resolve()
    init = env.memoryd("init", "--client", "claude-code", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    assert init.returncode == 0, init.stderr
    memories = infra_memories()
    ids = write_all(env, repo, memories)
    wanted = next(m for m in memories if m["key"] == MEMORY_KEY)
    wait_for_vectors(env)
    opened: dict[str, str] = {}

    def open_pointer(request: Request, _: list[Request]) -> tuple[Any, ...]:
        given = "\n".join(hook_context(request, "UserPromptSubmit"))
        assert POINTER_HEADER in given and PROMPT_HEADER not in given, given
        found = SHORT.findall(given[given.index(POINTER_HEADER):])
        assert found, given
        opened["short"] = found[0]
        return ("tool", "mcp__memoryd__memory_show", {"id": found[0]})

    run = run_claude(PROMPT, repo, env.environ(), home, [open_pointer, ("text", "They come from Secrets Manager.")],
                     claude=claude, allowed_tools=ALLOWED_TOOLS + ",mcp__memoryd__memory_show")
    assert run.proc.returncode == 0 and not run.errors and len(run.turns) == 2, diagnose(run)
    [(shown, error)] = tool_results(run.turns[1])
    assert not error and wanted["content"][:60] in shown, shown
    assert ids[MEMORY_KEY] in shown and len(opened["short"]) <= 10


def test_short_ids_are_listed_and_taken_by_memory_update_memory_show_and_the_cli(daemon: Env) -> None:
    async def main() -> list[dict[str, Any]]:
        async with daemon.session(MEMORYD_WORKTREE="/w/shop") as bridge:
            first = await call(bridge, "memory_write", content="The shop API listens on port 8443 behind nginx.",
                               scopes=["projects:shop"])
            listed = await call(bridge, "memory_list")
            short = listed["memories"][0]["short_id"]
            updated = await call(bridge, "memory_update", id=short,
                                 content="The shop API listens on port 8443 behind the nginx ingress.")
            shown = await call(bridge, "memory_show", id=short.upper())
            return [first, listed, updated, shown]
    first, listed, updated, shown = anyio.run(main)
    short = listed["memories"][0]["short_id"]
    assert re.fullmatch(r"m[0-9a-z]{8}", short) and first["id"].lower().endswith(short[1:])
    assert updated["status"] == "updated" and updated["id"] == first["id"]
    assert shown["id"] == first["id"] and shown["short_id"] == short and "ingress" in shown["content"]
    cli = daemon.memoryd_json("memories", "show", short)
    assert cli["id"] == first["id"]
