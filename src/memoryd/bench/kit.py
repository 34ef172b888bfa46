"""Bench plumbing: a throwaway daemon, raw stdio MCP bridges, a pipelined wire loader for bulk data
(docs/benchmark.md, "Method"), and the helpers every row uses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Self

from memoryd import PROTOCOL, names

Row = dict[str, Any]
# Bulk loads set every override, so no gate stops them.
OVERRIDES = {"force": True, "acknowledge_transient": True, "acknowledge_scope_mismatch": True,
             "acknowledge_credential": True}
# A cold or loaded machine can take minutes to replay a 100k store: report it, do not crash.
START_TIMEOUT_S = 600


def progress(message: str, who: str = "bench") -> None:
    print(f"{who}: {message}", file=sys.stderr, flush=True)


def row(metric: str, size: str, stats: dict[str, Any], target: str, met: bool) -> Row:
    return {"metric": metric, "size": size, **stats, "target": target, "met": met}


class Throwaway:
    """A temp store + runtime dir with a daemon running on it; `close` (or leaving `with`) kills everything."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="mdb", dir="/tmp"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        self.env.update(MEMORYD_HOME=str(self.base / "h"), MEMORYD_RUNTIME_DIR=str(self.base / "r"),
                        MEMORYD_CONFIG=str(self.base / "config.yaml"))
        self.daemon: subprocess.Popen[bytes] | None = None
        self.counts: dict[str, int] = {}  # what the loaders have put in the store so far

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self) -> None:
        log = open(self.base / "daemon.log", "ab")
        self.daemon = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=self.env,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        status = self.base / "r" / "memoryd.status"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not status.exists():
            if time.monotonic() > deadline or self.daemon.poll() is not None:
                raise RuntimeError("bench daemon did not start: " + (self.base / "daemon.log").read_text()[-2000:])
            time.sleep(0.01)

    def endpoint(self) -> str:
        return str(json.loads((self.base / "r" / "memoryd.status").read_text())["endpoint"])

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(timeout=30)

    def close(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            os.killpg(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait()
        shutil.rmtree(self.base, ignore_errors=True)


class Bridge:
    """One `memoryd mcp` process (or `command`) driven by newline-delimited JSON-RPC; `with` initializes, closes it."""

    def __init__(self, env: dict[str, str], worktree: str | None = None, command: list[str] | None = None,
                 cwd: Path | None = None, stderr: IO[bytes] | int = subprocess.DEVNULL) -> None:
        extra = {"MEMORYD_WORKTREE": worktree} if worktree else {}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(command or [sys.executable, "-m", "memoryd", "mcp"], cwd=cwd,
                                     env={**env, **extra}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.next_id = 0

    def __enter__(self) -> Self:
        try:
            self.initialize()
        except BaseException:  # a failed handshake must not leave the process behind
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self, method: str) -> dict[str, Any]:
        """The answer to request `next_id`."""
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        reply = self.reply(method)
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply["result"]  # type: ignore[no-any-return]

    def initialize(self) -> float:
        """Seconds from spawn to the `initialize` answer."""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "memoryd-bench", "version": "1"}})
        return time.perf_counter() - self.started

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments})["structuredContent"]  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class WireLoader:
    """Pipelined raw-protocol client: many logical connections over one DEALER, for bulk loads."""

    def __init__(self, endpoint: str) -> None:
        import zmq

        from memoryd import protocol

        self.protocol = protocol
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.sent = 0
        self.next_id = 0

    def send(self, conn: str, op: str, args: dict[str, Any]) -> None:
        self.next_id += 1
        self.sock.send(self.protocol.encode(self.protocol.request(self.next_id, op, args, conn)))
        self.sent += 1
        if self.sent >= 2000:
            self.drain()

    def drain(self) -> None:
        while self.sent:
            reply = self.protocol.decode(self.sock.recv())
            if not reply.get("ok"):
                raise RuntimeError(f"bulk load failed: {reply.get('error')}")
            self.sent -= 1

    def session(self, conn: str, worktree: str | None) -> None:
        self.send(conn, "hello", {"protocol": PROTOCOL, "identity": {"worktree": worktree, "project": "bench"}})

    def call(self, conn: str, tool: str, **arguments: Any) -> None:
        self.send(conn, "call", {"tool": tool, "arguments": arguments})


def load_memories(box: Throwaway, worktree: str, contents: Iterable[str], scopes: list[str]) -> float:
    """Pipelined writes of `contents` with every override; seconds from the first write to the last acknowledged."""
    loader = WireLoader(box.endpoint())
    conn = f"load-{time.monotonic_ns()}"
    loader.session(conn, worktree)
    began = time.perf_counter()
    for content in contents:
        loader.call(conn, names.MEMORY_WRITE, content=content, scopes=scopes, **OVERRIDES)
    loader.send(conn, "bye", {})
    loader.drain()
    return time.perf_counter() - began


def seconds(action: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    began = time.perf_counter()
    action(*args, **kwargs)
    return time.perf_counter() - began


def time_calls(box: Throwaway, tool: str, arguments: Callable[[int], dict[str, Any]], samples: int,
               worktree: str = "/bench/w-mem") -> tuple[list[float], list[dict[str, Any]]]:
    """Latencies of `samples` calls of `tool` (call i with `arguments(i)`) through one bridge, and their results."""
    latencies, results = [], []
    with Bridge(box.env, worktree=worktree) as bridge:
        for i in range(samples):
            args = arguments(i)
            began = time.perf_counter()
            results.append(bridge.call(tool, **args))
            latencies.append(time.perf_counter() - began)
    return latencies, results


def write_concurrently(bridges: Sequence[Bridge], per_agent: int) -> tuple[list[str], list[float], list[str], float]:
    """After a warm-up write on each, every bridge writes `per_agent` episodes in its own thread (the same bodies on
    memoryd and its peer); returns the acknowledged ids, the latencies, each agent's error and the wall time."""
    for bridge in bridges:
        bridge.initialize()
        bridge.call(names.EPISODE_WRITE, body="warm-up")
    acked: list[list[str]] = [[] for _ in bridges]
    samples: list[float] = []
    errors: list[str] = []

    def agent(i: int) -> None:
        try:
            for k in range(per_agent):
                began = time.perf_counter()
                reply = bridges[i].call(names.EPISODE_WRITE, body=f"agent {i} write {k}")
                samples.append(time.perf_counter() - began)
                if reply.get("status") != "committed":
                    raise RuntimeError(f"episode_write answered {str(reply)[:200]}")
                acked[i].append(str(reply["id"]))
        except (RuntimeError, ValueError, KeyError) as failed:
            errors.append(repr(failed))

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(len(bridges))]
    began = time.perf_counter()  # all started together
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [i for ids in acked for i in ids], samples, errors, time.perf_counter() - began


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pcts(samples_s: list[float]) -> dict[str, float]:
    """p50 / p99 in milliseconds."""
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3), "p99_ms": round(p99 * 1000, 3)}
