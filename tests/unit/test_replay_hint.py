"""A start without a checkpoint notes the record ids the last run's events name (temp files it
may roll forward) from the last `daemon_start` on, found by a byte search of the newest segment,
instead of scanning every event of the log for ids only to drop them at the next start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.episodes.tools import write_episode
from memoryd.daemon.storage import eventlog
from memoryd.daemon.storage.eventlog import EventLog


def _log(root: Path, events: list[dict[str, object]]) -> EventLog:
    log = EventLog(root / "events")
    log.replay(lambda event: None)
    for event in events:
        log.append({"ts": "2026-12-02T00:00:00.000Z", **event})
    log.flush()
    log.close()
    return log


def test_the_hint_is_the_last_whole_daemon_start_and_never_a_value_or_the_last_line(tmp_path: Path) -> None:
    log = _log(tmp_path / "a", [{"kind": "daemon_start"}, {"kind": "write"}, {"kind": "daemon_start"},
                                {"kind": "write", "note": '"kind":"daemon_start"'}, {"kind": "recovery"}])
    assert log.last_seq_of("daemon_start") == 3
    assert _log(tmp_path / "b", [{"kind": "write"}, {"kind": "daemon_start"}]).last_seq_of("daemon_start") == 0
    assert _log(tmp_path / "c", [{"kind": "write"}]).last_seq_of("daemon_start") == 0
    assert EventLog(tmp_path / "none").last_seq_of("daemon_start") == 0


def test_the_search_stops_a_window_back_from_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(tmp_path, [{"kind": "daemon_start"}] + [{"kind": "write", "n": n} for n in range(20)])
    monkeypatch.setattr(eventlog, "HINT_WINDOW", 1000)  # a few lines: the start is further back
    assert log.last_seq_of("daemon_start") == 0
    monkeypatch.setattr(eventlog, "HINT_WINDOW", 1 << 20)
    assert log.last_seq_of("daemon_start") == 1


def test_a_crashed_run_after_earlier_ones_still_has_its_temp_file_rolled_forward(tmp_path: Path) -> None:
    root = tmp_path / "s"
    for run in range(3):  # three runs of the daemon, each writing an episode and stopping cleanly
        core = Core(root, Config())
        core.open()
        session = core.start_session({"worktree": "/w"}, f"c{run}")
        written = write_episode(core, session, f"step {run}", f"takeaway {run}", [], None, None)["id"]
        core.sync()
        core.log.close()
    crashed = core.journal.path_of(core.journal.by_id[written])  # flushed and logged, not renamed
    temp = crashed.with_name(f".tmp-{crashed.name}.0a1b2c3d")
    crashed.rename(temp)
    for cache in (root / "state").iterdir():
        cache.unlink()
    started = [e["seq"] for e in _events(root) if e["kind"] == "daemon_start"]
    cold = Core(root, Config())
    report = cold.open()
    assert cold.run_ids_from == started[-1] and len(started) == 3
    assert report["temp_files_rolled_forward"] == 1 and crashed.exists() and not temp.exists()
    assert cold.journal.by_id[written].takeaway == "takeaway 2"


def _events(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for path in sorted((root / "events").glob("*.jsonl"))
            for line in path.read_text().splitlines()]
