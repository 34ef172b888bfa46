"""Fused search's order (memories/reads.fused_order): equal fused scores put the newer `updated`
first, then the larger id — what docs/tools.md says and the lexical ranking does (issue 40: it
broke ties older-first)."""

from __future__ import annotations

from memoryd.daemon.memories.reads import fused_order
from memoryd.daemon.memories.records import Memory


def memory(memory_id: str, updated: str) -> Memory:
    return Memory(id=memory_id, content="x", scopes=("topic:a",), category="fact", confidence="medium",
                  source="explicit-statement", created="2026-01-01T00:00:00.000Z", updated=updated,
                  session_id=None, origin={})


def test_ties_go_to_the_newer_update_then_the_larger_id() -> None:
    older, newer, same_a, same_b = "01J0000000000000000000000A", "01J0000000000000000000000B", \
        "01J0000000000000000000000C", "01J0000000000000000000000D"
    live = {older: memory(older, "2026-03-01T00:00:00.000Z"), newer: memory(newer, "2026-02-01T00:00:00.000Z"),
            same_a: memory(same_a, "2026-01-01T00:00:00.000Z"), same_b: memory(same_b, "2026-01-01T00:00:00.000Z")}
    fused = {older: 0.5, newer: 0.5, same_a: 0.25, same_b: 0.25}
    # `older` has the smaller id but the newer update: it comes first
    assert fused_order(fused, live, 4) == [older, newer, same_b, same_a]
    assert fused_order({**fused, same_a: 0.9}, live, 2) == [same_a, older]
