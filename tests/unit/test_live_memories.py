"""The live-memory map keeps the digest's aggregates exact through inserts, overwrites, deletes."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.daemon.memories.live import LiveMemories


@dataclass(frozen=True)
class M:
    id: str
    category: str
    project: str | None
    updated: str
    created: str = ""


def live() -> LiveMemories:
    return LiveMemories(lambda m: m.project)


def test_counts_follow_inserts_overwrites_and_deletes() -> None:
    memories = live()
    memories["a"] = M("a", "fact", "alpha", "1")
    memories["b"] = M("b", "fact", "beta", "2")
    memories["a"] = M("a", "ambient", "beta", "3")  # an update that moves category and project
    assert memories.by_category == {"fact": 1, "ambient": 1}
    assert memories.by_project == {"beta": 2}
    memories.pop("b")
    del memories["a"]
    assert memories.by_category == {} and memories.by_project == {} and len(memories) == 0


def test_newest_first_yields_each_live_memory_once_latest_write_first() -> None:
    memories = live()
    for i, key in enumerate("abc"):
        memories[key] = M(key, "fact", None, str(i))
    memories["a"] = M("a", "fact", None, "9")
    del memories["b"]
    assert [m.id for m in memories.newest_first()] == ["a", "c"]


def test_newest_handoff_per_project_survives_removal_of_the_newest() -> None:
    memories = live()
    memories["h1"] = M("h1", "handoff", "alpha", "1", created="1")
    memories["h2"] = M("h2", "handoff", "alpha", "2", created="2")
    assert memories.newest_handoffs()["alpha"].id == "h2"
    del memories["h2"]
    assert memories.newest_handoffs()["alpha"].id == "h1"


def test_per_project_category_counts_follow_every_change() -> None:
    import random
    from collections import Counter

    rng = random.Random(3)
    memories = live()
    for step in range(400):
        key = f"m{rng.randrange(60)}"
        if key in memories and rng.random() < 0.3:
            del memories[key]
        else:
            memories[key] = M(key, rng.choice(["fact", "handoff", "ambient"]), rng.choice(["a", "b", None]),
                              str(step))
        expected = Counter((m.project or "(none)", m.category) for m in memories.values())
        assert memories.by_project_category == expected
