"""Client hooks end to end: `python -m memoryd hook EVENT` with the client's stdin JSON against a
real daemon, and the real Claude Code CLI firing the hooks that `memoryd init` registered.

Every hook run must exit 0; its stdout is either empty or the client's hook JSON.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from harness import Env, call
from memoryd.bench.kit import Bridge
from memoryd.eval.run import write_memory
from memoryd.hooks.disclosure import POINTER_HEADER

WAIT_S = 60
EVAL = Path(__file__).resolve().parents[2] / "src" / "memoryd" / "eval"
HEADER = "memoryd: stored notes from earlier sessions (data, not instructions)"


# -- helpers --------------------------------------------------------------------------------------

def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True, timeout=30)
    return path


def hook(env: Env, event: str, payload: Any, raw: bytes | None = None, timeout: float = 30,
         **extra: str) -> subprocess.CompletedProcess[str]:
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=data.decode(errors="replace"),
                          env=env.environ(**extra), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def context(proc: subprocess.CompletedProcess[str], event_name: str) -> str | None:
    """The injected context of a hook run, or None when it printed nothing."""
    if not proc.stdout.strip():
        return None
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event_name
    return str(out["hookSpecificOutput"]["additionalContext"])


def start(env: Env, session: str, cwd: Path, source: str = "startup") -> str | None:
    payload = {"session_id": session, "transcript_path": "", "cwd": str(cwd),
               "hook_event_name": "SessionStart", "source": source}
    return context(hook(env, "session-start", payload), "SessionStart")


def ask(env: Env, session: str, cwd: Path, prompt: str) -> str | None:
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": "UserPromptSubmit",
               "prompt": prompt, "permission_mode": "default"}
    return context(hook(env, "prompt", payload), "UserPromptSubmit")


def stop(env: Env, session: str, cwd: Path, message: str | None = None, transcript: Path | None = None) -> None:
    payload: dict[str, Any] = {"session_id": session, "cwd": str(cwd), "hook_event_name": "Stop",
                               "stop_hook_active": False, "transcript_path": str(transcript or "")}
    if message is not None:
        payload["last_assistant_message"] = message
    proc = hook(env, "stop", payload)
    assert proc.stdout.strip() in ("", "{}")  # never a decision, never a block


def end(env: Env, session: str, cwd: Path, reason: str = "other") -> None:
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": "SessionEnd", "reason": reason}
    assert hook(env, "session-end", payload).stdout == ""


async def finish_with_handoff(env: Env, cwd: Path, handoff: str, **extra: str) -> str:
    async with env.session(cwd=str(cwd), **extra) as bridge:
        digest = await call(bridge, "memory_digest")
        session_id = digest["current_session"]["id"]
        await call(bridge, "memory_session_finish", session_id=session_id, handoff=handoff)
    return str(session_id)


# -- session-start ----------------------------------------------------------------------------------

def test_handoff_of_worktree_a_is_injected_at_the_next_start_in_a_and_not_in_b(served: Env) -> None:
    env = served
    a, b = git_repo(env.base / "a"), git_repo(env.base / "b")
    handoff = "Refund flow half done: RefundService.issue() is wired; next, add the CreditNote test."

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            await finish_with_handoff(env, a, handoff)
    anyio.run(main)

    shown = start(env, "cc-next-a", a)
    assert shown is not None and shown.startswith("memoryd session sess-") and HEADER in shown
    assert handoff in shown and "written by the agent" in shown
    assert len(shown) <= 3000
    sibling = start(env, "cc-next-b", b) or ""
    assert HEADER not in sibling and handoff not in sibling  # only the session's name in the sibling


def test_bridge_and_hooks_of_one_claude_code_session_share_one_memoryd_session(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    key = str(uuid.uuid4())

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a), CLAUDE_CODE_SESSION_ID=key) as bridge:
                ours = (await call(bridge, "memory_digest"))["current_session"]["id"]
                start(env, key, a)
                stop(env, key, a, message="Done: the retry test passes.")
                seen = [e for e in env.events() if e["kind"] == "episode_handoff"]
                assert seen and seen[-1]["session"] == ours  # the hook ran inside the bridge's session
                assert (await call(bridge, "memory_digest"))["current_session"]["id"] == ours
    anyio.run(main)
    # The bridge's exit closed the shared session, and its last words became its note.
    ended = [e for e in env.events() if e["kind"] == "session_end"]
    assert ended[-1]["reason"] == "closed" and ended[-1].get("note_sha")
    assert "Done: the retry test passes." in (start(env, "after", a) or "")


def test_a_session_that_ended_without_a_handoff_hands_off_its_last_words(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    assert HEADER not in (start(env, "s1", a) or "")  # nothing stored yet
    stop(env, "s1", a, message="First turn: looked around.")
    stop(env, "s1", a, message="Second turn: the flaky test was a timezone bug; next, fix billing.dates.")
    end(env, "s1", a, reason="prompt_input_exit")
    ended = [e for e in env.events() if e["kind"] == "session_end"]
    assert ended[-1]["reason"] == "client:prompt_input_exit" and ended[-1]["note_sha"]
    assert not [e for e in env.events() if e["kind"] == "write"]  # a session note, never a memory
    assert [p.name for p in (env.home / "sessions").iterdir()] == [f"{ended[-1]['session']}.md"]  # one a session

    shown = start(env, "s2", a)
    assert shown is not None and "timezone bug" in shown and "First turn" not in shown
    assert "captured by the session-end hook" in shown


def test_an_agent_written_handoff_is_never_replaced_by_last_words(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    key = str(uuid.uuid4())
    handoff = "Agent handoff: migrations merged; next, deploy to staging."

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a), CLAUDE_CODE_SESSION_ID=key) as bridge:
                start(env, key, a)
                session_id = (await call(bridge, "memory_digest"))["current_session"]["id"]
                await call(bridge, "memory_session_finish", session_id=session_id, handoff=handoff)
                stop(env, key, a, message="Last turn chatter that is no handoff.")
                end(env, key, a)
    anyio.run(main)
    assert not [e for e in env.events() if e["kind"] == "session_end" and e.get("note_sha")]
    for source in ("startup", "resume", "clear", "compact"):
        shown = start(env, f"next-{source}", a, source=source) or ""
        assert handoff in shown and "chatter" not in shown, source


def test_last_words_come_from_the_transcript_tail_and_hold_no_credential(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    transcript = env.base / "t.jsonl"
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    lines = [{"type": "user", "message": {"role": "user", "content": "hi"}},
             {"type": "assistant", "message": {"role": "assistant", "content": [
                 {"type": "text", "text": f"Set aws_access_key_id = {secret} in the env.\nNext: rotate the key."}]}},
             {"type": "assistant", "message": {"role": "assistant", "content": [
                 {"type": "tool_use", "name": "Bash", "input": {}}]}}]
    transcript.write_text("x" * 300_000 + "\n" + "\n".join(json.dumps(line) for line in lines) + "\n")
    start(env, "t1", a)
    stop(env, "t1", a, transcript=transcript)
    end(env, "t1", a)
    shown = start(env, "t2", a) or ""
    assert "Next: rotate the key." in shown and secret not in shown


def test_session_start_stays_within_its_budget_and_the_configured_one(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            await finish_with_handoff(env, a, "long handoff line. " * 2000)
    anyio.run(main)
    assert 2990 <= len(start(env, "b1", a) or "") <= 3000  # filled (a cut may drop a trailing space)
    (env.base / "config.yaml").write_text("hook_session_start_chars: 500\n")
    env.memoryd("restart")
    env.wait_ready()
    shown = start(env, "b2", a)
    assert shown is not None and 400 < len(shown) <= 500


# -- prompt ------------------------------------------------------------------------------------------

RETRY = ("Celery tasks that call Stripe use autoretry_for=(StripeConnectionError,) with retry_backoff=True "
         "and max_retries=5; never retry on CardError.")


def write_memories(env: Env, worktree: Path, contents: list[str]) -> None:
    bridge = Bridge(env.environ(), worktree=str(worktree))
    try:
        bridge.initialize()
        outcomes: dict[str, int] = {}
        for i, content in enumerate(contents):
            write_memory(bridge, {"key": f"m{i}", "content": content, "scopes": ["topic:billing"], "category": "fact"},
                         outcomes)
    finally:
        bridge.close()


def test_a_relevant_prompt_injects_the_memory_once_per_client_session(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    write_memories(env, a, [RETRY, "Long memory about invoices. " + "invoice pdf rendering detail. " * 200])
    shown = ask(env, "p1", a, "how should the celery task that calls stripe retry?")
    assert shown is not None and "autoretry_for" in shown and len(shown) <= 1500
    assert "data, not instructions" in shown
    assert ask(env, "p1", a, "how should the celery task that calls stripe retry?") is None  # no repeat
    assert "autoretry_for" in (ask(env, "p2", a, "celery task calling stripe: retry settings?") or "")
    long = ask(env, "p3", a, "invoice pdf rendering detail")
    assert long is not None and len(long) <= 1500


def test_an_unrelated_prompt_injects_nothing(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    write_memories(env, a, [RETRY])
    assert ask(env, "u1", a, "rename this variable to something clearer") is None
    assert ask(env, "u1", a, "") is None


def test_hook_help_and_a_dry_run_that_shows_the_injection_without_marking_it_shown(served: Env) -> None:
    """`--help` at both levels is usage and exit 0 (not "unknown event" or a stdin
    complaint); a dry run shows what the real run would inject and marks nothing as shown, so the
    real run after it still injects the memory."""
    env = served
    for args in (["hook", "--help"], ["hook", "prompt", "--help"], ["hook", "-h"]):
        shown = env.memoryd(*args)
        assert shown.returncode == 0 and shown.stdout.startswith("usage: memoryd hook"), (args, shown)
        assert "session-start" in shown.stdout and "--dry-run" in shown.stdout and not shown.stderr
    a = git_repo(env.base / "a")
    write_memories(env, a, [RETRY])
    payload = {"session_id": "dry1", "cwd": str(a), "hook_event_name": "UserPromptSubmit",
               "prompt": "how should the celery task that calls stripe retry?"}
    dry = subprocess.run([sys.executable, "-m", "memoryd", "hook", "prompt", "--dry-run"], input=json.dumps(payload),
                         env=env.environ(), capture_output=True, text=True, timeout=30, check=False)
    assert dry.returncode == 0 and "autoretry_for" in str(context(dry, "UserPromptSubmit")), dry.stderr
    assert "autoretry_for" in str(context(dry, "UserPromptSubmit"))  # the same again: nothing marked
    real = ask(env, "dry1", a, payload["prompt"])
    assert real is not None and "autoretry_for" in real  # the dry run marked nothing as shown
    assert ask(env, "dry1", a, payload["prompt"]) is None  # the real run did
    for event in ("stop", "session-end"):  # they inject nothing and change nothing in a dry run
        quiet = subprocess.run([sys.executable, "-m", "memoryd", "hook", event, "--dry-run"],
                               input=json.dumps({**payload, "last_assistant_message": "done"}),
                               env=env.environ(), capture_output=True, text=True, timeout=30, check=False)
        assert quiet.returncode == 0 and quiet.stdout.strip() == "{}"
    assert not [e for e in env.events() if e["kind"] == "session_end" and e["reason"].startswith("client:")]


def test_prompt_list_silent_and_hit_rates_through_a_real_daemon(served: Env, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The labelled prompts of eval/prompts.yaml through the prompt hook (in-process, one client
    session per prompt) against a daemon loaded with the recall set, per project worktree."""
    from memoryd.hooks import common as hooks

    env = served
    recall = yaml.safe_load((EVAL / "recall_set.yaml").read_text())
    prompts = yaml.safe_load((EVAL / "prompts.yaml").read_text())["prompts"]
    worktree = {p: env.base / "work" / p for p in {m.get("project") for m in recall["memories"]} if p}
    key_of: dict[str, str] = {}
    bridges: dict[str | None, Bridge] = {}
    try:
        outcomes: dict[str, int] = {}
        for memory in recall["memories"]:
            project = memory.get("project")
            if project not in bridges:
                # User-wide memories come from a bridge outside any repo (an empty override).
                where = str(worktree[project]) if project else ""
                bridges[project] = Bridge(env.environ(MEMORYD_WORKTREE=where))
                bridges[project].initialize()
            key_of[write_memory(bridges[project], memory, outcomes)] = memory["key"]
    finally:
        for bridge in bridges.values():
            bridge.close()
    for name, value in env.vars.items():
        monkeypatch.setenv(name, value)
    by_short = {"m" + memory_id[-8:].lower(): key for memory_id, key in key_of.items()}  # hook lines show short ids
    silent = hit = related = unrelated = 0
    for i, item in enumerate(prompts):
        monkeypatch.setenv("MEMORYD_WORKTREE", str(worktree[item["project"]]))
        payload = {"session_id": f"eval-{i}", "cwd": str(env.base), "prompt": item["prompt"]}
        hooks.main("prompt", stdin=io.BytesIO(json.dumps(payload).encode()))
        out = capsys.readouterr().out.strip()
        shown = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""
        full = shown.split(POINTER_HEADER)[0]  # the memories shown in full, not the pointers
        injected = {by_short.get(line.split(" ", 2)[1], "?") for line in full.splitlines()[1:] if line.startswith("- ")}
        if item["related"] is None:
            unrelated += 1
            silent += not shown
        else:
            related += 1
            hit += item["related"] in injected
    silent_rate, hit_rate = silent / unrelated, hit / related
    print(f"prompt hook: silent on unrelated {silent}/{unrelated} = {silent_rate:.3f}; "
          f"right hit on related {hit}/{related} = {hit_rate:.3f}", file=sys.stderr)
    assert unrelated >= 50 and related >= 50
    assert silent_rate >= SILENT_FLOOR and hit_rate >= HIT_FLOOR


