"""A warm start builds the memory tier in bulk, by column (docs/storage.md): the records, counts
and indexes it makes must be exactly what one record at a time makes."""

from __future__ import annotations

import dataclasses
import random

import pytest

from memoryd.daemon.memories import parse_cache as cache
from memoryd.daemon.memories.index import LiveIndex
from memoryd.daemon.memories.live import LiveMemories
from memoryd.daemon.memories.records import HANDOFF, Memory, RowTables
from memoryd.daemon.memories.recovery import _from_columns

CATEGORIES = ("fact", "decision", "ambient", HANDOFF)


def _memories(rng: random.Random, n: int, repos: int) -> list[Memory]:
    """`n` records in id order over `repos` repos, with links, handoffs, tombstones and shared
    scope lists and origins, as a cache holds them."""
    scopes = [("projects:alpha",), ("projects:beta", "team:x"), ("notes",), ()]
    origins = [{"worktree": f"/w/{i % 3}", "repo": f"/repo/{i}" if i else None, "project": f"p{i % 4}",
                "branch": None, "commit": None, "client": None} for i in range(repos)]
    out = []
    for i in range(n):
        stamp = f"2026-01-{1 + rng.randrange(28):02d}T00:00:00.000Z"
        memory = Memory(f"01J{i:023d}", f"record {i} text", rng.choice(scopes), rng.choice(CATEGORIES),
                        "high", "inferred", stamp, stamp if rng.random() < 0.7 else "2026-02-01T00:00:00.000Z",
                        rng.choice(["sess-1", "sess-2", None]), rng.choice(origins),
                        links=({"type": "extends", "target_id": out[-1].id},) if out and rng.random() < 0.2 else (),
                        tainted=rng.random() < 0.1,
                        removed_at="2026-03-01T00:00:00.000Z" if rng.random() < 0.1 else None)
        out.append(memory)
    return out


def _columns(memories: list[Memory]) -> tuple[tuple[object, ...], ...]:
    raw = cache.encode([(f"{'m' if m.removed_at is None else 't'}/{m.id}.md", (len(m.content), i), m, "a" * 64)
                        for i, m in enumerate(memories)], "gen")
    rows, _, gen = cache.read(raw)
    assert isinstance(rows, cache.ColumnRows) and gen == "gen" and len(rows) == len(memories)
    return rows.columns


@pytest.mark.parametrize("repos", [1, 5, 12])
def test_records_counts_and_indexes_built_by_column_equal_those_built_one_at_a_time(repos: int) -> None:
    memories = _memories(random.Random(repos), 400, repos)
    raw = cache.encode([(f"{'m' if m.removed_at is None else 't'}/{m.id}.md", (1, 2), m, "a" * 64)
                        for m in memories], "gen")
    rows, tables, _ = cache.read(raw)
    assert isinstance(rows, cache.ColumnRows)
    by_column = tables.from_columns(rows.columns[4:])
    assert by_column == [tables.from_row(row[4:]) for row in rows.values()] == memories

    live = [m for m in by_column if m.removed_at is None]

    def project_of(m: Memory) -> str | None:
        return next((s.split(":")[1] for s in m.scopes if s.startswith("projects:")), None)
    bulk, single = LiveMemories(project_of), LiveMemories(project_of)
    bulk.load(live)
    bulk.sort_by_updated()
    for memory in live:
        single[memory.id] = memory
    single.sort_by_updated()
    assert dict(bulk) == dict(single) and bulk._order == single._order
    assert bulk._order == sorted(live_ids := [m.id for m in live], key=lambda i: single[i].updated)  # stable
    assert len(live_ids) == len(set(live_ids))
    for name in ("by_category", "by_project", "by_project_category", "handoffs"):
        assert getattr(bulk, name) == getattr(single, name), name

    index_bulk, index_single = LiveIndex(), LiveIndex()
    index_bulk.load(live)
    for memory in live:
        index_single.add(memory, text=False)
    for name in ("by_repo", "order", "backlinks", "projects", "handoffs"):
        assert getattr(index_bulk, name) == getattr(index_single, name), name


def test_a_column_that_does_not_match_its_key_or_type_is_refused() -> None:
    memories = _memories(random.Random(7), 20, 2)
    columns = _columns(memories)
    tables = RowTables(*_tables(memories))
    assert _from_columns(columns, tables) is not None
    keys = list(columns[0])
    keys[0], keys[1] = keys[1], keys[0]  # a row under another record's name
    assert _from_columns((tuple(keys), *columns[1:]), tables) is None
    kind = [k.replace("m/", "t/") for k in columns[0]]  # a live record named as a tombstone
    assert _from_columns((tuple(kind), *columns[1:]), tables) is None
    sizes = (*columns[1][:-1], "12")  # a size that is not a number
    assert _from_columns((columns[0], sizes, *columns[2:]), tables) is None
    content = list(columns[5])
    content[3] = 42
    with pytest.raises(TypeError):
        _from_columns((*columns[:5], tuple(content), *columns[6:]), tables)


def _tables(memories: list[Memory]) -> tuple[list[object], list[object]]:
    tables = RowTables()
    for memory in memories:
        tables.to_row(memory)
    return tables.scopes, tables.origins


def test_a_record_with_every_field_set_comes_back_whole_by_column() -> None:
    memory = Memory("01J00000000000000000000000", "text", ("projects:x",), "fact", "high", "inferred",
                    "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "sess-1", {"repo": "/r"},
                    last_verified_at="2026-01-02T00:00:00.000Z", verified_paths=("a.py",), verified_commits=("abc",),
                    verification_note="ok", links=({"type": "extends", "target_id": "01J00000000000000000000001"},),
                    tainted=True, taint=("role-prefix",), anchor_session_id="sess-1",
                    removed_at="2026-01-03T00:00:00.000Z", removed_reason="old")
    plain = dataclasses.replace(memory, id="01J00000000000000000000002", removed_at=None, removed_reason=None)
    columns = _columns([memory, plain])
    back = _from_columns(columns, RowTables(*_tables([memory, plain])))
    assert back is not None and back[0] == [memory, plain] and back[2] == [(4, 0), (4, 1)]
    assert back[0][1].repo == "/r"
