"""The side-by-side row: memoryd's 8-agent durable-write rate over bettermemory 8.0.0's in the same run; measured
only when `MEMORYD_BENCH_PEER` names the peer's executable, else not measured (docs/benchmark.md, "The peer row")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from memoryd.bench.kit import Bridge, Row, Throwaway, pcts, progress, row, write_concurrently

PEER_ENV = "MEMORYD_BENCH_PEER"
PEER_NAME = "bettermemory 8.0.0"
METRIC = f"8 agents side by side with {PEER_NAME} (same run)"
TARGET_RATIO = 200
AGENTS = 8
PER_AGENT = {True: 5, False: 25}  # peer writes per agent, by --quick: each takes tens of ms
HOW_TO_ENABLE = (f"python3 -m venv /tmp/peer && /tmp/peer/bin/pip install bettermemory==8.0.0, then "
                 f"{PEER_ENV}=/tmp/peer/bin/bettermemory memoryd bench")


def not_measured(reason: str) -> Row:
    """The row when the peer was not run: `met` is None, so the verdict counts it neither way."""
    return {"metric": METRIC, "size": "-", "value": "not measured", "target": f">= {TARGET_RATIO}x",
            "met": None, "reason": reason}


class PeerServer(Bridge):
    """One peer server process driven like `kit.Bridge`, skipping notifications between replies, raising `isError`."""

    def __init__(self, exe: str, home: Path, log: IO[bytes]) -> None:
        super().__init__(peer_env(home), command=[exe], cwd=home, stderr=log)

    def reply(self, method: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the peer server exited (code {self.proc.poll()})")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        result = super().request(method, params)
        if result.get("isError"):
            raise RuntimeError(f"{method} failed: {str(result.get('content'))[:300]}")
        return result

    def initialize(self) -> float:
        took = super().initialize()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return took


def peer_env(home: Path) -> dict[str, str]:
    """The store, HOME and every XDG dir inside the throwaway dir, and nothing of the caller's (no API keys)."""
    xdg = {f"XDG_{kind}_HOME": str(home / f"xdg-{kind.lower()}") for kind in ("CONFIG", "DATA", "STATE", "CACHE")}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(home),
            "BETTERMEMORY_DIR": str(home / "store"), "TMPDIR": str(home / "tmp"), **xdg}


def side_by_side(box: Throwaway, memoryd_row: Row, quick: bool) -> list[Row]:
    """The ratio row from memoryd's `8 agents, durable writes` row and a run of the peer now; not measured
    (with the reason) when the peer is not configured or fails."""
    exe = os.environ.get(PEER_ENV, "")
    if not exe:
        return [not_measured(f"{PEER_ENV} is not set; to measure it: {HOW_TO_ENABLE}")]
    if not os.access(exe, os.X_OK):
        return [not_measured(f"{PEER_ENV}={exe} is not an executable file")]
    progress(f"{AGENTS} agents on {PEER_NAME} ({exe})")
    try:
        peer = run_peer(exe, box.base / "peer", PER_AGENT[quick])
    except RuntimeError as failed:
        return [not_measured(f"the peer failed: {failed}")]
    ours = float(memoryd_row["value"])
    ratio = ours / peer["rate"] if peer["rate"] else float("inf")
    stats = {"value": round(ratio, 1), "unit": f"x ({ours:,.0f} vs {peer['rate']:,.1f} writes/s)",
             "memoryd_rate": ours, "memoryd_lost": memoryd_row.get("lost"), "peer": PEER_NAME,
             "peer_rate": round(peer["rate"], 2), "peer_writes": peer["writes"], "peer_lost": peer["lost"],
             "peer_p50_ms": peer["p50_ms"], "peer_p99_ms": peer["p99_ms"]}
    size = f"{memoryd_row['size']} / {peer['writes']} peer writes"
    return [row(METRIC, size, stats, f">= {TARGET_RATIO}x", ratio >= TARGET_RATIO)]


def run_peer(exe: str, home: Path, per_agent: int) -> dict[str, Any]:
    """AGENTS peer servers on one store, each writing `per_agent` episodes in its own thread, as memoryd's row does."""
    (home / "tmp").mkdir(parents=True)
    with open(home / "servers.log", "ab") as log:
        servers = [PeerServer(exe, home, log) for _ in range(AGENTS)]  # all start at once: spawning is not timed
        try:
            acked, samples, errors, elapsed = write_concurrently(servers, per_agent)
        except (RuntimeError, ValueError, OSError) as failed:
            raise RuntimeError(f"{failed}; its log: {home / 'servers.log'}") from failed
        finally:
            for server in servers:
                server.close()
    if errors:
        raise RuntimeError(f"{len(errors)} of {AGENTS} agents stopped on an error, the first: {errors[0]}")
    return {"rate": len(acked) / elapsed, "writes": len(acked), "lost": lost(home / "store", acked), **pcts(samples)}


def lost(store: Path, acked: list[str]) -> int:
    """Duplicate ids, plus acknowledged writes not on disk as `episodes/<session>/<id>.md`."""
    on_disk = {path.stem for path in (store / "episodes").glob("*/*.md")}
    return len(acked) - len(set(acked)) + sum(1 for i in set(acked) if i not in on_disk)
