"""Continuity and recall end to end, through the real Claude Code CLI with a scripted model
(tests/scripted_claude.py), the bridge and hooks `memoryd init --client claude-code` registered, and
a real daemon that searches by meaning. Every assertion reads what the model was given — the
requests Claude Code sent — never memoryd's internals.

1. Session 1 reads its memoryd session id from the SessionStart context, writes a memory with
   `memory_write` and finishes with `memory_session_finish(session_id=<that id>, handoff=…)`.
2. Session 2 asks one question and ends without a handoff.
3. Session 3 starts with session 1's handoff and a "since then" line for session 2; its related,
   naturally phrased prompt gets the memory injected.
4. Session 4's unrelated prompt gets nothing injected.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_hooks import claude_binary

from harness import Env, call
from scripted_claude import (
    Request,
    Run,
    given_text,
    hook_context,
    run_claude,
    tool_results,
    tools_share,
)

PROJECT = "orders-service"
RULE = ("Never edit an applied alembic migration: create a new revision with `alembic revision "
        "--autogenerate` instead.")
HANDOFF = ("Became true: the orders.status column is added by revision 3f2a and its migration tests pass. "
           "Open: nothing. Next: run make lint, then commit and deploy.")
SESSION_2_ANSWER = "The orders table has id, customer_id, total_cents and status columns."
RELATED = "I need to change a column in an existing alembic migration, can I just edit the migration file?"
UNRELATED = "rename this variable to snake_case"
PROMPT_HEADER = "stored memories that match this prompt"
TOLD = re.compile(r'memory_session_finish\(session_id="(sess-[0-9]+)"')


@pytest.fixture
def meaning() -> Iterator[Env]:
    """A daemon that searches by meaning (the encoder is off in other tests to save CPU)."""
    env = Env(meaning=True)
    try:
        env.start_daemon()
        yield env
    finally:
        env.cleanup()


def told_session(request: Request) -> str:
    """The memoryd session id the SessionStart context named to the model."""
    match = TOLD.search("\n".join(hook_context(request, "SessionStart")))
    assert match, f"no memoryd session id in the SessionStart context: {hook_context(request, 'SessionStart')}"
    return match.group(1)


def diagnose(run: Run) -> str:
    return (f"exit {run.proc.returncode}; script errors {run.errors}; stdout {run.proc.stdout[-800:]}; "
            f"stderr {run.proc.stderr[-800:]}; agent turns {len(run.turns)}")


def wait_for_vectors(env: Env, timeout: float = 60) -> dict[str, Any]:
    """memory_health until the encoder (a daemon thread) has embedded every live memory, so the
    prompt hook's search can rank by meaning. The bridge runs outside the repo: it adds no session
    to the repo's worktree, so no "since then" line."""
    async def main() -> dict[str, Any]:
        with anyio.fail_after(timeout):
            async with env.session(cwd=str(env.base)) as bridge:
                while True:
                    health = await call(bridge, "memory_health")
                    vectors = int((health.get("search_by_meaning") or {}).get("vectors") or 0)
                    if health["memories"] and vectors >= health["memories"]:
                        return health
                    await anyio.sleep(0.25)
    return anyio.run(main)


def test_handoff_since_then_and_prompt_recall_through_real_claude_code(meaning: Env) -> None:
    env = meaning
    claude = claude_binary()
    home = env.base / "home"
    home.mkdir()
    repo = (env.base / PROJECT)
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, timeout=30)
    repo = repo.resolve()
    init = env.memoryd("init", "--client", "claude-code", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    assert init.returncode == 0, init.stderr

    def session(prompt: str, script: list[Any]) -> Run:
        run = run_claude(prompt, repo, env.environ(), home, script, claude=claude)
        assert run.proc.returncode == 0 and not run.errors and run.turns, diagnose(run)
        return run

    # -- session 1: learn the id, write a memory, finish with a handoff ------------------------------
    told: dict[str, str] = {}

    def write(request: Request, _: list[Request]) -> tuple[Any, ...]:
        told["id"] = told_session(request)
        return ("tool", "mcp__memoryd__memory_write",
                {"content": RULE, "scopes": [f"projects:{PROJECT}", "topic:alembic"], "confidence": "high"})

    def finish(request: Request, _: list[Request]) -> tuple[Any, ...]:
        return ("tool", "mcp__memoryd__memory_session_finish", {"session_id": told["id"], "handoff": HANDOFF})

    first = session("Add a status column to the orders table with an alembic migration.",
                    [write, finish, ("text", "Done: the column is added and the session is finished.")])
    assert len(first.turns) == 3, diagnose(first)
    [(wrote, wrote_error)] = tool_results(first.turns[1])
    assert not wrote_error and '"status":"committed"' in wrote.replace(" ", ""), wrote
    [(finished, finish_error)] = tool_results(first.turns[2])
    assert not finish_error and told["id"] in finished and "finished_at" in finished, finished
    share = tools_share(first.turns[0])
    print(f"memoryd's share of Claude Code's tools array: {share.memoryd_chars} of {share.total_chars} "
          f"JSON chars ({share.share:.1%}), {len(share.memoryd_tools)} tools", file=sys.stderr)

    # -- session 2: one question, no handoff ------------------------------------------------------------
    second = session("What columns does the orders table have?", [("text", SESSION_2_ANSWER)])
    second_id = told_session(second.turns[0])
    assert second_id != told["id"]
    start_2 = "\n".join(hook_context(second.turns[0], "SessionStart"))
    assert HANDOFF in start_2, start_2

    # -- session 3: the handoff, a "since then" line, and the memory on a related prompt --------------
    wait_for_vectors(env)
    third = session(RELATED, [("text", "No: write a new revision instead.")])
    start_3 = "\n".join(hook_context(third.turns[0], "SessionStart"))
    assert told_session(third.turns[0]) not in (told["id"], second_id)
    assert HANDOFF in start_3 and told["id"] in start_3, start_3
    since = start_3[start_3.index(HANDOFF):]  # the later sessions come after the handoff they follow
    assert re.search(r"since then", since, re.IGNORECASE), start_3
    assert second_id in since and SESSION_2_ANSWER in since, start_3
    prompt_3 = "\n".join(hook_context(third.turns[0], "UserPromptSubmit"))
    assert PROMPT_HEADER in prompt_3 and RULE in prompt_3, (prompt_3, search(env, repo))

    # -- session 4: an unrelated prompt injects nothing --------------------------------------------------
    fourth = session(UNRELATED, [("text", "Which variable?")])
    assert hook_context(fourth.turns[0], "UserPromptSubmit") == []
    assert PROMPT_HEADER not in given_text(fourth.turns[0])


def search(env: Env, repo: Path) -> Any:
    """What memory_search says about the related prompt (for a failure message only)."""
    async def main() -> Any:
        with anyio.fail_after(30):
            async with env.session(cwd=str(env.base)) as bridge:
                found = await call(bridge, "memory_search", query=RELATED, auto_scope=False)
                return [{k: r.get(k) for k in ("content", "relevance", "similarity", "score")}
                        for r in found.get("results", [])]
    try:
        return anyio.run(main)
    except Exception as exc:  # noqa: BLE001 - diagnostics must not hide the real failure
        return f"memory_search failed: {exc!r}"


