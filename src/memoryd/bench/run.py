"""`memoryd bench`: runs every row (docs/benchmark.md) and prints one table (or `--json`): each row a
metric, the store size, p50/p99 or a rate, the target, and whether it was met. Progress goes to stderr."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from typing import Any

from memoryd import names
from memoryd.bench import hooks as bench_hooks
from memoryd.bench import kit
from memoryd.bench import memory as bench_memory
from memoryd.bench import peer as bench_peer
from memoryd.bench.kit import Bridge, Row, Throwaway, WireLoader, pcts, progress, row


def bench_cold_start(box: Throwaway, runs: int) -> list[Row]:
    samples, rss = [], 0.0
    for _ in range(runs):
        bridge = Bridge(box.env)
        samples.append(bridge.initialize())
        bridge.request("tools/list", {})
        rss = max(rss, kit.rss_mb(bridge.proc.pid))
        bridge.close()
    stats = pcts(samples)
    return [row("bridge spawn -> initialize", "-", stats, "<= 100 ms", stats["p50_ms"] <= 100),
            row("bridge RSS", "-", {"value": round(rss, 1), "unit": "MB"}, "<= 30 MB", rss <= 30)]


def bench_episode_write(box: Throwaway, n: int) -> list[Row]:
    samples, _ = kit.time_calls(box, names.EPISODE_WRITE, lambda i: {"body": f"iteration {i}: tried a thing",
                                                                     "takeaway": f"step {i}"}, n, worktree="/bench/w0")
    stats = pcts(samples)
    return [row("episode_write (durable)", f"{n} writes", stats, "<= 1.5 ms", stats["p50_ms"] <= 1.5)]


def load_sessions(box: Throwaway, sessions: int, episodes_each: int) -> None:
    """Add sessions until the store holds `sessions` over 100 worktrees, each writing `episodes_each`
    episodes, then bye. Names are new each call: the daemon's reply cache would answer a reused one."""
    loader = WireLoader(box.endpoint())
    tag = time.monotonic_ns()
    first = box.counts.get("sessions", 0)
    for s in range(first, sessions):
        conn = f"load-{tag}-{s}"
        loader.session(conn, f"/bench/w{s % 100}")
        for e in range(episodes_each):
            loader.call(conn, names.EPISODE_WRITE, body=f"session {s} step {e}", takeaway=f"s{s} e{e}")
        loader.send(conn, "bye", {})
    loader.drain()
    box.counts["sessions"] = max(first, sessions)


def bench_handoff(box: Throwaway, sessions: int, runs: int) -> list[Row]:
    load_sessions(box, sessions, episodes_each=8)
    samples, _ = kit.time_calls(box, names.EPISODE_HANDOFF, lambda _: {}, runs, worktree="/bench/w7")
    stats = pcts(samples)
    return [row(names.EPISODE_HANDOFF, f"{sessions} sessions", stats, "<= 2 ms", stats["p50_ms"] <= 2)]


def bench_concurrent_writes(box: Throwaway, agents: int, per_agent: int) -> list[Row]:
    bridges = [Bridge(box.env, worktree=f"/bench/agent{i}") for i in range(agents)]
    ids, samples, errors, elapsed = kit.write_concurrently(bridges, per_agent)
    for error in errors:
        progress(f"an agent stopped: {error}")
    found = bridges[0].call(names.EPISODE_SEARCH, ids=ids[:200], include_bodies=False)["total"]
    for bridge in bridges:
        bridge.close()
    lost = len(ids) - len(set(ids)) + (min(200, len(ids)) - found)
    lost += sum(1 for i in ids if not list((box.base / "h" / "episodes").glob(f"*/{i}.md")))
    rate = len(ids) / elapsed
    floor = CONCURRENT_TARGETS[agents]
    return [row(f"{agents} agents, durable writes", f"{len(ids)} writes",
                {"value": round(rate), "unit": "writes/s", **pcts(samples), "lost": lost},
                f">= {floor:,}/s, 0 lost" + ("" if agents <= 8 else ", p99 <= 50 ms"),
                rate >= floor and (agents <= 8 or pcts(samples)["p99_ms"] <= 50) and lost == 0)]


