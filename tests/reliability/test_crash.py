"""Crash safety and single-instance guards (docs/benchmark.md, 'What the tests prove').

SIGKILL the daemon at random moments while several bridges write: bridges auto-spawn a new daemon
and carry on; every acknowledged write survives, no temp file stays, the log chain verifies.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from harness import Env, call, wait_for, wait_for_async

KILLS = 22
WRITERS = 4
WAIT_S = 150


# -- process helpers -------------------------------------------------------------------------------

def proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of `pid` (Z for a zombie), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    # A killed daemon spawned by a bridge stays a zombie until that bridge reaps it: count it dead.
    return proc_state(pid) not in (None, "Z", "X")


def kill9(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} survived SIGKILL"
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.005)


def wait_for_daemon(env: Env, other_than: int | None, timeout_s: float = 30) -> int:
    """The pid of a live daemon on env's store that is not `other_than`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = env.status() or {}
        pid = status.get("pid")
        if isinstance(pid, int) and pid != other_than and alive(pid):
            return pid
        time.sleep(0.01)
    raise AssertionError(f"no new daemon within {timeout_s} s; log:\n{env.daemon_log()}")


def daemon_processes(env: Env) -> list[int]:
    """Live `memoryd serve` processes whose environment names this env's store."""
    found = []
    needle = str(env.base).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"serve" in cmdline and b"memoryd" in cmdline and needle in environ:
            found.append(int(entry.name))
    return found




# -- kill -9 under load ----------------------------------------------------------------------------

def test_sigkill_during_writes_loses_no_acknowledged_episode(env: Env) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    acks: list[tuple[dict[str, Any], str]] = []
    unavailable: list[int] = []
    unexpected: list[str] = []
    kills: list[int] = []
    env.start_daemon()

    async def writer(n: int, stop: anyio.Event) -> None:
        async with env.session(MEMORYD_WORKTREE=f"/w/crash{n}") as s:
            i = 0
            while not stop.is_set():
                body = f"writer {n} episode {i}"
                i += 1
                try:
                    with anyio.fail_after(45):
                        result = await s.call_tool("episode_write", {"body": body})
                except MCPError as exc:
                    if exc.error.code == -32001:  # daemon unavailable after the one retry: allowed
                        unavailable.append(n)
                    else:
                        unexpected.append(f"{exc.error.code} {exc.error.message}")
                    continue
                if result.is_error or not result.structured_content:
                    unexpected.append(repr(result))
                else:
                    acks.append((result.structured_content, body))

    async def killer(stop: anyio.Event) -> None:
        last: int | None = None
        for _ in range(KILLS):
            pid = await anyio.to_thread.run_sync(wait_for_daemon, env, last)
            acked = len(acks)
            await wait_for_async(lambda: len(acks) > acked, timeout=30, step=0.005,  # noqa: B023 - awaited here
                                 what="the bridges making progress on this daemon")
            await anyio.sleep(rng.uniform(0, 0.25))  # the subject: a kill at a random moment of the writes
            await anyio.to_thread.run_sync(kill9, pid)
            kills.append(pid)
            last = pid
        stop.set()

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                for n in range(WRITERS):
                    tg.start_soon(writer, n, stop)
                tg.start_soon(killer, stop)

    anyio.run(main)
    context = f"seed={seed} kills={len(kills)} acks={len(acks)} unavailable={len(unavailable)}"
    assert not unexpected, f"{context}: {unexpected[:5]}"
    assert len(kills) >= 20 and len(acks) > len(kills), context

    # The final restart: kill whatever runs now, start afresh, then inspect.
    current = (env.status() or {}).get("pid")
    if isinstance(current, int):
        kill9(current)
    env.start_daemon()
    leftovers = [str(p) for p in env.home.rglob(".tmp-*")]
    assert leftovers == [], f"{context}: temp files survived recovery: {leftovers}"

    acked_ids = [a["id"] for a, _ in acks]
    assert len(set(acked_ids)) == len(acked_ids), f"{context}: one id acknowledged twice"
    for ack, _ in acks:
        path = env.home / "episodes" / ack["session_id"] / f"{ack['id']}.md"
        assert path.is_file(), f"{context}: acknowledged {ack['id']} has no file"

    async def read_back() -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        with anyio.fail_after(60):
            async with env.session(MEMORYD_WORKTREE="/w/reader") as reader:
                for start in range(0, len(acked_ids), 200):
                    chunk = acked_ids[start:start + 200]
                    result = await call(reader, "episode_search", ids=chunk, max_results=200)
                    found.update({e["id"]: e for e in result["episodes"]})
        return found

    found = anyio.run(read_back)
    for ack, body in acks:
        row = found.get(ack["id"])
        assert row is not None, f"{context}: acknowledged {ack['id']} is not readable"
        assert row["body"] == body and row["provenance"] == "local", f"{context}: {row}"

    events = env.events()
    named = [e["episode_id"] for e in events if e["kind"] == "episode_write"]
    doubled = {i for i in acked_ids if named.count(i) != 1}
    assert not doubled, f"{context}: acknowledged ids logged other than once: {sorted(doubled)[:5]}"
    on_disk = {p.stem for p in (env.home / "episodes").rglob("*.md")}
    orphans = on_disk - set(named)
    assert not orphans, f"{context}: records visible without their event (they would read as unaccounted): {orphans}"
    assert sum(e["kind"] == "daemon_start" for e in events) >= len(kills) + 1
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0, f"{context}: {verify.stdout} {verify.stderr}"