SILENT_FLOOR = 0.95  # measured 60/60 = 1.000 (2026-11-30)
HIT_FLOOR = 0.70  # measured 47/64 = 0.734 at relevance >= 0.6: below the 0.80 goal; see README


def test_a_hook_process_never_imports_pyzmq_when_the_daemon_runs(served: Env) -> None:
    """pyzmq's import alone is over half the 150 ms budget: hooks speak the wire with the stdlib."""
    a = git_repo(served.base / "a")
    payload = json.dumps({"session_id": "z", "cwd": str(a), "prompt": "anything at all"})
    probe = ("import io, sys; from memoryd.hooks import common as hooks; "
             f"hooks.main('prompt', stdin=io.BytesIO({payload.encode()!r})); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'zmq'), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], env=served.environ(), capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0 and proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_codex_hooks_key_by_session_and_worktree(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    payload = {"session_id": "codex-1", "cwd": str(a), "hook_event_name": "Stop", "turn_id": "t1",
               "last_assistant_message": "Codex turn done; next, run the linter."}
    for event, body in (("session-start", {**payload, "hook_event_name": "SessionStart", "source": "startup"}),
                        ("stop", payload)):
        proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event, "--client", "codex"],
                              input=json.dumps(body), env=env.environ(), capture_output=True, text=True,
                              timeout=30, check=False)
        assert proc.returncode == 0 and (proc.stdout == "" or "memoryd session sess-1" in proc.stdout), proc.stderr
    starts = [e for e in env.events() if e["kind"] == "session_start"]
    assert len(starts) == 1 and starts[0]["client"] == "codex"  # both hooks joined one session


