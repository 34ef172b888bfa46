"""Reaper passes with an injected clock: no sleeping, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.episodes.tools import write_episode
from memoryd.daemon.identity.session_table import Conn
from memoryd.daemon.process import reaper

DAY = 86400.0
T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def core(tmp_path: Path, clock: Clock) -> Core:
    c = Core(tmp_path / "store", Config(heartbeat_seconds=5), clock=clock)
    c.open()
    return c


def closed_session_with_episode(core: Core, worktree: str = "/w") -> tuple[str, str]:
    session = core.start_session({"worktree": worktree}, "c-" + worktree)
    written = write_episode(core, session, "body", "takeaway", [], None, None)
    core.end_session(session, "closed")
    core.sync()
    return session.id, written["id"]


def test_episode_ttl_keeps_a_session_one_second_before_30_days(core: Core, clock: Clock) -> None:
    sid, eid = closed_session_with_episode(core)
    clock.now = T0 + 30 * DAY - 1
    assert reaper.episode_ttl_pass(core, clock.now) == []
    assert eid in core.journal.by_id


def test_episode_ttl_deletes_the_folder_one_second_after_30_days(core: Core, clock: Clock) -> None:
    sid, eid = closed_session_with_episode(core)
    folder = core.root / "episodes" / sid
    assert folder.is_dir()
    clock.now = T0 + 30 * DAY + 1
    pruned = reaper.episode_ttl_pass(core, clock.now)
    core.sync()
    assert [p["session"] for p in pruned] == [sid]
    assert eid not in core.journal.by_id and not folder.exists()
    assert core.reaper_stats["episodes_pruned"] == 1


def test_episode_ttl_is_judged_by_the_newest_episode(core: Core, clock: Clock) -> None:
    session = core.start_session({"worktree": "/w"}, "c1")
    write_episode(core, session, "old", None, [], None, None)
    clock.now = T0 + 20 * DAY
    write_episode(core, session, "newer", None, [], None, None)
    core.end_session(session, "closed")
    clock.now = T0 + 31 * DAY
    assert reaper.episode_ttl_pass(core, clock.now) == []
    clock.now = T0 + 51 * DAY
    assert len(reaper.episode_ttl_pass(core, clock.now)) == 1


def test_open_sessions_are_exempt_from_the_episode_ttl(core: Core, clock: Clock) -> None:
    session = core.start_session({"worktree": "/w"}, "c1")
    write_episode(core, session, "still running", None, [], None, None)
    clock.now = T0 + 90 * DAY
    assert reaper.episode_ttl_pass(core, clock.now) == []


def test_dry_run_reports_without_deleting(core: Core, clock: Clock) -> None:
    sid, eid = closed_session_with_episode(core)
    clock.now = T0 + 31 * DAY
    assert len(reaper.episode_ttl_pass(core, clock.now, dry_run=True)) == 1
    assert eid in core.journal.by_id


def test_pruning_is_logged_and_survives_a_restart(tmp_path: Path, core: Core, clock: Clock) -> None:
    sid, eid = closed_session_with_episode(core)
    clock.now = T0 + 31 * DAY
    reaper.run_due(core, clock.now)
    core.sync()
    log_text = "".join(p.read_text() for p in (core.root / "events").glob("*.jsonl"))
    assert '"kind":"episode_prune"' in log_text and '"kind":"reaper_run"' in log_text
    reopened = Core(core.root, core.config, clock=clock)
    reopened.open()
    assert eid in reopened.removed_episodes and eid not in reopened.journal.by_id


def test_silent_connection_ends_its_session_as_lost_after_three_heartbeats(core: Core, clock: Clock) -> None:
    session = core.start_session({"worktree": "/w"}, "c1")
    conns = {"c1": Conn("c1", b"r", {}, session.id, last_seen=clock.now)}
    assert reaper.liveness_pass(core, conns, clock.now + 14.9) == []
    assert reaper.liveness_pass(core, conns, clock.now + 15.1) == ["c1"]
    assert session.ended == "lost" and conns == {}


def test_sessions_open_at_restart_end_as_daemon_restart_after_the_grace_window(
        tmp_path: Path, core: Core, clock: Clock) -> None:
    session = core.start_session({"worktree": "/w"}, "c1")
    core.sync()
    core.log.close()
    restarted = Core(core.root, core.config, clock=clock)
    restarted.open()
    assert restarted.sessions.get(session.id).is_open
    assert reaper.grace_pass(restarted, clock.now + 14) == []
    assert reaper.grace_pass(restarted, clock.now + 15) == [session.id]
    assert restarted.sessions.get(session.id).ended == "daemon_restart"


def test_next_due_is_the_earliest_deadline(core: Core, clock: Clock) -> None:
    core.next_ttl_check = clock.now + 60
    core.suspended["sess-9"] = clock.now + 7
    assert reaper.next_due_in(core, clock.now) == pytest.approx(7)


def _call(core: Core, session_id: str, tool: str, **arguments: object) -> dict:
    from memoryd.daemon import catalogue
    from memoryd.daemon.calls.validate import check_args
    from memoryd.daemon.core import Call

    session = core.sessions.get(session_id)
    conn = Conn("c-" + session_id, b"r", {"worktree": session.worktree}, session_id, last_seen=0)
    spec = catalogue.TOOLS[tool]
    result = spec.handler(Call(core, conn, session, f"{session_id}:{tool}"), check_args(spec.input_schema, arguments))
    core.sync()
    return result


def test_pending_expiry_keeps_the_promoted_episode(tmp_path: Path, clock: Clock) -> None:
    from memoryd.daemon.memories.tier import attach

    core = Core(tmp_path / "store", Config(pending_ttl_seconds=3600), clock=clock)
    attach(core)
    core.open()
    session = core.start_session({"worktree": "/w"}, "c1")
    episode = write_episode(core, session, "the user prefers tabs over spaces", "user prefers tabs", [], None, None)
    held = _call(core, session.id, "episode_promote", episode_id=episode["id"], scopes=["prefs"],
                 category="user-inference")
    assert held["status"] == "pending"
    assert reaper.pending_pass(core, clock.now + 3599) == []
    assert reaper.pending_pass(core, clock.now + 3601) == [held["pending_id"]]
    core.sync()
    assert episode["id"] in core.journal.by_id and core.journal.path_of(core.journal.by_id[episode["id"]]).exists()
    assert held["pending_id"] not in core.memories.pending


def test_the_log_starts_a_new_monthly_segment_and_the_chain_runs_across(tmp_path: Path, clock: Clock) -> None:
    from memoryd.daemon.storage import logcheck

    clock.now = 1_798_761_599.0  # 2026-12-31T23:59:59Z
    core = Core(tmp_path / "store", Config(), clock=clock)
    core.open()
    session = core.start_session({"worktree": "/w"}, "c1")
    clock.now += 2  # 2027-01-01
    write_episode(core, session, "new year", None, [], None, None)
    core.sync()
    names = sorted(p.name for p in (core.root / "events").glob("*.jsonl"))
    assert names == ["2026-12.jsonl", "2027-01.jsonl"]
    assert logcheck.verify(core.root / "events")["ok"] is True


def test_the_check_after_start_runs_on_idle_turns_and_once_a_second_under_load(core: Core, clock: Clock,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    slices: list[float] = []
    monkeypatch.setattr(core, "verify_files", lambda budget: slices.append(clock.now) or 0)
    reaper.run_due(core, clock.now, idle=True)
    assert slices == [T0]  # an idle turn: a slice
    for step in range(1, 10):  # calls keep the loop busy: no slice for a second
        clock.now = T0 + step * 0.1
        reaper.run_due(core, clock.now, idle=False)
    assert slices == [T0]
    clock.now = T0 + reaper.VERIFY_UNDER_LOAD_S
    reaper.run_due(core, clock.now, idle=False)
    assert slices == [T0, T0 + reaper.VERIFY_UNDER_LOAD_S]  # ... then one, so the check ends
