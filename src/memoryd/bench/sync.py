"""Benchmark row: sync of 1,000 new memories each way between two throwaway daemons through a local
bare git repository, each `memoryd sync` timed end to end. Full bench only: it starts two more daemons."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from memoryd import names
from memoryd.bench.kit import Bridge, Row, Throwaway, load_memories, pcts, progress, row, seconds

COUNT = 1_000
TARGET_S = 10.0


def _sync(box: Throwaway, *args: str) -> tuple[float, dict[str, object]]:
    """Seconds for one `memoryd sync …` and its JSON result."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memoryd", "sync", *args, "--json"], env=box.env,
                          capture_output=True, text=True, timeout=600, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"memoryd sync {' '.join(args)} failed: {done.stderr.strip()}")
    return took, json.loads(done.stdout)


def _while_syncing(box: Throwaway) -> tuple[float, dict[str, object], list[float]]:
    """One `memoryd sync` on `box`, and the latencies of an agent's memory_search calls meanwhile."""
    latencies: list[float] = []
    done = threading.Event()
    with Bridge(box.env, worktree="/bench/sync") as bridge:
        def searching() -> None:
            while not done.is_set():
                latencies.append(seconds(bridge.call, names.MEMORY_SEARCH, query="service port zone"))

        probe = threading.Thread(target=searching)
        probe.start()
        try:
            took, result = _sync(box)
        finally:
            done.set()
            probe.join()
    return took, result, latencies


def bench_sync(box: Throwaway, quick: bool) -> list[Row]:
    if quick:
        return []
    with Throwaway() as a, Throwaway() as b:
        remote = a.base / "remote.git"  # removed with a's store
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        for label, machine in (("a", a), ("b", b)):
            machine.start()
            texts = (f"Machine {label} record {n} notes port {9000 + n} for service s{label}{n} in zone z{n % 17}."
                     for n in range(COUNT))
            load_memories(machine, f"/bench/{label}", texts, ["projects:bench"])
            _sync(machine, "init", str(remote))
        progress(f"sync: two stores of {COUNT} memories each")
        push_s, pushed = _sync(a)
        both_s, crossed, during = _while_syncing(b)
        pull_s, pulled = _sync(a)
        moved = (pushed.get("pushed"), crossed.get("pulled"), crossed.get("pushed"), pulled.get("pulled"))
        ok = moved == (COUNT, COUNT, COUNT, COUNT)
        return [row(f"sync of {COUNT:,} new memories each way", "1k + 1k",
                    {"value": round(push_s + both_s + pull_s, 2), "unit": "s", "push_1k_s": round(push_s, 2),
                     "pull_1k_and_push_1k_s": round(both_s, 2), "pull_1k_s": round(pull_s, 2),
                     "moved": list(moved), "search_during_sync": {**pcts(during), "calls": len(during),
                                                                  "max_ms": round(max(during) * 1000, 1)}},
                    f"<= {TARGET_S:g} s", ok and push_s + both_s + pull_s <= TARGET_S)]
