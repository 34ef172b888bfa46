"""A resumed Claude Code conversation continues its own memoryd session (docs/wire.md "Resume"):
`claude --resume` keeps the client's session id, so the session its first run had in this worktree,
ended when that run exited, is opened again — the model's context names one session, not two. A
session the agent finished with a handoff stays closed, and the resumed run gets a new one.

Real path: the real Claude Code CLI against the scripted model, with the hooks and bridge that
`memoryd init` registered; then hook processes and an SDK client on a real bridge.
"""

from __future__ import annotations

import json
import re

import anyio
from test_hooks import claude_binary, claude_home_and_repo, end, git_repo, start

from harness import Env, call
from scripted_claude import given_text, run_claude

NAMED = re.compile(r"memoryd session (sess-\d+)")


def test_claude_code_resume_names_one_session(served: Env) -> None:
    env = served
    claude = claude_binary()
    home, repo = claude_home_and_repo(env)
    first = run_claude("hello", repo, env.environ(), home, [("text", "Done.")], claude=claude)
    assert first.proc.returncode == 0 and first.turns, first.proc.stderr[-800:]
    client_id = json.loads(first.proc.stdout)["session_id"]
    resumed = run_claude("again", repo, env.environ(), home, [("text", "Done again.")], claude=claude,
                         extra_args=["--resume", client_id])
    assert resumed.proc.returncode == 0 and resumed.turns, resumed.proc.stderr[-800:]
    named = set(NAMED.findall(given_text(resumed.turns[0])))
    assert named == set(NAMED.findall(given_text(first.turns[0]))) and len(named) == 1, named
    [session_id] = named
    reopened = [e for e in env.events() if e["kind"] == "session_reopen"]
    assert [e["session"] for e in reopened] == [session_id]


def test_a_finished_session_stays_closed_and_a_cleared_one_too(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop").resolve()
    first = NAMED.findall(start(env, "cc-r", repo) or "")
    end(env, "cc-r", repo)
    again = NAMED.findall(start(env, "cc-r", repo, source="resume") or "")
    assert again == first  # the client went away; its conversation came back
    env.kill_daemon()  # the reopen is a logged event: a start replays it like any other
    env.start_daemon()
    listed = env.memoryd("sessions", "--json")
    assert listed.returncode == 0 and f'"{first[0]}"' in listed.stdout, listed.stderr

    async def finish(session_id: str) -> None:
        async with env.session(cwd=str(repo), CLAUDE_CODE_SESSION_ID="cc-r") as bridge:
            done = await call(bridge, "memory_session_finish", session_id=session_id,
                              handoff="Billing retries are done; next: the refund path.")
            assert done.get("handoff_capsule"), done
    anyio.run(finish, first[0])
    after_finish = NAMED.findall(start(env, "cc-r", repo, source="resume") or "")
    assert after_finish and after_finish != first  # finished once, so a new session

    end(env, "cc-r", repo, reason="clear")
    after_clear = NAMED.findall(start(env, "cc-r", repo, source="clear") or "")
    assert after_clear and after_clear != after_finish  # /clear starts a new conversation
