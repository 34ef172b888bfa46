"""The side-by-side row with a peer server (issue 42) is opt-in: without `MEMORYD_BENCH_PEER` the
bench prints it as not measured, says how to enable it, and counts it neither met nor missed.
Nothing here runs the peer or a daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.bench import peer
from memoryd.bench.run import render, summary_lines, verdict

OURS = {"metric": "8 agents, durable writes", "size": "2000 writes", "value": 5000, "unit": "writes/s",
        "lost": 0, "target": ">= 1,000/s, 0 lost", "met": True}


def test_without_the_env_var_the_row_is_not_measured_and_says_how_to_enable_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(peer.PEER_ENV, raising=False)
    [side] = peer.side_by_side(None, OURS, quick=True)  # type: ignore[arg-type]  # the box is never used
    assert side["metric"] == peer.METRIC and side["met"] is None and side["value"] == "not measured"
    assert peer.PEER_ENV in side["reason"] and "pip install bettermemory==8.0.0" in side["reason"]

    found = verdict([OURS, side], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1])
    assert (found["met"], found["missed"]) == (1, 0)
    assert found["not_measured"] == [{"metric": peer.METRIC, "reason": side["reason"]}]
    lines = summary_lines(found)
    assert lines[0].startswith("1 rows met their target, 0 missed;")
    assert lines[1] == f"not measured: {peer.METRIC}: {side['reason']}"

    table = render([OURS, side]).splitlines()
    assert table[2].startswith(peer.METRIC) and table[2].endswith(" -") and "not measured" in table[2]


def test_a_peer_path_that_is_not_executable_is_not_measured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "bettermemory"
    monkeypatch.setenv(peer.PEER_ENV, str(missing))
    [side] = peer.side_by_side(None, OURS, quick=True)  # type: ignore[arg-type]
    assert side["met"] is None and str(missing) in side["reason"]
    assert verdict([side], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1])["missed"] == 0

