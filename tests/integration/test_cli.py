"""The operator commands, run as a user runs them, against real daemons."""

from __future__ import annotations

import json
import tarfile

import anyio

from harness import Env, call


def test_demo_runs_two_agents_and_shows_the_handoff(env: Env) -> None:
    result = env.memoryd("demo", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "ended 'finished'" in result.stdout and "handoff: Became true" in result.stdout


def test_serve_detach_starts_once_status_reports_and_stop_stops(env: Env) -> None:
    assert env.memoryd("serve", "--detach").returncode == 0
    pid = env.wait_ready()["pid"]
    again = env.memoryd("serve", "--detach")
    assert again.returncode == 0 and env.daemon_pid() == pid
    status = json.loads(env.memoryd("status", "--json").stdout)
    assert status["running"] is True and status["pid"] == pid
    assert env.memoryd("stop").returncode == 0
    assert env.status() is None
    assert env.memoryd("status").returncode == 1


def test_log_verify_passes_then_reports_the_first_broken_seq(daemon: Env) -> None:
    async def main() -> None:
        async with daemon.session() as s:
            for i in range(3):
                await call(s, "episode_write", body=f"entry {i}")
    anyio.run(main)
    assert daemon.memoryd("log", "verify").returncode == 0
    segment = next((daemon.home / "events").glob("*.jsonl"))
    lines = segment.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"kind":', '"kind_":', 1)
    segment.write_text("".join(lines))
    broken = daemon.memoryd("log", "verify", "--json")
    assert broken.returncode == 1 and json.loads(broken.stdout)["broken_seq"] == 4


def test_episodes_list_prune_and_export(daemon: Env) -> None:
    async def main() -> str:
        async with daemon.session(MEMORYD_WORKTREE="/w/cli") as s:
            return (await call(s, "episode_write", body="kept", takeaway="a takeaway"))["session_id"]
    session = anyio.run(main)
    listed = json.loads(daemon.memoryd("episodes", "list", "--json").stdout)
    assert any(row["session"] == session for row in listed["sessions"])
    one = daemon.memoryd("episodes", "list", session)
    assert "a takeaway" in one.stdout and "[local]" in one.stdout
    dry = json.loads(daemon.memoryd("episodes", "prune", "--dry-run", "--json").stdout)
    assert dry == {"dry_run": True, "sessions": [], "episodes": 0}
    archive = daemon.base / "out.tar.gz"
    assert daemon.memoryd("export", str(archive)).returncode == 0
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert any(n.startswith("episodes/") for n in names) and any(n.startswith("events/") for n in names)
