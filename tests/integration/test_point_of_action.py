"""Point-of-action recall: `memoryd hook pre-tool` before a file tool or a shell command,
run as a client runs it — a whole process with recorded PreToolUse stdin against a real daemon —
and through the real Claude Code CLI with a scripted model (tests/scripted_claude.py), asserting
on what the model was given after each tool call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_claude_code_recall import meaning, wait_for_vectors  # noqa: F401 - fixture
from test_hooks import claude_binary, git_repo, start

from harness import Env, call
from memoryd.bench.kit import Bridge
from memoryd.eval.run import write_memory
from scripted_claude import Request, Run, hook_context, run_claude

TOOL_CHARS = 800
CLIENT_CHARS = 1000  # Claude Code wraps the hook's text; a bound on what one tool call can add
RETRY = ("Stripe calls in billing/stripe_client.py retry with retry_backoff=True and max_retries=5; "
         "never retry on CardError, the card was declined.")
FORCE = "Never `git push --force` without asking the user first: CI deploys main on every push."
PCI = "Everything under src/payments/ is PCI scope: never log card numbers or CVC fields there."
WEBHOOK = "StripeWebhook must verify the Stripe-Signature header before parsing the body."
LEGACY = "The old retry wrapper lives in src/legacy/old_client.py and is kept for the nightly export job."
OTHER_REPO = "In the other service, billing/stripe_client.py pins the Stripe API version to 2024-06-20."


# -- helpers --------------------------------------------------------------------------------------

def store(env: Env, repo: Path, contents: list[str]) -> list[str]:
    """Write `contents` as durable memories from a bridge in `repo` (answering any gate)."""
    bridge = Bridge(env.environ(), worktree=str(repo))
    try:
        bridge.initialize()
        return [write_memory(bridge, {"key": str(i), "content": c, "scopes": ["topic:billing"]}, {})
                for i, c in enumerate(contents)]
    finally:
        bridge.close()


def pre_tool(env: Env, session: str, cwd: Path, tool: str, tool_input: Any, raw: bytes | None = None,
             client: str = "claude-code") -> subprocess.CompletedProcess[str]:
    payload = {"session_id": session, "transcript_path": "", "cwd": str(cwd), "prompt_id": "p1",
               "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_input": tool_input, "tool_use_id": f"toolu_{uuid.uuid4().hex[:12]}"}
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", "pre-tool", "--client", client], input=data,
                          env=env.environ(), capture_output=True, timeout=30, check=False)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    return out


def injected(proc: subprocess.CompletedProcess[str]) -> str | None:
    """The context a pre-tool run gave, None when it printed nothing; never a permission decision."""
    if not proc.stdout.strip():
        return None
    out = json.loads(proc.stdout)
    specific = out["hookSpecificOutput"]
    assert set(out) == {"hookSpecificOutput"} and set(specific) == {"hookEventName", "additionalContext"}
    assert specific["hookEventName"] == "PreToolUse"
    text = str(specific["additionalContext"])
    assert 0 < len(text) <= TOOL_CHARS
    return text


def read(env: Env, session: str, repo: Path, rel: str) -> str | None:
    return injected(pre_tool(env, session, repo, "Read", {"file_path": str(repo / rel)}))


def bash(env: Env, session: str, repo: Path, command: str) -> str | None:
    return injected(pre_tool(env, session, repo, "Bash", {"command": command, "description": "run it"}))


# -- direct runs -----------------------------------------------------------------------------------

def test_file_and_command_anchors_each_inject_once_and_unrelated_calls_stay_silent(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop").resolve()
    (repo / "src" / "billing").mkdir(parents=True)
    (repo / "src" / "billing" / "stripe_client.py").write_text("RETRIES = 5\n")
    retry, force, pci, webhook, legacy = store(env, repo, [RETRY, FORCE, PCI, WEBHOOK, LEGACY])
    other = git_repo(env.base / "ledger").resolve()
    store(env, other, [OTHER_REPO])

    # Before the client session's start hook there is no session to speak for: silent, none started.
    assert read(env, "cc-a", repo, "src/billing/stripe_client.py") is None
    listed = start(env, "cc-a", repo) or ""
    assert RETRY[:60] in listed  # the start context's digest lists it, read long before the action:
    # A Read of the file a memory cites (relative in the memory, absolute in the tool input): once.
    first = read(env, "cc-a", repo, "src/billing/stripe_client.py")
    assert first is not None and retry in first and RETRY in first and "cites billing/stripe_client.py" in first
    assert OTHER_REPO not in first  # another repo's memory citing the same path is not this one's
    assert read(env, "cc-a", repo, "src/billing/stripe_client.py") is None
    # Edit of the same file later in the session: already shown, so silent.
    assert injected(pre_tool(env, "cc-a", repo, "Edit", {"file_path": str(repo / "src/billing/stripe_client.py"),
                                                          "old_string": "5", "new_string": "6"})) is None
    # Commands match by token sequence: the flag matters.
    assert bash(env, "cc-a", repo, "git push origin main") is None
    pushed = bash(env, "cc-a", repo, "git fetch && git push --force origin main")
    assert pushed is not None and force in pushed and "names `git push --force`" in pushed
    assert bash(env, "cc-a", repo, "git push --force origin main") is None  # once per session
    # Unrelated calls: silent.
    assert read(env, "cc-a", repo, "README.md") is None
    assert bash(env, "cc-a", repo, "ls -la && make test") is None
    assert injected(pre_tool(env, "cc-a", repo, "mcp__memoryd__memory_search", {"query": "stripe"})) is None
    # Its directory, and a class the path names by convention.
    in_dir = read(env, "cc-a", repo, "src/payments/cards.py")
    assert in_dir is not None and pci in in_dir and "cites directory" in in_dir
    named = read(env, "cc-a", repo, "src/billing/stripe_webhook.py")
    assert named is not None and webhook in named and "names stripe_webhook" in named
    # A cited path that is gone from the worktree is said to have moved.
    gone = read(env, "cc-a", repo, "src/legacy/old_client.py")
    assert gone is not None and legacy in gone and "moved" in gone

    # Codex: a shell read of the file and an apply_patch of it, in sessions of their own.
    for key in ("cx-1", "cx-2"):
        payload = {"session_id": key, "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
        opened = subprocess.run([sys.executable, "-m", "memoryd", "hook", "session-start", "--client", "codex"],
                                input=json.dumps(payload), env=env.environ(), capture_output=True, text=True,
                                timeout=30, check=False)
        assert opened.returncode == 0 and "memoryd session" in opened.stdout, opened.stderr
    shell = injected(pre_tool(env, "cx-1", repo, "Bash", {"command": "sed -n 1,80p src/billing/stripe_client.py"},
                              client="codex"))
    assert shell is not None and retry in shell
    patch = ("*** Begin Patch\n*** Update File: src/billing/stripe_client.py\n@@\n-RETRIES = 5\n+RETRIES = 6\n"
             "*** End Patch")
    assert injected(pre_tool(env, "cx-2", repo, "apply_patch", {"command": patch}, client="codex")) is not None


def test_a_shown_prompt_hit_is_not_shown_again_before_a_tool_for_20_tool_calls(served: Env) -> None:
    """What the prompt hook injected counts for the pre-tool hook's window (TOOL_WINDOW)."""
    env = served
    repo = git_repo(env.base / "shop").resolve()
    [force] = store(env, repo, [FORCE])
    start(env, "cc-b", repo)
    dry = subprocess.run([sys.executable, "-m", "memoryd", "hook", "pre-tool", "--dry-run"], env=env.environ(),
                         input=json.dumps({"session_id": "cc-b", "cwd": str(repo), "tool_name": "Bash",
                                           "tool_input": {"command": "git push --force"}}),
                         capture_output=True, text=True, timeout=30, check=False)
    assert dry.returncode == 0 and force in dry.stdout  # a dry run shows and marks nothing
    prompt = {"session_id": "cc-b", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
              "prompt": "can I git push --force to main without asking the user first?"}
    shown = subprocess.run([sys.executable, "-m", "memoryd", "hook", "prompt"], input=json.dumps(prompt),
                           env=env.environ(), capture_output=True, text=True, timeout=30, check=False)
    assert shown.returncode == 0 and "m" + force[-8:].lower() in shown.stdout, shown.stdout  # its short id
    assert bash(env, "cc-b", repo, "git push --force origin main") is None
    # Not repeated within the session's last 20 tool calls (that push was one); after them the
    # rule comes back where it applies, then is quiet for another 20.
    for n in range(18):
        assert read(env, "cc-b", repo, f"notes/{n}.md") is None
    assert bash(env, "cc-b", repo, "git push --force origin main") is None  # the 20th since the prompt
    again = bash(env, "cc-b", repo, "git push --force origin main")
    assert again is not None and force in again
    assert bash(env, "cc-b", repo, "git push --force origin main") is None


