"""The encoder thread hands its free heap back when it goes idle after work, not on every wake-up
and not while it has work (memories/semantic.py, `_release_free_memory`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from memoryd.daemon.memories import semantic


def test_free_memory_is_handed_back_once_per_idle_spell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trims: list[float] = []
    monkeypatch.setattr(semantic, "_release_free_memory", lambda: trims.append(time.monotonic()))
    monkeypatch.setattr(semantic, "TRIM_EVERY_S", 0.3)
    vectors = semantic.Semantic(tmp_path / "vectors.bin", lambda path, data: None)
    batches: list[list[str]] = []

    def run() -> None:
        todo = [("m1", "t1", "backlog text")]
        while (batch := vectors._next_batch(todo)) is not None:
            batches.append([memory_id for memory_id, _, _ in batch])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while len(trims) < 1 and time.monotonic() < deadline:  # the backlog done: idle, trimmed at once
        time.sleep(0.01)
    assert batches == [["m1"]] and len(trims) == 1
    time.sleep(0.5)
    assert len(trims) == 1, "an idle thread with nothing new to hand back does not trim again"
    vectors._inbox.put(("m2", "t2", "a change"))
    while len(trims) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert batches == [["m1"], ["m2"]] and len(trims) == 2
    assert trims[1] - trims[0] >= 0.3, "at most once every TRIM_EVERY_S"
    vectors._inbox.put(None)
    thread.join(5)
    assert not thread.is_alive()
