"""The web view without a browser: the live feed's log follower, and the UI's import contract."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from memoryd.ui.access import default_port
from memoryd.ui.feed import follow_events


def _line(seq: int, kind: str = "write") -> str:
    return json.dumps({"seq": seq, "ts": "2026-01-01T00:00:00.000Z", "kind": kind, "prev": "p", "hash": "h"}) + "\n"


def test_the_follower_gives_the_backlog_then_new_lines_whole_and_follows_a_new_segment(tmp_path: Path) -> None:
    (tmp_path / "2026-01.jsonl").write_text("".join(_line(i) for i in range(1, 31)))
    stop = threading.Event()
    feed = follow_events(tmp_path, stop, backlog=5, poll_s=0)
    first = [next(feed) for _ in range(5)]
    assert [e["seq"] for e in first] == [26, 27, 28, 29, 30]  # type: ignore[index]
    assert "prev" not in first[0] and "hash" not in first[0]  # type: ignore[operator]
    assert next(feed) is None  # nothing new yet
    with open(tmp_path / "2026-01.jsonl", "a") as handle:
        handle.write(_line(31)[:20])  # half a line: not yet
    assert next(feed) is None
    with open(tmp_path / "2026-01.jsonl", "a") as handle:
        handle.write(_line(31)[20:])
    assert next(feed)["seq"] == 31  # type: ignore[index]
    (tmp_path / "2026-02.jsonl").write_text(_line(32, "daemon_start"))
    seen = [e for e in (next(feed) for _ in range(4)) if e is not None]
    assert [e["seq"] for e in seen] == [32]
    stop.set()
    assert list(feed) in ([], [None])


def test_the_port_is_derived_from_the_uid_and_stays_in_range() -> None:
    assert default_port(0) == 47000 and default_port(1000) == 48000 and default_port(2001) == 47001


def test_the_ui_never_loads_a_daemon_module() -> None:
    probe = ("import sys, memoryd.ui.server, memoryd.cli.memories, memoryd.cli.sessions; "
             "print(sorted(m for m in sys.modules if m.startswith('memoryd.daemon')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
