"""`memoryd bench` says what it measured (issue 41): a closing line counting the rows met and
missed, the host's CPUs and load average before and after, and a warning when the load says other
work shared the cores (wall-clock latencies then include it)."""

from __future__ import annotations

import os

from memoryd.bench.run import BUSY_LOAD_PER_CPU, summary_lines, verdict


def test_counts_rows_and_warns_only_on_a_busy_host() -> None:
    rows = [{"metric": "a", "met": True}, {"metric": "b", "met": False}, {"metric": "c", "met": True}]
    cpus = os.cpu_count() or 1
    idle = verdict(rows, [0.1, 0.1, 0.1], [0.2, 0.1, 0.1])  # type: ignore[arg-type]
    assert (idle["met"], idle["missed"], idle["host"]["cpus"], idle["host"]["busy"]) == (2, 1, cpus, False)
    lines = summary_lines(idle)
    assert lines == [f"2 rows met their target, 1 missed; host: {cpus} CPUs, load average 0.1/0.1/0.1 before, "
                     "0.2/0.1/0.1 after"]
    busy = verdict(rows, [0.1, 0.1, 0.1], [BUSY_LOAD_PER_CPU * cpus + 0.5, 1.0, 1.0])  # type: ignore[arg-type]
    assert busy["host"]["busy"] and summary_lines(busy)[-1].startswith("warning: the host was busy")
