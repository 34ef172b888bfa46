"""The event log's integrity: damage away from its tail is never skipped silently (docs/storage.md,
'Reliability').

Real daemons on real files: a line overwritten mid-log, a JSON line without `kind`, a deleted
oldest segment and a symlinked segment each stop the start with a message naming the segment and
line and the repair command; `log verify` and `doctor` name the same line; `memoryd log repair`
quarantines the bad lines and the next start replays everything after them — ids and seq numbers
are never reused, the chain verifies. A torn tail is still cut at start, and `log verify` calls it
"torn tail, repaired at next start" instead of BROKEN.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call

WT = {"MEMORYD_WORKTREE": "/w/log"}
REFUSED = 3  # the daemon's exit code when the store cannot be opened


# -- helpers ------------------------------------------------------------------------------------

def populate(env: Env) -> dict[str, Any]:
    """Three sessions in one worktree: episodes in each, a memory in the second; then a clean stop."""
    made: dict[str, Any] = {"sessions": [], "episodes": []}

    async def main() -> None:
        for n in range(3):
            async with env.session(**WT) as s:
                episode = await call(s, "episode_write", body=f"step {n} of the migration", takeaway=f"step {n}")
                made["sessions"].append(episode["session_id"])
                made["episodes"].append(episode["id"])
                if n == 1:
                    made["memory"] = (await call(s, "memory_write", scopes=["projects:log"],
                                                 content="The billing service retries webhooks three times."))["id"]
    env.start_daemon()
    anyio.run(main)
    stop(env)
    return made


def stop(env: Env) -> None:
    env.kill_daemon(signal.SIGTERM)


def segment(env: Env) -> Path:
    found = sorted((env.home / "events").glob("*.jsonl"))
    assert len(found) == 1
    return found[0]


def line_of(path: Path, predicate: Any) -> int:
    """The 1-based number of the first line whose event satisfies `predicate`."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if predicate(json.loads(line)):
            return number
    raise AssertionError("no such event")


def overwrite_mid_line(path: Path, number: int) -> bytes:
    """Overwrite bytes in the middle of line `number`, keeping its length and newline."""
    lines = path.read_bytes().splitlines(keepends=True)
    line = lines[number - 1]
    middle = len(line) // 2
    lines[number - 1] = line[: middle - 4] + b"\x00#\xff#\x00#\xff#" + line[middle + 4:]
    path.write_bytes(b"".join(lines))
    return lines[number - 1]


def start_refused(env: Env) -> str:
    """Start a daemon that must refuse the store; its output."""
    proc = env.start_daemon(wait=False)
    assert proc.wait(timeout=20) == REFUSED, env.daemon_log()
    assert env.status() is None or env.status().get("pid") != proc.pid
    out = (env.base / "daemon.out").read_text(errors="replace")
    assert "Traceback" not in out, out
    return out


def doctor_log_checks(env: Env) -> dict[str, dict[str, Any]]:
    result = env.memoryd("doctor", "--json")
    return {c["name"]: c for c in json.loads(result.stdout)["checks"] if c["name"].startswith("event log")}


def assert_seq_continuous(env: Env) -> None:
    """Every seq once, in order: a quarantine marker covers first_seq..seq."""
    seq = 0
    for event in env.events():
        first = event.get("first_seq", event["seq"]) if event["kind"] == "quarantined" else event["seq"]
        assert first == seq + 1 and event["seq"] >= seq, (seq, event)
        seq = event["seq"]


def health_and_new_session(env: Env) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            out["health"] = await call(s, "memory_health")
            out["session"] = (await call(s, "memory_digest"))["current_session"]["id"]
            out["episodes"] = (await call(s, "episode_search", auto_scope=False))["episodes"]
    anyio.run(main)
    return out["health"], out["session"], out["episodes"]


# -- damage, refusal and repair ------------------------------------------------------------------

def test_a_corrupt_line_mid_log_stops_the_start_and_repair_quarantines_it(env: Env) -> None:
    made = populate(env)
    path = segment(env)
    second = made["sessions"][1]
    number = line_of(path, lambda e: e["kind"] == "session_start" and e["session"] == second)
    bad = overwrite_mid_line(path, number)
    before = path.read_bytes()

    out = start_refused(env)
    assert f"{path.name}:{number}" in out and "memoryd log repair" in out
    assert path.read_bytes() == before, "a refused start changed the log"

    verify = env.memoryd("log", "verify")
    assert verify.returncode == 1 and f"{path.name}:{number}" in verify.stdout and "BROKEN" in verify.stdout
    check = doctor_log_checks(env)["event log"]
    assert check["status"] == "fail" and f"{path.name}:{number}" in check["detail"] and "log repair" in check["fix"]

    repaired = env.memoryd("log", "repair")
    assert repaired.returncode == 0, repaired.stderr
    quarantine = list((env.home / "events" / "quarantine").iterdir())
    assert len(quarantine) == 1 and bad in quarantine[0].read_bytes()
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0 and "quarantined: seq" in verify.stdout, verify.stdout
    assert doctor_log_checks(env)["event log quarantine"]["status"] == "warn"

    env.start_daemon()
    health, session, episodes = health_and_new_session(env)
    assert health["log"]["quarantined"]["total"] == 1 and health["log"]["chain_ok"] is True
    assert health["unaccounted"]["total"] == 0 and health["missing"]["total"] == 0
    assert int(session.split("-")[1]) > max(int(s.split("-")[1]) for s in made["sessions"]), session
    by_id = {e["id"]: e for e in episodes}
    assert all(by_id[e]["provenance"] == "local" for e in made["episodes"]), episodes
    stop(env)
    assert env.memoryd("log", "verify").returncode == 0
    assert_seq_continuous(env)


