"""Fused search's order (search/fusion.fused_order): the best fused score first; a tie — common,
as ranked 1st by words and 2nd by meaning ties 2nd and 1st — goes to the older memory (the smaller
id), as docs/tools.md says (issue 40 found the docs saying newer-first; the eval's tune split
chose older-first, docs/search.md)."""

from __future__ import annotations

from memoryd.daemon.search.fusion import fused_order


def test_the_best_fused_score_first_and_a_tie_to_the_older_memory() -> None:
    older, newer, other = "01J0000000000000000000000A", "01J0000000000000000000000B", "01J0000000000000000000000C"
    assert fused_order({newer: 1.5, older: 1.5, other: 0.75}, 3) == [older, newer, other]
    assert fused_order({newer: 1.5, older: 1.0, other: 2.0}, 2) == [other, newer]
