"""Bench rows for the client hooks: each `memoryd hook EVENT` process timed from spawn to exit, and
the context they inject over a scripted 20-event session (docs/benchmark.md, "Rows")."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memoryd import names
from memoryd.bench.kit import Bridge, Row, Throwaway, pcts, progress, row
from memoryd.eval.run import write_memory

TARGET_MS = 150.0
PRE_TOOL_TARGET_MS = 100.0       # PreToolUse holds up every matching tool call
SESSION_CONTEXT_TARGET = 4000    # chars memoryd injects over the scripted 20-event session
MEMORY = ("Celery tasks that call Stripe use autoretry_for=(StripeConnectionError,) with retry_backoff=True "
          "and max_retries=5; never retry on CardError.")
PROMPT = "how should the celery task that calls stripe retry?"
FORCE = "Never `git push --force` without asking the user first: CI deploys main on every push."
# The scripted session's store: memories anchored to files, a directory and commands, and a rule
# the prompts match, beside the retry memory above (bench store only).
ANCHORED = [
    "billing/stripe_client.py wraps every Stripe call in a 30 s timeout; keep new calls inside StripeClient.",
    "Everything under src/payments/ is PCI scope: never log card numbers or CVC fields there.",
    "Never edit an applied alembic migration: create a new one with `alembic revision --autogenerate`.",
    "Run `make lint` before any commit: CI rejects unformatted code and reruns take 20 minutes.",
]
DEPLOY = ("Never deploy a new version to production by hand: production deploys go only through the "
          "release pipeline, after the changelog is updated.")  # what the by-meaning pre-tool row finds
SIBLING = "The orders.status column is now an enum: pending, paid, refunded (migration 3f2a)."


def prepare(box: Throwaway) -> Path:
    """A git repo with a finished session (handoff) and the memories above; returns the repo."""
    repo = box.base / "hookrepo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, timeout=30)
    for path in ("billing/stripe_client.py", "src/payments/cards.py", "README.md"):  # what ANCHORED cites
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("# bench\n")
    with Bridge(box.env, worktree=str(repo)) as bridge:
        write_memory(bridge, {"key": "retry", "content": MEMORY, "scopes": ["topic:billing"]}, {})
        write_memory(bridge, {"key": "deploy", "content": DEPLOY, "scopes": ["topic:deploy"]}, {})
        for i, content in enumerate([FORCE, *ANCHORED]):
            write_memory(bridge, {"key": f"anchored-{i}", "content": content, "scopes": ["topic:billing"]}, {})
        session = bridge.call(names.MEMORY_DIGEST)["current_session"]["id"]
        bridge.call(names.MEMORY_SESSION_FINISH, session_id=session,
                    handoff="Retries are wired; next, add the CardError test and open the PR.")
        box.counts["memories"] = int(bridge.call(names.MEMORY_HEALTH)["memories"])
    return repo


def run_hook(box: Throwaway, event: str, payload: dict[str, Any]) -> tuple[float, str]:
    """Seconds from spawn to exit of one hook process, and its stdout."""
    # Bytecode caches as an installed client has them: with PYTHONDONTWRITEBYTECODE each hook recompiles memoryd.
    env = {k: v for k, v in box.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=json.dumps(payload),
                          env=env, capture_output=True, text=True, timeout=30, check=False)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise RuntimeError(f"hook {event} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed, proc.stdout


MEANING = "pre-tool, Bash by meaning"
VERB = {MEANING: "pre-tool"}


def hook_input(sid: str, repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": sid, "cwd": str(repo), "hook_event_name": event, **fields}


def payloads(repo: Path, i: int) -> dict[str, dict[str, Any]]:
    """One client session's hook inputs; each sample is a fresh client session, as in real use."""
    sid = f"bench-{i}"
    return {
        "session-start": hook_input(sid, repo, "SessionStart", source="startup", transcript_path=""),
        "prompt": hook_input(sid, repo, "UserPromptSubmit", prompt=PROMPT),
        "pre-tool": tool_payload(sid, repo, "Bash", {"command": "git push --force origin main"}),
        # no memory is anchored to it: the description and command are searched by meaning
        MEANING: tool_payload(sid, repo, "Bash", {"command": "make ship ENV=production",
                                                  "description": "Deploy the new version to production"}),
        "stop": hook_input(sid, repo, "Stop", stop_hook_active=False,
                           last_assistant_message=f"Turn {i}: the retry test passes; next, open the PR."),
        "session-end": hook_input(sid, repo, "SessionEnd", reason="other"),
    }


