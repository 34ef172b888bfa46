"""The daemon's memory is bounded and parked calls cost O(new events).

Real daemon, real bridges: 24 reads of a ~1.9 MB reply leave the daemon's RSS where a
byte-bounded reply cache puts it (the old count-only cache held all 24); a connection may park at
most 16 `wait_for` calls and gets a typed -32002 `too_many_waiting` past that, without logging
the refused call; and with the most calls one connection may park waiting on a journal of
thousands of episodes, an unrelated `episode_write` stays fast, and a parked fan-in still wakes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call, call_error, wait_for_async
from memoryd.daemon.process.reply_cache import REPLY_CACHE_BYTES
from memoryd.daemon.process.waiting import MAX_PARKED_PER_CONN

WT = {"MEMORYD_WORKTREE": "/w/memory"}
BODY_BYTES = 950_000
READS = 24


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_the_reply_cache_is_bounded_in_bytes(daemon: Env) -> None:
    pid = daemon.daemon_pid()
    assert pid is not None
    out: dict[str, Any] = {}

    async def main() -> None:
        async with daemon.session(**WT) as s:
            ids = [(await call(s, "episode_write", body=f"{n}" + "x" * BODY_BYTES))["id"] for n in range(2)]
            first = await call(s, "episode_search", ids=ids)
            out["reply"] = sum(len(e.get("body", "")) for e in first["episodes"])
            out["before"] = rss_bytes(pid)
            for _ in range(READS):
                await call(s, "episode_search", ids=ids)
            out["after"] = rss_bytes(pid)
    anyio.run(main)
    assert out["reply"] > 1_800_000, out  # big enough for the old cache to show
    grown = out["after"] - out["before"]
    # The old cache kept every reply: READS x ~1.9 MB = ~45 MB. The bound is 4 MiB (+ the newest).
    assert grown < REPLY_CACHE_BYTES + out["reply"] + 12 * 1024 * 1024, (grown, out)


def test_parked_calls_are_capped_per_connection_with_a_typed_error(daemon: Env) -> None:
    out: dict[str, Any] = {}

    async def main() -> None:
        async with daemon.session(**WT) as s:
            results: list[Any] = []

            async def park() -> None:
                results.append(await call(s, "episode_search", swarm_id="never", wait_for=1, timeout_s=4))
            async with anyio.create_task_group() as tg:
                for _ in range(MAX_PARKED_PER_CONN):
                    tg.start_soon(park)
                await wait_for_async(lambda: daemon.logged("episode_search") == MAX_PARKED_PER_CONN,
                                     what="every call parking")
                out["refused"] = await call_error(s, "episode_search", swarm_id="never", wait_for=1, timeout_s=1)
                out["plain"] = await call(s, "episode_search", swarm_id="never")  # no wait_for: fine
            out["timed_out"] = [r["timed_out"] for r in results]
    anyio.run(main)
    error = out["refused"]
    assert error.code == -32002 and error.data["kind"] == "too_many_waiting", error
    assert str(MAX_PARKED_PER_CONN) in error.message
    assert out["plain"]["total"] == 0 and out["timed_out"] == [True] * MAX_PARKED_PER_CONN
    searches = [e for e in daemon.events() if e["kind"] == "episode_search"]
    assert len(searches) == MAX_PARKED_PER_CONN + 1, "the refused call was logged"


def test_parked_calls_do_not_slow_writes_over_a_big_journal(daemon: Env) -> None:
    timings: dict[str, list[float]] = {"idle": [], "parked": []}
    out: dict[str, Any] = {}

    async def writes(s: Any, key: str, count: int) -> None:
        for n in range(count):
            start = time.perf_counter()
            await call(s, "episode_write", body=f"{key} write {n}", swarm_id="other")
            timings[key].append(time.perf_counter() - start)

    async def filler(s: Any, body: str) -> None:
        await call(s, "episode_write", body=body)

    async def main() -> None:
        async with daemon.session(**WT) as writer, daemon.session(**WT) as waiter:
            for n in range(3000 // 50):  # a journal of 3,000 episodes, written 50 at a time
                async with anyio.create_task_group() as tg:
                    for m in range(50):
                        tg.start_soon(filler, writer, f"filler {n}-{m}")
            await writes(writer, "idle", 40)

            async def fan_in(n: int) -> None:
                found = await call(waiter, "episode_search", swarm_id=f"fan{n}", wait_for=1, timeout_s=60)
                out.setdefault("woke", []).append(found)
            async with anyio.create_task_group() as tg:
                for n in range(MAX_PARKED_PER_CONN):
                    tg.start_soon(fan_in, n)
                await wait_for_async(lambda: daemon.logged("episode_search") == MAX_PARKED_PER_CONN,
                                     timeout=30, step=0.05, what="every fan-in parking")
                await writes(writer, "parked", 40)
                for n in range(MAX_PARKED_PER_CONN):
                    await call(writer, "episode_write", body=f"result {n}", swarm_id=f"fan{n}")
    anyio.run(main)
    assert len(out["woke"]) == MAX_PARKED_PER_CONN
    assert all(r["total"] == 1 and r["timed_out"] is False for r in out["woke"]), out["woke"]
    idle = sorted(timings["idle"])[len(timings["idle"]) // 2]
    parked = sorted(timings["parked"])[len(timings["parked"]) // 2]
    # Each parked call used to rescan the 3,000-episode journal on every pass.
    assert parked < idle * 3 + 0.010, (idle, parked)
