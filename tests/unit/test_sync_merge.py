"""The sync merge rule (daemon/sync/merge.py): deterministic, symmetric, never loses a version."""

from __future__ import annotations

import itertools

from memoryd.daemon.memories.records import Memory, render_memory
from memoryd.daemon.sync.layout import LIVE, TOMB
from memoryd.daemon.sync.merge import Version, pick, stamp_of, three_way

ID = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def version(content: str, updated: str, removed_at: str | None = None) -> Version:
    memory = Memory(id=ID, content=content, scopes=("projects:x",), category="fact", confidence="medium",
                    source="explicit-statement", created="2026-01-01T00:00:00.000Z", updated=updated,
                    session_id="sess-1", origin={}, removed_at=removed_at,
                    removed_reason="gone" if removed_at else None)
    return Version(TOMB if removed_at else LIVE, render_memory(memory))


def test_the_newer_update_wins_whichever_side_asks() -> None:
    old = version("Port 5432.", "2026-02-01T10:00:00.000Z")
    new = version("Port 5433.", "2026-02-01T10:00:00.001Z")
    for a, b in ((old, new), (new, old)):
        decision = pick(a, b)
        assert decision.winner is new and decision.loser is old and decision.rule == "newer"


def test_equal_stamps_are_broken_by_the_sha_the_same_way_on_every_machine() -> None:
    a = version("Port 5432.", "2026-02-01T10:00:00.000Z")
    b = version("Port 5433.", "2026-02-01T10:00:00.000Z")
    first, second = pick(a, b), pick(b, a)
    assert first.winner is second.winner and first.rule == second.rule == "sha"
    assert first.winner.sha == max(a.sha, b.sha)


def test_a_remove_against_an_update_is_decided_by_removed_at_against_updated() -> None:
    updated = version("Port 5433.", "2026-02-01T10:00:05.000Z")
    removed_before = version("Port 5432.", "2026-02-01T09:00:00.000Z", removed_at="2026-02-01T10:00:01.000Z")
    removed_after = version("Port 5432.", "2026-02-01T09:00:00.000Z", removed_at="2026-02-01T10:00:09.000Z")
    assert pick(updated, removed_before).winner is updated
    assert pick(removed_after, updated).winner is removed_after
    assert stamp_of(TOMB, removed_after.data) == "2026-02-01T10:00:09.000Z"


def test_an_unparseable_version_loses_to_any_record() -> None:
    good = version("Port 5433.", "2020-01-01T00:00:00.000Z")
    junk = Version(LIVE, b"not a record")
    assert pick(junk, good).winner is good and pick(good, junk).winner is good


def test_the_rule_is_a_total_order_so_three_machines_agree_in_any_order() -> None:
    versions = [version(f"Port {n}.", f"2026-02-01T10:00:0{n % 3}.000Z") for n in range(6)]
    winners = set()
    for order in itertools.permutations(versions):
        best = order[0]
        for other in order[1:]:
            best = pick(best, other).winner
        winners.add(best.sha)
    assert len(winners) == 1


def test_three_way_takes_the_side_that_changed() -> None:
    assert three_way("b", "b", "b") == "same"
    assert three_way("b", "o", "o") == "same"
    assert three_way("b", "b", "t") == "theirs"
    assert three_way("b", "o", "b") == "ours"
    assert three_way("b", "o", "t") == "conflict"
    assert three_way(None, "o", None) == "ours" and three_way(None, None, "t") == "theirs"