def bench_hooks(box: Throwaway, quick: bool) -> list[Row]:
    progress("client hooks (whole process per sample)")
    repo = prepare(box)
    samples: dict[str, list[float]] = {event: [] for event in payloads(repo, -1)}
    answered = {"session-start": 0, "prompt": 0, "pre-tool": 0, MEANING: 0}
    runs = 10 if quick else 40
    for event, payload in payloads(repo, -1).items():
        run_hook(box, VERB.get(event, event), payload)  # warm-up: bytecode caches, the OS page cache
    for i in range(runs):
        for event, payload in payloads(repo, i).items():
            elapsed, out = run_hook(box, VERB.get(event, event), payload)
            samples[event].append(elapsed)
            if event in answered and out.strip():
                answered[event] += 1
    rows = []
    # The loaded memories carry no repo, so every hook's auto-scoped search ranks them all.
    size = f"{runs} runs, {box.counts['memories']:,} memories"
    for event, values in samples.items():
        stats = pcts(values)
        extra = {"answered": f"{answered[event]}/{runs}"} if event in answered else {}
        target = PRE_TOOL_TARGET_MS if event == "pre-tool" else TARGET_MS  # by meaning: the 150 ms
        rows.append(row(f"hook {event} (process end to end)", size, {**stats, **extra},
                        f"<= {target:g} ms p50", stats["p50_ms"] <= target))
    return rows


def tool_payload(sid: str, repo: Path, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return hook_input(sid, repo, "PreToolUse", permission_mode="default", tool_name=tool, tool_input=tool_input,
                      tool_use_id=f"toolu_{tool}")


def scripted_session(sid: str, repo: Path) -> list[tuple[str, dict[str, Any]]]:
    """20 hook events of one client session: 4 prompts, 10 tool calls (reads of files memories
    cite and do not, an edit, commands some memory names and some none does), stops, start, end."""
    def ask(prompt: str) -> tuple[str, dict[str, Any]]:
        return "prompt", hook_input(sid, repo, "UserPromptSubmit", prompt=prompt)

    def tool(name: str, **tool_input: Any) -> tuple[str, dict[str, Any]]:
        return "pre-tool", tool_payload(sid, repo, name, tool_input)

    stop = ("stop", hook_input(sid, repo, "Stop", stop_hook_active=False,
                               last_assistant_message="Done with this step."))
    client = repo / "billing" / "stripe_client.py"
    return [
        ("session-start", hook_input(sid, repo, "SessionStart", source="startup")),
        ask(PROMPT),
        tool("Read", file_path=str(client)), tool("Read", file_path=str(client)),
        tool("Edit", file_path=str(client), old_string="30", new_string="20"),
        tool("Bash", command="pytest tests/billing -q"),
        stop,
        ask("ship it: push the branch"),
        tool("Bash", command="git push --force origin main"),
        stop,
        ask("now look at the card form"),  # a sibling commits a memory before this turn: live news
        tool("Read", file_path=str(repo / "README.md")),
        tool("Read", file_path=str(repo / "src" / "payments" / "cards.py")),
        tool("Bash", command="make test"),
        ask("add a migration for the orders status column"),
        tool("Bash", command="alembic revision --autogenerate -m 'orders status'"),
        tool("Write", file_path=str(repo / "migrations" / "versions" / "3f2b_status.py"), content="..."),
        tool("Read", file_path=str(repo / "setup.cfg")),
        stop,
        ("session-end", hook_input(sid, repo, "SessionEnd", reason="other")),
    ]


def injected_chars(stdout: str) -> int:
    """Chars of context one hook run gave the client (its additionalContext), 0 for none."""
    if stdout.strip() in ("", "{}"):
        return 0
    return len(json.loads(stdout).get("hookSpecificOutput", {}).get("additionalContext", ""))


def bench_session_context(box: Throwaway, quick: bool) -> list[Row]:
    """Everything the hooks inject across one scripted 20-event session, by kind."""
    progress("auto-context over a scripted 20-event session")
    repo = box.base / "hookrepo"
    if not repo.exists():
        prepare(box)
    spent = {"session-start": 0, "prompt": 0, "pre-tool": 0}
    events = scripted_session("bench-context", repo)
    for i, (event, payload) in enumerate(events):
        if i == 10:  # another agent in the same worktree commits a memory mid-session (what live news reports)
            with Bridge(box.env, worktree=str(repo)) as bridge:
                write_memory(bridge, {"key": "sibling", "content": SIBLING, "scopes": ["topic:orders"]}, {})
        _, out = run_hook(box, event, payload)
        if event in spent:
            spent[event] += injected_chars(out)
    total = sum(spent.values())
    detail = {"value": total, "unit": "chars", "start": spent["session-start"], "prompts": spent["prompt"],
              "tools": spent["pre-tool"]}
    return [row("auto-context per session (hook output summed)", f"{len(events)} events", detail,
                f"<= {SESSION_CONTEXT_TARGET} chars", total <= SESSION_CONTEXT_TARGET)]


BENCHES = [bench_hooks, bench_session_context]