# Durable writes per second, all agents together: 8 side by side with a peer, 32 for group commit.
CONCURRENT_TARGETS = {8: 1_000, 32: 5_000}


def compile_bytecode() -> None:
    """memoryd's bytecode, written as an installed package has it (docs/benchmark.md, "Bytecode as installed")."""
    import compileall

    import memoryd

    compileall.compile_dir(os.path.dirname(memoryd.__file__), quiet=1)


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    compile_bytecode()
    with Throwaway() as box:
        box.start()
        progress("bridge cold start")
        rows += bench_cold_start(box, 5 if quick else 20)
        progress(names.EPISODE_WRITE)
        rows += bench_episode_write(box, 200 if quick else 2000)
        progress("concurrent agents")
        eight = bench_concurrent_writes(box, 8, 50 if quick else 250)
        rows += eight + bench_peer.side_by_side(box, eight[0], quick)
        rows += bench_concurrent_writes(box, 32, 10 if quick else 50)
        for sessions in ([1000] if quick else [1000, 10_000]):
            progress(f"episode_handoff with {sessions} sessions")
            rows += bench_handoff(box, sessions, 200)
        for bench in [*bench_memory.BENCHES, *bench_hooks.BENCHES]:
            rows += bench(box, quick)
    return rows


def render(rows: list[Row]) -> str:
    """A table whose columns are as wide as their widest cell, the number columns right-aligned."""
    header = ["metric", "size", "p50/value", "p99", "target", "met"]
    cells = [header] + [[str(r["metric"]), str(r["size"]), _value(r), f"{r['p99_ms']} ms" if "p99_ms" in r else "",
                         str(r["target"]), MET[r["met"]]] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) if i in (2, 3) else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in cells)


MET = {True: "yes", False: "NO", None: "-"}  # None: the row was not measured (its reason is printed under the table)


def _value(r: Row) -> str:
    if "p50_ms" in r and "value" not in r:
        return f"{r['p50_ms']} ms"
    value = f"{r.get('value')} {r.get('unit', '')}".strip()
    return value + (f" (first search {r['first_search_s']} s)" if "first_search_s" in r else "")


BUSY_LOAD_PER_CPU = 0.7  # a 1-minute load above this share of the CPUs: other work shared the host


def host_load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def verdict(rows: list[Row], before: list[float], after: list[float]) -> dict[str, Any]:
    """How many rows met their target, and whether the host was busy enough to inflate their wall-clock latencies."""
    cpus = os.cpu_count() or 1
    busy = max(before[0], after[0]) > BUSY_LOAD_PER_CPU * cpus
    met = Counter(r["met"] for r in rows)  # a row not measured (None) is neither met nor missed
    return {"met": met[True], "missed": met[False],
            "not_measured": [{"metric": r["metric"], "reason": r.get("reason", "")} for r in rows if r["met"] is None],
            "host": {"cpus": cpus, "load_before": before, "load_after": after, "busy": busy}}


def summary_lines(found: dict[str, Any]) -> list[str]:
    h = found["host"]
    lines = [f"{found['met']} rows met their target, {found['missed']} missed; host: {h['cpus']} CPUs, "
             f"load average {'/'.join(map(str, h['load_before']))} before, {'/'.join(map(str, h['load_after']))} after"]
    lines += [f"not measured: {skipped['metric']}: {skipped['reason']}" for skipped in found.get("not_measured", [])]
    if h["busy"]:
        lines.append(f"warning: the host was busy (1-minute load over {BUSY_LOAD_PER_CPU:g} per CPU): latencies "
                     "include other work; run again on an idle host before quoting them")
    return lines


def main(ns: argparse.Namespace) -> int:
    before = host_load()
    progress(f"host: {os.cpu_count()} CPUs, load average {'/'.join(map(str, before))}")
    rows = run(ns.quick)
    found = verdict(rows, before, host_load())
    if ns.json:
        print(json.dumps({"rows": rows, **found}, indent=2))
    else:
        print("\n".join([render(rows), "", *summary_lines(found)]))
    return 0