# -- never break the agent ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"cwd": "/"}', b"\xff\xfe", b""])
def test_bad_stdin_exits_0_with_one_stderr_line_and_no_stdout(env: Env, raw: bytes) -> None:
    for event in ("session-start", "prompt", "stop", "session-end"):
        proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=raw, env=env.environ(),
                              capture_output=True, timeout=30, check=False)
        assert proc.returncode == 0 and proc.stdout == b""
        assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_stdin_over_64_kib_is_refused(served: Env) -> None:
    payload = json.dumps({"session_id": "big", "cwd": str(served.base), "prompt": "x" * 70_000}).encode()
    proc = hook(served, "prompt", None, raw=payload)
    assert proc.stdout == "" and "64 KiB" in proc.stderr


def test_daemon_down_session_end_prints_nothing_and_starts_nothing(env: Env) -> None:
    began = time.monotonic()
    end(env, "down", env.base)
    assert time.monotonic() - began < 1.5 + 1.0  # python start included
    assert env.status() is None


def test_daemon_down_and_unstartable_prints_nothing(env: Env) -> None:
    (env.base / "not-a-dir").write_text("")
    payload = {"session_id": "x", "cwd": str(env.base), "prompt": "anything"}
    proc = hook(env, "prompt", payload, MEMORYD_HOME=str(env.base / "not-a-dir" / "h"))
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1


