"""Receipts: every automatic injection is recorded (session, hook, memories, tier, characters), and
a user sees them: `memoryd sessions show`, `memoryd memories show` (how often a memory was
injected, in how many sessions, how often its pointer was opened) and `memoryd stats`.

Real hook processes with Claude Code's stdin, a real bridge joining the same client session (as
under Claude Code), and a real daemon; the session's budget of automatic context turns full texts
into pointers once it is spent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from test_hooks import WAIT_S, context, git_repo, hook

from harness import Env, call
from memoryd.hooks.disclosure import POINTER_HEADER, PROMPT_HEADER

RULE = "Never run the billing migrations by hand: the deploy pipeline applies them after the canary."
PROMPT = "can I run the billing migrations by hand before the deploy?"
TOLD = re.compile(r'session_id="(sess-[0-9]+)"')


def start(env: Env, key: str, repo: Path) -> str:
    return context(hook(env, "session-start", {"session_id": key, "transcript_path": "", "cwd": str(repo),
                                                "hook_event_name": "SessionStart", "source": "startup"}),
                   "SessionStart") or ""


def ask(env: Env, key: str, repo: Path, prompt: str = PROMPT) -> str:
    return context(hook(env, "prompt", {"session_id": key, "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
                                        "prompt": prompt}), "UserPromptSubmit") or ""


def bridge(env: Env, key: str, repo: Path, *steps: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(repo), CLAUDE_CODE_SESSION_ID=key) as session:
                return [await call(session, name, **args) for name, args in steps]
    return anyio.run(main)


def test_each_injection_is_listed_per_session_and_counted_per_memory(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "billing")
    [written] = bridge(env, "writer", repo, ("memory_write", {"content": RULE, "scopes": ["projects:billing"]}))
    memory_id = written["id"]
    started = start(env, "cc-1", repo)
    session_id = TOLD.search(started).group(1)  # type: ignore[union-attr]
    shown = ask(env, "cc-1", repo)
    assert PROMPT_HEADER in shown and "m" + memory_id[-8:].lower() in shown
    assert ask(env, "cc-1", repo, "rename this variable") == ""  # nothing injected: no receipt

    listed = env.memoryd_json("sessions", "show", session_id)
    hooks = [(r["hook"], [(i["id"], i["tier"]) for i in r["items"]]) for r in listed["injections"]]
    assert hooks == [("session-start", [(memory_id, "listed")]), ("prompt", [(memory_id, "full")])], listed
    assert listed["chars"] == sum(r["chars"] for r in listed["injections"]) >= len(RULE)
    text = env.memoryd("sessions", "show", session_id).stdout
    assert "prompt" in text and f"{memory_id} (full)" in text

    delivery = env.memoryd_json("memories", "show", memory_id)["delivery"]
    assert delivery == {"injected": 2, "sessions": 1, "pointed": 0, "pointer_opened": 0}
    history = env.memoryd_json("memories", "show", memory_id)["history"]
    assert not [e for e in history if e["kind"] == "search"]  # the hooks' candidate searches stay out

    stats = env.memoryd_json("stats")
    assert stats["sessions"] == 1 and stats["injections"] == 2 and stats["most_injected"][0]["id"] == memory_id


def test_past_the_session_budget_memories_come_as_pointers_and_an_opened_one_is_counted(env: Env) -> None:
    (env.base / "config.yaml").write_text("hook_session_chars: 700\n")  # start ~440: 260 left, a pointer's worth
    env.start_daemon()
    repo = git_repo(env.base / "billing")
    [written] = bridge(env, "writer", repo, ("memory_write", {"content": RULE, "scopes": ["projects:billing"]}))
    memory_id, short = written["id"], "m" + written["id"][-8:].lower()
    started = start(env, "cc-2", repo)  # leaves less than a full text needs (300), more than a pointer
    shown = ask(env, "cc-2", repo)
    spent = env.memoryd_json("sessions", "show", TOLD.search(started).group(1))  # type: ignore[union-attr]
    assert POINTER_HEADER in shown and PROMPT_HEADER not in shown and short in shown, (shown, spent)
    [opened] = bridge(env, "cc-2", repo, ("memory_show", {"id": short}))  # the agent opens the pointer
    assert opened["id"] == memory_id
    delivery = env.memoryd_json("memories", "show", memory_id)["delivery"]
    assert delivery["pointed"] == 1 and delivery["pointer_opened"] == 1
    assert env.memoryd_json("stats")["pointer_open_rate"] > 0


def test_a_dry_run_with_a_made_up_session_id_opens_no_session_and_records_nothing(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "billing")
    [written] = bridge(env, "writer", repo, ("memory_write", {"content": RULE, "scopes": ["projects:billing"]}))
    before = env.events()
    payload = {"session_id": "never-seen-before", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
               "prompt": PROMPT}
    dry = subprocess.run([sys.executable, "-m", "memoryd", "hook", "prompt", "--dry-run"], input=json.dumps(payload),
                         env=env.environ(), capture_output=True, text=True, timeout=30, check=False)
    assert dry.returncode == 0 and "m" + written["id"][-8:].lower() in dry.stdout, dry.stdout + dry.stderr
    assert env.events() == before  # no session_start, no search, no receipt
    listed = env.memoryd_json("sessions", "--all")["sessions"]
    assert not [s for s in listed if s.get("client_session") == "never-seen-before"]