# -- single instance -------------------------------------------------------------------------------

def test_five_serve_processes_started_at_once_leave_exactly_one_daemon(env: Env) -> None:
    procs = []
    for i in range(5):
        out = open(env.base / f"serve{i}.out", "wb")
        procs.append(subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env.environ(),
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        env.procs.append(procs[-1])
    wait_for(lambda: sum(p.poll() is not None for p in procs) >= 4, timeout=30,
             what="the losing `serve` processes exiting")
    running = [p for p in procs if p.poll() is None]
    assert len(running) == 1
    status = env.wait_ready(running[0].pid)
    assert status["pid"] == running[0].pid
    for i, p in enumerate(procs):
        if p is running[0]:
            continue
        output = (env.base / f"serve{i}.out").read_text()
        assert p.returncode == 0, output
        assert "already running" in output
    time.sleep(0.3)  # the subject: proving nothing happens (a late loser would still be exiting now)
    assert daemon_processes(env) == [running[0].pid]
    live = env.memoryd("status", "--json")
    assert live.returncode == 0 and json.loads(live.stdout)["pid"] == running[0].pid
    assert sum(e["kind"] == "daemon_start" for e in env.events()) == 1


def test_eight_bridges_started_at_once_without_a_daemon_spawn_exactly_one(env: Env) -> None:
    assert env.status() is None
    results: list[dict[str, Any]] = []
    daemons: list[list[int]] = []

    async def bridge(n: int, connected: list[int], everyone: anyio.Event, done: anyio.Event) -> None:
        async with env.session(MEMORYD_WORKTREE=f"/w/race{n}") as s:
            results.append(await call(s, "episode_write", body=f"bridge {n} is connected"))
            connected.append(n)
            if len(connected) == 8:
                everyone.set()
            await done.wait()  # stay connected until the daemons have been counted

    async def main() -> None:
        with anyio.fail_after(60):
            connected: list[int] = []
            everyone, done = anyio.Event(), anyio.Event()
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(bridge, n, connected, everyone, done)
                await everyone.wait()
                await anyio.sleep(0.3)  # the subject: proving no second spawn shows itself
                daemons.append(daemon_processes(env))
                done.set()

    anyio.run(main)
    assert len(results) == 8 and all(r["status"] == "committed" for r in results)
    assert len({r["session_id"] for r in results}) == 8
    assert daemons[0] == [env.daemon_pid()], daemons
    assert sum(e["kind"] == "daemon_start" for e in env.events()) == 1
