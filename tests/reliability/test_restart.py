"""Starting, stopping and restarting the daemon under live bridges, and how each kind of session
end is recorded (docs/architecture.md, 'Sessions').

A bridge that survives a restart reattaches to its session; one that does not come back within
the grace window (3 heartbeats) ends as `daemon_restart`; a killed bridge ends as `lost`; a bridge
whose stdin closes says goodbye and ends as `closed`; only the connection that owns a session may
finish it. `serve --detach` (and so `memoryd restart`) racing a daemon a bridge spawned waits for
that daemon instead of reporting its own child's exit 0 as a failure — made deterministic by
holding the daemon's lock while it starts, and checked live by restarts beside a busy bridge; a
bridge whose daemon cannot start says why in its -32001 error.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio

from harness import Env, RawBridge, call, call_error, wait_for

# Short heartbeats keep the grace window (3 × heartbeat) and liveness checks quick.
HEARTBEAT_S = 0.5


# -- helpers ------------------------------------------------------------------------------------

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




# -- starting, stopping and restarting the daemon ----------------------------------------------------

def test_serve_detach_waits_for_a_daemon_that_holds_the_lock(env: Env) -> None:
    env.runtime.mkdir(mode=0o700, parents=True)
    with open(env.runtime / "memoryd.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "another daemon is starting"
        detach = subprocess.Popen([sys.executable, "-m", "memoryd", "serve", "--detach"], env=env.environ(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        env.procs.append(detach)  # type: ignore[arg-type]
        log = env.home / "log" / "memoryd.log"  # its child says so as it meets the lock and exits 0
        wait_for(lambda: log.exists() and "already running" in log.read_text(), timeout=30,
                 what="the detached daemon meeting the lock")
        assert detach.poll() is None, detach.communicate()
        fcntl.flock(lock, fcntl.LOCK_UN)
    # The "other" daemon comes up. Once the lock is free the detaching process may win the race
    # and start one itself; either way exactly one serves, and detach must report it running.
    env.start_daemon(wait=False)
    env.wait_ready()
    _out, err = detach.communicate(timeout=30)
    assert detach.returncode == 0, err
    assert "running" in err


def test_restart_beside_a_busy_bridge_always_ends_with_a_daemon(daemon: Env) -> None:
    stop, busy_now = threading.Event(), threading.Event()

    def busy() -> None:
        async def main() -> None:
            async with daemon.session(MEMORYD_WORKTREE="/w/busy") as s:
                while not stop.is_set():
                    try:
                        await s.call_tool("episode_write", {"body": "busy"})
                        busy_now.set()
                    except Exception:  # noqa: BLE001 - a call caught mid-restart may fail; the bridge retries
                        await anyio.sleep(0.05)  # a pause before the next try, not a wait for anything
        anyio.run(main)

    worker = threading.Thread(target=busy, daemon=True)
    worker.start()
    try:
        assert busy_now.wait(timeout=60), "the busy bridge never wrote"
        codes = []
        for _ in range(4):
            done = daemon.memoryd("restart", timeout=90)
            codes.append((done.returncode, done.stderr[-300:]))
            assert daemon.status() is not None
    finally:
        stop.set()
        worker.join(timeout=30)
    assert [c for c, _ in codes] == [0] * 4, codes
    assert daemon.memoryd("status").returncode == 0


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


def test_the_bridge_says_why_the_daemon_could_not_start(env: Env) -> None:
    shared = env.base / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a world-writable (sticky) store directory: refused, rightly
    env.vars["MEMORYD_HOME"] = str(shared)
    env.home = shared
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE="/w/refused") as s:
            out["error"] = await call_error(s, "memory_digest")
    anyio.run(main)
    error = out["error"]
    assert error.code == -32001, error
    assert "world-writable" in error.message and "world-writable" in error.data["reason"], error
    assert error.data["log"].endswith("memoryd.log")


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
                await anyio.sleep(3 * HEARTBEAT_S + 1)  # the subject: past the grace window of the new daemon
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
    assert bridge.close() == 0
    prior = wait_until_ended(env, written["session_id"], timeout_s=10)
    assert prior["ended"] == "closed"


def test_only_the_owning_connection_may_finish_a_session(daemon: Env) -> None:
    out: dict[str, Any] = {}

    async def main() -> None:
        async with daemon.session(MEMORYD_WORKTREE="/w/owner") as owner, \
                daemon.session(MEMORYD_WORKTREE="/w/owner") as other:
            mine = (await call(owner, "memory_digest"))["current_session"]["id"]
            theirs = (await call(other, "memory_digest"))["current_session"]["id"]
            out["foreign"] = await call_error(other, "memory_session_finish", session_id=mine, summary="not yours")
            out["still"] = (await call(owner, "memory_digest"))["current_session"]["id"]
            out["own"] = await call(owner, "memory_session_finish", session_id=mine, summary="done")
            out["theirs"] = await call(other, "memory_session_finish", session_id=theirs)
            out["mine"] = mine
    anyio.run(main)
    error = out["foreign"]
    assert error.code == -32002 and error.data["kind"] == "foreign_session", error
    assert out["still"] == out["mine"], "the owner was moved to a new session"
    assert out["own"]["session_id"] == out["mine"] and out["theirs"]["finished_at"]
    ends = [e for e in daemon.events() if e["kind"] == "session_end" and e["session"] == out["mine"]]
    assert len(ends) == 1 and ends[0]["reason"] == "finished"


def test_a_fractional_heartbeat_is_accepted_and_announced_in_hello(env: Env) -> None:
    from memoryd.client.connection import Connection

    set_heartbeat(env, 0.5)
    proc = env.start_daemon(wait=False)

    def up() -> bool:
        assert proc.poll() is None, f"the daemon refused to start: {env.daemon_log()}"
        return (env.status() or {}).get("pid") == proc.pid
    wait_for(up, timeout=20, what="the daemon coming up")

    conn = Connection({"worktree": "/w/hb"}, endpoint=(env.status() or {})["endpoint"], autospawn=False)
    try:
        assert conn.connect()["heartbeat_s"] == 0.5
    finally:
        conn.close()


def test_edits_resent_after_a_restart_get_their_first_answer_and_run_once(env: Env) -> None:
    """An update made with expected_updated, then a remove, each resent across a restart: the
    answer the lost reply held, not `stale` from running again, and one event each (issue 40)."""
    from memoryd.client.connection import Connection

    env.start_daemon()
    identity = {"worktree": "/w/edits", "repo": None, "project": None, "client": "retry-test",
                "pid": os.getpid(), "swarm_id": None}
    conn = Connection(identity, endpoint=(env.status() or {})["endpoint"], autospawn=False)

    def ask(req: str, tool: str, **arguments: Any) -> dict[str, Any]:
        assert conn.send(req, "call", {"tool": tool, "arguments": arguments})
        reply = conn.wait_reply(req, 10)
        assert reply is not None and reply["ok"], reply
        return dict(reply["result"])

    try:
        conn.connect()
        written = ask(conn.new_id(), "memory_write", content="The nightly export runs at 02:00 UTC.",
                      scopes=["topic:export"])
        update_req = conn.new_id()
        updated = ask(update_req, "memory_update", id=written["id"], content="The nightly export runs at 03:00 UTC.",
                      expected_updated=written["created"])
        remove_req = conn.new_id()
        other = ask(conn.new_id(), "memory_write", content="Exports are kept for 30 days in the archive bucket.",
                    scopes=["topic:export"])
        removed = ask(remove_req, "memory_remove", id=other["id"], reason="obsolete")
        stop_daemon(env)
        env.start_daemon()
        conn.reconnect()
        assert ask(update_req, "memory_update", id=written["id"], content="The nightly export runs at 03:00 UTC.",
                   expected_updated=written["created"]) == updated
        assert ask(remove_req, "memory_remove", id=other["id"], reason="obsolete") == removed
    finally:
        conn.close()
    assert updated["status"] == "updated" and removed["status"] == "removed"
    assert [e["memory_id"] for e in env.events() if e["kind"] == "update"] == [written["id"]]
    assert [e["memory_id"] for e in env.events() if e["kind"] == "remove"] == [other["id"]]