def test_a_json_line_without_kind_is_damage_not_a_crash(env: Env) -> None:
    made = populate(env)
    path = segment(env)
    number = line_of(path, lambda e: e["kind"] == "episode_write" and e["episode_id"] == made["episodes"][1])
    lines = path.read_text().splitlines(keepends=True)
    event = json.loads(lines[number - 1])
    del event["kind"]
    lines[number - 1] = json.dumps(event) + "\n"
    path.write_text("".join(lines))

    out = start_refused(env)
    assert f"{path.name}:{number}" in out and "kind" in out
    assert env.memoryd("log", "repair").returncode == 0
    env.start_daemon()
    health, _session, episodes = health_and_new_session(env)
    # The one episode whose event was lost is reported, not hidden; the others stay local.
    assert health["unaccounted"]["total"] == 0
    provenance = {e["id"]: e["provenance"] for e in episodes}
    assert provenance[made["episodes"][1]] == "unaccounted"
    assert provenance[made["episodes"][0]] == provenance[made["episodes"][2]] == "local"
    stop(env)
    assert_seq_continuous(env)


def test_a_deleted_oldest_segment_is_noticed_at_start(env: Env) -> None:
    populate(env)
    path = segment(env)
    lines = path.read_bytes().splitlines(keepends=True)
    older = path.with_name("2000-01.jsonl")  # split the log into two segments, then lose the first
    older.write_bytes(b"".join(lines[:5]))
    path.write_bytes(b"".join(lines[5:]))
    assert env.memoryd("log", "verify").returncode == 0
    older.unlink()

    out = start_refused(env)
    assert f"{path.name}:1" in out and "missing" in out
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 1 and "missing" in verify.stdout
    assert env.memoryd("log", "repair").returncode == 0
    env.start_daemon()
    health, _session, _episodes = health_and_new_session(env)
    assert health["log"]["quarantined"]["items"][0]["first_seq"] == 1
    assert health["log"]["quarantined"]["items"][0]["seq"] == 5
    stop(env)
    assert env.memoryd("log", "verify").returncode == 0
    assert_seq_continuous(env)


def test_a_torn_tail_is_repaired_at_start_and_verify_says_so(env: Env) -> None:
    populate(env)
    path = segment(env)
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 999, "ts": "2026-')  # a crash mid-append
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0 and "torn tail, repaired at next start" in verify.stdout, verify.stdout
    assert "BROKEN" not in verify.stdout

    env.start_daemon()
    health, _session, _episodes = health_and_new_session(env)
    assert health["log"]["torn_bytes_truncated"] == 25 and health["log"]["chain_ok"] is True
    stop(env)
    assert path.read_bytes().startswith(whole)
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0 and "torn" not in verify.stdout


def test_a_symlinked_segment_is_refused_and_not_written(env: Env) -> None:
    populate(env)
    path = segment(env)
    outside = env.base / "outside.jsonl"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)
    before = outside.read_bytes()

    out = start_refused(env)
    assert path.name in out and "symbolic link" in out
    assert outside.read_bytes() == before
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 1 and "symbolic link" in verify.stdout


def test_log_repair_refuses_while_the_daemon_runs(env: Env) -> None:
    env.start_daemon()
    result = env.memoryd("log", "repair")
    assert result.returncode == 1 and "stop it first" in result.stderr


def test_repair_bridges_a_run_of_bad_lines_and_quarantines_a_forked_tail(env: Env) -> None:
    populate(env)
    path = segment(env)
    lines = path.read_bytes().splitlines(keepends=True)
    total = len(lines)
    overwrite_mid_line(path, 7)
    overwrite_mid_line(path, 8)
    with open(path, "ab") as handle:  # what the old replay let happen: seq numbers reused, a fork
        handle.write(b"".join(lines[2:5]))

    out = start_refused(env)
    assert f"{path.name}:7" in out
    assert env.memoryd("log", "repair").returncode == 0
    markers = [(e["first_seq"], e["seq"], e["lines"]) for e in env.events() if e["kind"] == "quarantined"]
    assert markers == [(7, 8, 2), (total + 1, total + 3, 3)]
    assert env.memoryd("log", "verify").returncode == 0

    env.start_daemon()
    health, _session, _episodes = health_and_new_session(env)
    assert health["log"]["quarantined"]["total"] == 2 and health["log"]["chain_ok"] is True
    stop(env)
    assert env.memoryd("log", "verify").returncode == 0
    assert_seq_continuous(env)
    seqs = [e["seq"] for e in env.events() if e["kind"] != "quarantined"]
    assert len(seqs) == len(set(seqs)) and min(s for s in seqs if s > total) > total + 3


def test_pending_ids_are_not_reused_after_their_event_is_quarantined(env: Env) -> None:
    (env.base / "config.yaml").write_text("require_write_confirmation: true\n")
    first: dict[str, Any] = {}

    async def write(key: str, content: str) -> None:
        async with env.session(**WT) as s:
            first[key] = await call(s, "memory_write", scopes=["projects:log"], content=content)
    env.start_daemon()
    anyio.run(write, "a", "The billing service retries webhooks three times.")
    assert first["a"]["status"] == "pending"
    stop(env)
    path = segment(env)
    number = line_of(path, lambda e: e["kind"] == "write" and e.get("pending_id") == first["a"]["pending_id"])
    overwrite_mid_line(path, number)
    start_refused(env)
    assert env.memoryd("log", "repair").returncode == 0
    env.start_daemon()
    anyio.run(write, "b", "The invoice exporter runs nightly at two in the morning UTC.")
    assert first["b"]["status"] == "pending" and first["b"]["pending_id"] != first["a"]["pending_id"]
