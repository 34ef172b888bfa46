"""The prompt hook's follow-up pointer (hooks/disclosure.py): a prompt that earned a memory or a
pointer gets one more pointer, to the next of the first three hits close enough in meaning; a
prompt that earned nothing stays silent, whatever its other hits."""

from __future__ import annotations

from typing import Any

from memoryd.config import Config
from memoryd.hooks.disclosure import choose

SETTINGS = Config().hook_settings()


def hit(n: int, similarity: float, relevance: float = 0.1) -> dict[str, Any]:
    return {"id": f"m{n}", "similarity": similarity, "relevance": relevance}


def ids(chosen: list[dict[str, Any]]) -> list[str]:
    return [h["id"] for h in chosen]


def test_a_memory_shown_in_full_brings_one_pointer_to_the_next_close_hit() -> None:
    full, pointed = choose([hit(1, 0.72), hit(2, 0.30), hit(3, 0.41), hit(4, 0.39)], SETTINGS)
    assert ids(full) == ["m1"] and ids(pointed) == ["m3"]  # the next at 0.35 or more, one only


def test_a_pointer_brings_one_more_and_no_hit_below_the_third_is_looked_at() -> None:
    full, pointed = choose([hit(1, 0.52), hit(2, 0.36), hit(3, 0.2)], SETTINGS)
    assert full == [] and ids(pointed) == ["m1", "m2"]
    _, pointed = choose([hit(1, 0.52), hit(2, 0.2), hit(3, 0.2), hit(4, 0.5)], SETTINGS)
    assert ids(pointed) == ["m1"]


def test_a_prompt_that_earned_nothing_stays_silent() -> None:
    assert choose([hit(1, 0.45), hit(2, 0.44), hit(3, 0.43)], SETTINGS) == ([], [])


def test_the_follow_up_is_a_setting_that_can_be_turned_off() -> None:
    off = {**SETTINGS, "pointer_follow_similarity": 1.1}
    assert choose([hit(1, 0.72), hit(2, 0.5)], off) == ([hit(1, 0.72)], [])
