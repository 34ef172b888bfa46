"""Daemon restarts under live bridges, and how each kind of session end is recorded (docs/architecture.md, 'Sessions').

A bridge that survives a restart reattaches to its session; one that does not come back within
the grace window (3 heartbeats) ends as `daemon_restart`; a killed bridge ends as `lost`; a bridge
whose stdin closes says goodbye and ends as `closed`.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from harness import Env, call

# Short heartbeats keep the grace window (3 × heartbeat) and liveness checks quick.
HEARTBEAT_S = 0.5


# -- helpers ------------------------------------------------------------------------------------

class RawBridge:
    """`memoryd mcp` on pipes, spoken to in raw JSON-RPC lines, so the test owns its pid."""

    def __init__(self, env: Env, **extra: str) -> None:
        err = open(env.base / f"bridge-{time.monotonic_ns()}.err", "wb")
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

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 30) -> dict[str, Any]:
        self.last_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.last_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        deadline = time.monotonic() + timeout_s
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line, "the bridge closed stdout"
            reply = json.loads(line)
            if reply.get("id") == self.last_id:
                return reply  # type: ignore[no-any-return]

    def initialize(self) -> None:
        reply = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "raw-test", "version": "1"}})
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in reply, reply
        return reply["result"]["structuredContent"]  # type: ignore[no-any-return]




def stop_daemon(env: Env) -> None:
    stopped = env.memoryd("stop")
    assert stopped.returncode == 0, stopped.stderr


def set_heartbeat(env: Env, seconds: float) -> None:
    Path(env.vars["MEMORYD_CONFIG"]).write_text(f"heartbeat_seconds: {seconds}\n")


def wait_until_ended(env: Env, session_id: str, timeout_s: float = 20) -> dict[str, Any]:
    """The `prior_session` block of `session_id` once it is no longer open."""
    async def main() -> dict[str, Any]:
        with anyio.fail_after(timeout_s):
            async with env.session(MEMORYD_WORKTREE="/w/observer") as observer:
                while True:
                    handoff = await call(observer, "episode_handoff", prior_session_id=session_id)
                    if handoff["prior_session"]["ended"] != "open":
                        return handoff["prior_session"]  # type: ignore[no-any-return]
                    await anyio.sleep(0.1)
    return anyio.run(main)




# -- restart under a live bridge ---------------------------------------------------------------------

def test_a_restart_under_a_live_bridge_keeps_its_session(env: Env) -> None:
    set_heartbeat(env, HEARTBEAT_S)
    env.start_daemon()

    async def main() -> None:
        with anyio.fail_after(90):
            async with env.session(MEMORYD_WORKTREE="/w/live") as s:
                before = await call(s, "episode_write", body="before the restart")
                old_pid = env.daemon_pid()
                restarted = await anyio.to_thread.run_sync(env.memoryd, "restart")
                assert restarted.returncode == 0, restarted.stderr
                assert env.daemon_pid() not in (None, old_pid)
                after = await call(s, "episode_write", body="after the restart")
                await anyio.sleep(3 * HEARTBEAT_S + 1)  # past the grace window of the new daemon
                later = await call(s, "episode_write", body="after the grace window")
                own = await call(s, "episode_handoff", prior_session_id=before["session_id"],
                                 max_episodes=10, include_bodies=True)
        assert after["session_id"] == later["session_id"] == before["session_id"]
        assert own["prior_session"]["ended"] == "open"
        assert [e["body"] for e in own["episodes"]] == [
            "before the restart", "after the restart", "after the grace window"]
        attached = [e for e in env.events() if e["kind"] == "session_attach"]
        assert [e["session"] for e in attached] == [before["session_id"]]

    anyio.run(main)


def test_a_write_resent_after_a_restart_is_applied_once(env: Env) -> None:
    from memoryd.client.connection import Connection

    env.start_daemon()
    identity = {"worktree": "/w/retry", "repo": None, "project": None, "client": "retry-test",
                "pid": os.getpid(), "swarm_id": None}
    conn = Connection(identity, endpoint=(env.status() or {})["endpoint"], autospawn=False)
    args = {"tool": "episode_write", "arguments": {"body": "exactly once"}}
    try:
        session_id = conn.connect()["session_id"]
        req = conn.new_id()
        assert conn.send(req, "call", args)
        first = conn.wait_reply(req, 10)
        assert first is not None and first["ok"], first
        assert conn.send(req, "call", args)  # a resend to the same daemon: its reply cache answers
        again = conn.wait_reply(req, 10)
        stop_daemon(env)
        env.start_daemon()
        assert conn.reconnect()["session_id"] == session_id  # reattached, not a new session
        assert conn.send(req, "call", args)  # the daemon that answers now never saw the first reply
        replayed = conn.wait_reply(req, 10)
    finally:
        conn.close()
    assert again is not None and replayed is not None
    assert again["result"] == first["result"] == replayed["result"]
    episode_id = first["result"]["id"]
    assert [p.stem for p in (env.home / "episodes" / session_id).glob("*.md")] == [episode_id]
    named = [e for e in env.events() if e["kind"] == "episode_write"]
    assert [e["episode_id"] for e in named] == [episode_id]


# -- how sessions end ------------------------------------------------------------------------------

def test_a_session_whose_bridge_never_comes_back_ends_as_daemon_restart(env: Env) -> None:
    env.start_daemon()  # default heartbeat: the bridge's death cannot be taken for `lost` before the stop
    bridge = RawBridge(env, MEMORYD_WORKTREE="/w/gone")
    bridge.initialize()
    written = bridge.call("episode_write", body="the last words")
    bridge.proc.kill()
    bridge.proc.wait(timeout=10)
    stop_daemon(env)
    set_heartbeat(env, HEARTBEAT_S)  # the next daemon's grace window is 3 heartbeats
    env.start_daemon()
    prior = wait_until_ended(env, written["session_id"])
    assert prior["ended"] == "daemon_restart"
    assert prior["id"] == written["session_id"] and prior["ended_at"].endswith("Z")


def test_a_bridge_killed_with_sigkill_ends_its_session_as_lost(env: Env) -> None:
    set_heartbeat(env, HEARTBEAT_S)
    env.start_daemon()
    bridge = RawBridge(env, MEMORYD_WORKTREE="/w/killed")
    bridge.initialize()
    written = bridge.call("episode_write", body="working…")
    bridge.proc.kill()
    bridge.proc.wait(timeout=10)
    prior = wait_until_ended(env, written["session_id"])
    assert prior["ended"] == "lost"
    ends = [e for e in env.events() if e["kind"] == "session_end" and e["session"] == written["session_id"]]
    assert [e["reason"] for e in ends] == ["lost"]


def test_stdin_eof_makes_the_bridge_exit_zero_and_close_its_session(env: Env) -> None:
    env.start_daemon()
    bridge = RawBridge(env, MEMORYD_WORKTREE="/w/eof")
    bridge.initialize()
    written = bridge.call("episode_write", body="done for today")
    assert bridge.proc.stdin is not None
    bridge.proc.stdin.close()
    assert bridge.proc.wait(timeout=10) == 0
    prior = wait_until_ended(env, written["session_id"], timeout_s=10)
    assert prior["ended"] == "closed"


def test_memoryd_stop_reports_success_for_a_daemon_a_live_bridge_spawned(env: Env) -> None:
    outcome: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(60):
            async with env.session(MEMORYD_WORKTREE="/w/spawner") as s:  # no daemon yet: it spawns one
                await call(s, "episode_write", body="spawned my own daemon")
                outcome["pid"] = env.daemon_pid()
                outcome["stop"] = await anyio.to_thread.run_sync(env.memoryd, "stop")

    anyio.run(main)
    stopped = outcome["stop"]
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped (pid {outcome['pid']})" in stopped.stderr


def test_a_fractional_heartbeat_is_accepted_and_announced_in_hello(env: Env) -> None:
    from memoryd.client.connection import Connection

    set_heartbeat(env, 0.5)
    proc = env.start_daemon(wait=False)
    deadline = time.monotonic() + 20
    while (env.status() or {}).get("pid") != proc.pid:
        assert proc.poll() is None, f"the daemon refused to start: {env.daemon_log()}"
        assert time.monotonic() < deadline, "the daemon did not come up"
        time.sleep(0.02)

    conn = Connection({"worktree": "/w/hb"}, endpoint=(env.status() or {})["endpoint"], autospawn=False)
    try:
        assert conn.connect()["heartbeat_s"] == 0.5
    finally:
        conn.close()