@pytest.mark.parametrize("raw", [
    b"", b"not json", b"[1, 2]", b'{"tool_name": "Read"}',                       # no session_id
    b'{"session_id": "s", "tool_name": "Read", "tool_input": "x"}',               # tool_input not an object
    b'{"session_id": "s", "tool_name": "Bash", "tool_input": {"command": 42}}',
    json.dumps({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "x" * 70_000}}).encode(),
])
def test_bad_or_huge_stdin_prints_nothing_and_exits_0(served: Env, raw: bytes) -> None:
    proc = pre_tool(served, "unused", served.base, "Read", {}, raw=raw)
    assert proc.stdout == ""


def test_a_huge_command_under_the_stdin_cap_is_looked_up_quietly(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop").resolve()
    store(env, repo, [FORCE])
    start(env, "cc-c", repo)
    noise = " ".join(f"arg{i}" for i in range(9000))  # ~60 KiB of tokens: cut, not choked on
    assert bash(env, "cc-c", repo, f"echo {noise}") is None
    bash(env, "cc-c", repo, "echo 'unclosed quote && make")  # shlex refuses it: split on whitespace
    big_patch = "*** Begin Patch\n" + "\n".join(f"*** Add File: gen/f{i}.py\n+x = {i}" for i in range(2000))
    assert injected(pre_tool(env, "cc-c", repo, "apply_patch", {"command": big_patch[:60_000]}, client="codex")) is None


def test_with_the_daemon_down_it_prints_nothing_and_starts_none(env: Env) -> None:
    repo = git_repo(env.base / "shop").resolve()
    proc = pre_tool(env, "cc-d", repo, "Read", {"file_path": str(repo / "src/billing/stripe_client.py")})
    assert proc.stdout == "" and "memoryd hook:" in proc.stderr
    assert env.status() is None  # a tool call never waits on a daemon's start


def test_the_pre_tool_process_stays_light(served: Env) -> None:
    """No pyzmq and no daemon module in the hook process: it holds up every matching tool call."""
    repo = git_repo(served.base / "shop").resolve()
    start(served, "cc-e", repo)
    payload = json.dumps({"session_id": "cc-e", "cwd": str(repo), "tool_name": "Read",
                          "tool_input": {"file_path": str(repo / "a.py")}})
    probe = ("import io, sys; from memoryd.hooks import common; "
             f"common.main('pre-tool', stdin=io.BytesIO({payload.encode()!r})); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'zmq' or m.startswith('memoryd.daemon')),"
             " file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], env=served.environ(), capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0 and proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


# -- through the real Claude Code ---------------------------------------------------------------------

def new_context(turns: list[Request], index: int, tool: str) -> list[str]:
    """The PreToolUse contexts that arrived with turn `index` (each request repeats the earlier ones)."""
    before = hook_context(turns[index - 1], f"PreToolUse:{tool}") if index else []
    now = hook_context(turns[index], f"PreToolUse:{tool}")
    assert now[:len(before)] == before
    return now[len(before):]


def test_point_of_action_recall_through_real_claude_code(served: Env) -> None:
    env = served
    claude = claude_binary()
    home = env.base / "home"
    home.mkdir()
    repo = git_repo(env.base / "shop").resolve()
    (repo / "src" / "billing").mkdir(parents=True)
    (repo / "src" / "billing" / "stripe_client.py").write_text("RETRIES = 5\n")
    (repo / "README.md").write_text("# shop\n")
    init = env.memoryd("init", "--client", "claude-code", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    assert init.returncode == 0, init.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Read|Edit|Write|MultiEdit|Bash"
    store(env, repo, [RETRY, FORCE])

    target = str(repo / "src" / "billing" / "stripe_client.py")
    script: list[Any] = [("tool", "Read", {"file_path": target}),
                         ("tool", "Read", {"file_path": target}),
                         ("tool", "Bash", {"command": "git push --force origin main", "description": "push"}),
                         ("tool", "Read", {"file_path": str(repo / "README.md")}),
                         ("text", "Done.")]
    run: Run = run_claude("Look at the Stripe client, push, then read the README.", repo, env.environ(), home,
                          script, claude=claude, allowed_tools="Read,Edit,Bash")
    assert run.proc.returncode == 0 and not run.errors and len(run.turns) == 5, (run.proc.stderr[-800:], run.errors)
    turns = run.turns

    [first] = new_context(turns, 1, "Read")  # what the model was given with the first Read's result
    assert RETRY in first and "cites billing/stripe_client.py" in first and len(first) <= CLIENT_CHARS
    assert new_context(turns, 2, "Read") == []  # the second Read of the same file: nothing again
    [pushed] = new_context(turns, 3, "Bash")
    assert FORCE in pushed and len(pushed) <= CLIENT_CHARS
    assert new_context(turns, 4, "Read") == []  # README: no memory is anchored to it
    total = sum(len(c) for tool in ("Read", "Bash") for c in hook_context(turns[4], f"PreToolUse:{tool}"))
    print(f"point-of-action context given to the model in this session: {total} chars", file=sys.stderr)
    assert total <= 2 * TOOL_CHARS


def test_a_memory_the_same_session_just_wrote_is_not_injected_before_its_next_tool(served: Env) -> None:
    """The agent of client session cc-w writes a memory citing a file, then reads that file: its own
    memory is not put in front of it; another session reading the file gets it."""
    env = served
    repo = git_repo(env.base / "shop").resolve()
    (repo / "src" / "billing").mkdir(parents=True)
    (repo / "src" / "billing" / "stripe_client.py").write_text("RETRIES = 5\n")
    start(env, "cc-w", repo)

    async def write() -> None:
        async with env.session(cwd=str(repo), CLAUDE_CODE_SESSION_ID="cc-w") as bridge:
            result = await call(bridge, "memory_write", content=RETRY, scopes=["topic:billing"])
            assert result["status"] == "committed", result
    anyio.run(write)
    assert read(env, "cc-w", repo, "src/billing/stripe_client.py") is None  # its writer knows it
    start(env, "cc-other", repo)
    other = read(env, "cc-other", repo, "src/billing/stripe_client.py")
    assert other is not None and RETRY in other


DEPLOY = ("Never deploy a new version to production by hand: production deploys go only through the "
          "release pipeline, after the changelog is updated.")


def test_a_shell_call_no_memory_names_is_searched_by_its_description(meaning: Env) -> None:  # noqa: F811
    """Anchors are literal: nothing in `make ship ENV=production` names the deploy memory. The
    call's description says what it is for, and its meaning reaches the memory: one line (full or a
    pointer), once per session; an everyday call gets nothing."""
    env = meaning
    repo = git_repo(env.base / "shop").resolve()
    [deploy] = store(env, repo, [DEPLOY])
    wait_for_vectors(env)
    start(env, "cc-m", repo)
    call_input = {"command": "make ship ENV=production", "description": "Deploy the new version to production"}
    shown = injected(pre_tool(env, "cc-m", repo, "Bash", call_input))
    assert shown is not None and deploy[-8:].lower() in shown, shown  # its short id
    assert len(shown.splitlines()) == 2  # a header and one line
    assert injected(pre_tool(env, "cc-m", repo, "Bash", call_input)) is None  # once per session
    everyday = {"command": "ls -la src", "description": "List the source folder"}
    assert injected(pre_tool(env, "cc-m", repo, "Bash", everyday)) is None