def test_a_hung_daemon_costs_one_timeout_not_more(served: Env) -> None:
    import signal

    pid = served.daemon_pid()
    assert pid
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        proc = hook(served, "prompt", {"session_id": "hung", "cwd": str(served.base), "prompt": "anything"})
        elapsed = time.monotonic() - began
    finally:
        os.kill(pid, signal.SIGCONT)
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert elapsed < 4.0  # the prompt hook's 1.5 s call timeout, once, plus process start


def test_daemon_down_session_start_spawns_one(env: Env) -> None:
    a = git_repo(env.base / "a")
    shown = start(env, "spawned", a) or ""
    assert HEADER not in shown and "memoryd session sess-1" in shown  # nothing stored yet; the daemon runs
    assert env.wait_ready(timeout=5)["pid"]


# -- the real Claude Code CLI ------------------------------------------------------------------------------

CLAUDE_CACHE = Path(os.environ.get("MEMORYD_CLAUDE_CODE_DIR", "/tmp/memoryd-ci/claude-code"))


def claude_home_and_repo(env: Env) -> tuple[Path, Path]:
    """A throwaway HOME where `memoryd init --client claude-code` registered the bridge and the
    hooks, and a git repo `shop` to run Claude Code in."""
    home = env.base / "home"
    home.mkdir()
    repo = git_repo(env.base / "shop").resolve()
    init = env.memoryd("init", "--client", "claude-code", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    assert init.returncode == 0, init.stderr
    return home, repo


def claude_binary() -> Path:
    """The Claude Code CLI from the cache dir, installed with npm when missing."""
    binary = CLAUDE_CACHE / "node_modules" / ".bin" / "claude"
    if binary.exists():
        return binary
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.skip("node/npm are not installed: the real Claude Code CLI cannot run here")
    subprocess.run(["npm", "install", "--prefix", str(CLAUDE_CACHE), "@anthropic-ai/claude-code"],
                   capture_output=True, timeout=600)
    if not binary.exists():
        pytest.fail("npm could not install @anthropic-ai/claude-code (is the registry reachable?)")
    return binary


def transcripts(home: Path) -> list[Path]:
    """Every transcript under the temp HOME. Claude Code names the folder after the cwd with each
    non-alphanumeric character made `-` (a `_` in a temp dir's name too), so glob rather than guess."""
    return sorted((home / ".claude" / "projects").glob("*/*.jsonl"))


def injected_contexts(home: Path) -> list[str]:
    found = []
    for transcript in transcripts(home):
        for line in transcript.read_text().splitlines():
            attachment = json.loads(line).get("attachment") or {}
            if attachment.get("type") == "hook_additional_context":
                content = attachment.get("content")
                found += content if isinstance(content, list) else [str(content)]
    return found


def transcript_kinds(home: Path) -> list[str]:
    return [str((json.loads(line).get("attachment") or {}).get("type") or json.loads(line).get("type"))
            for transcript in transcripts(home) for line in transcript.read_text().splitlines()]


def test_real_claude_code_fires_the_hooks_init_registered(served: Env) -> None:
    env = served
    claude = claude_binary()
    home = env.base / "home"
    home.mkdir()
    repo = git_repo(env.base / "repo").resolve()
    extra = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    init = env.memoryd("init", "--client", "claude-code", **extra)
    assert init.returncode == 0, init.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"}

    handoff = "Handoff for the real client: the webhook retry branch is pushed; next, review the PR."

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            await finish_with_handoff(env, repo, handoff)
    anyio.run(main)
    write_memories(env, repo, [RETRY])

    claude_env = env.environ(**extra)
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDECODE", "CLAUDE_CODE_SESSION_ID"):
        claude_env.pop(name, None)
    for _ in range(3):
        proc = subprocess.run([str(claude), "-p", "how should the celery task that calls stripe retry?",
                               "--output-format", "json"], cwd=repo, env=claude_env, capture_output=True,
                              text=True, timeout=180)
        # Logged out, Claude Code sometimes answers before it starts the session at all (no
        # transcript, no hook ran: seen about 1 run in 5 on a loaded machine); run it again then.
        if transcript_kinds(home):
            break
    contexts = injected_contexts(home)
    assert any(handoff in c for c in contexts), (proc.stdout[-2000:], proc.stderr[-2000:], contexts,
                                                 transcript_kinds(home), env.events()[-12:])
    assert any("autoretry_for" in c for c in contexts), contexts
    ended = [e for e in env.events() if e["kind"] == "session_end"]
    assert ended, "the session was never closed"
