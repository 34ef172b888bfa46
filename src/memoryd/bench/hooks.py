"""Bench rows for the client hooks: each `memoryd hook EVENT` process end to end.

A sample is one whole hook process as a client runs it — interpreter start, stdin JSON, identity
(git), connect and hello, the daemon's answer, stdout — timed from spawn to exit. The store holds
a finished session with a handoff and one memory the prompt matches, in a real git repo, so
session-start and prompt have something to say.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.bench.kit import Bridge, Row, Throwaway, pcts, progress, row
from memoryd.eval.run import write_memory

TARGET_MS = 150.0
MEMORY = ("Celery tasks that call Stripe use autoretry_for=(StripeConnectionError,) with retry_backoff=True "
          "and max_retries=5; never retry on CardError.")
PROMPT = "how should the celery task that calls stripe retry?"


def prepare(box: Throwaway) -> Path:
    """A git repo with a finished session (handoff) and one durable memory; returns the repo."""
    repo = box.base / "hookrepo"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, timeout=30)
    bridge = Bridge(box.env, worktree=str(repo))
    try:
        bridge.initialize()
        write_memory(bridge, {"key": "retry", "content": MEMORY, "scopes": ["topic:billing"]}, {})
        session = bridge.call("memory_digest")["current_session"]["id"]
        bridge.call("memory_session_finish", session_id=session,
                    handoff="Retries are wired; next, add the CardError test and open the PR.")
    finally:
        bridge.close()
    return repo


def run_hook(box: Throwaway, event: str, payload: dict[str, Any]) -> tuple[float, str]:
    """Seconds from spawn to exit of one hook process, and its stdout."""
    # Bytecode caches as an installed client has them: with PYTHONDONTWRITEBYTECODE (set in some
    # CI shells) every hook would recompile memoryd's modules, which no user's machine does.
    env = {k: v for k, v in box.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=json.dumps(payload),
                          env=env, capture_output=True, text=True, timeout=30, check=False)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise RuntimeError(f"hook {event} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed, proc.stdout


def payloads(repo: Path, i: int) -> dict[str, dict[str, Any]]:
    """One client session's hook inputs; each sample is a fresh client session, as in real use."""
    sid = f"bench-{i}"
    return {
        "session-start": {"session_id": sid, "cwd": str(repo), "hook_event_name": "SessionStart",
                          "source": "startup", "transcript_path": ""},
        "prompt": {"session_id": sid, "cwd": str(repo), "hook_event_name": "UserPromptSubmit", "prompt": PROMPT},
        "stop": {"session_id": sid, "cwd": str(repo), "hook_event_name": "Stop", "stop_hook_active": False,
                 "last_assistant_message": f"Turn {i}: the retry test passes; next, open the PR."},
        "session-end": {"session_id": sid, "cwd": str(repo), "hook_event_name": "SessionEnd", "reason": "other"},
    }


def bench_hooks(box: Throwaway, quick: bool) -> list[Row]:
    progress("client hooks (whole process per sample)")
    repo = prepare(box)
    samples: dict[str, list[float]] = {event: [] for event in ("session-start", "prompt", "stop", "session-end")}
    answered = {"session-start": 0, "prompt": 0}
    runs = 10 if quick else 40
    for event, payload in payloads(repo, -1).items():
        run_hook(box, event, payload)  # warm-up: bytecode caches, the OS page cache
    for i in range(runs):
        for event, payload in payloads(repo, i).items():
            elapsed, out = run_hook(box, event, payload)
            samples[event].append(elapsed)
            if event in answered and out.strip():
                answered[event] += 1
    rows = []
    for event, values in samples.items():
        stats = pcts(values)
        extra = {"answered": f"{answered[event]}/{runs}"} if event in answered else {}
        rows.append(row(f"hook {event} (process end to end)", f"{runs} runs", {**stats, **extra},
                        f"<= {TARGET_MS:g} ms p50", stats["p50_ms"] <= TARGET_MS))
    return rows


BENCHES = [bench_hooks]
