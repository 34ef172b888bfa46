"""A derived cache of parsed memory files (`state/memories.cache`), so a start with 100k memories
does not re-read and re-parse 100k YAML frontmatters (docs/benchmark.md).

Import contract: msgpack, store, records. The cache is only ever a shortcut: an entry is used for
a file still listed under its name, and the file's size and mtime are compared with the entry
after start, a slice at a time (`verify.verify_some`), so a hand edit made while the daemon was
stopped is still found; an unreadable cache is ignored. msgpack rather than pickle: a planted
cache must not execute code.

Format: msgpack `{"v": 3, "gen": <random hex>, "scopes": [...], "origins": [...], "columns": [keys,
sizes, mtime_ns, sha256s of the files, *one column per memory field]}` with key `m/<file>`
(memories) or `t/<file>` (tombstones), the fields of `records.ROW_FIELDS`, and scopes and origin
as numbers into the two tables, so loading is one decode and one constructor call per memory, not
a frontmatter check. Format 2 held the same values as one row per record. `gen` names
this save: a checkpoint that names it vouches that the cache lists every record file the daemon
knew at that clean stop (docs/storage.md, 'Recovery at start').
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon.identity import idents
from memoryd.daemon.memories.records import ROW_FIELDS, Memory, RowTables
from memoryd.daemon.storage import nofollow

CACHE_NAME = "memories.cache"
CACHE_VERSION = 4  # 4: `pinned` is the last column; a 3 gets a column of False (nothing was pinned)
_SCOPES, _ORIGIN = (4 + ROW_FIELDS.index(name) for name in ("scopes", "origin"))  # their columns


def read(path: Path) -> tuple[Mapping[str, tuple[Any, ...]], RowTables, str | None]:
    """The cache's rows by key, the tables their scopes and origins point into, and the save's
    `gen`; empty when absent, unreadable or of another version."""
    try:
        raw = nofollow.read_nofollow(path)
    except (OSError, ValueError):  # ValueError: LinkRefused, a planted link is never read
        return {}, RowTables(), None
    return decode(raw)


def decode(raw: bytes) -> tuple[Mapping[str, tuple[Any, ...]], RowTables, str | None]:
    """`read` of the cache's bytes. Arrays decode as tuples: a record's list fields are tuples
    (`records.Memory`), and every empty one is then the shared `()`, not a new list. Format 4's
    rows stay columns (`ColumnRows`); formats 3 (columns without `pinned`) and 2 (a row per
    record) are still read, so the first start after an upgrade parses nothing."""
    try:
        data = msgpack.unpackb(raw, raw=False, use_list=False)
        if not isinstance(data, dict) or data.get("v") not in (2, 3, CACHE_VERSION):
            return {}, RowTables(), None
        tables = RowTables(data["scopes"], data["origins"])
        if data["v"] in (3, CACHE_VERSION):
            columns = data["columns"]
            if data["v"] == 3 and isinstance(columns, tuple) and columns:
                columns = (*columns, (False,) * len(columns[0]))
            rows = ColumnRows(columns)
            gen = data.get("gen")
            return rows, tables, gen if type(gen) is str and rows.complete else None
        listed = data["rows"]
        if not isinstance(listed, tuple):
            return {}, RowTables(), None
    except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException):
        return {}, RowTables(), None
    del data
    by_key = {row[0]: (*row, False) for row in listed
              if isinstance(row, tuple) and len(row) > 4 and isinstance(row[0], str)}
    return by_key, tables, None  # no gen: rewritten (as format 4) at the next stop


class ColumnRows(Mapping[str, tuple[Any, ...]]):
    """Format 3's rows (key, size, mtime_ns, sha256, then `records.ROW_FIELDS`), kept as the
    columns they were stored in: a start that trusts the cache makes its records from the
    columns at C speed (`recovery._load_cached`; one row at a time is slower, docs/benchmark.md); the
    rows by key are made only if the folders are listed."""

    def __init__(self, columns: Any) -> None:
        if not (isinstance(columns, tuple) and len(columns) == 4 + len(ROW_FIELDS)
                and all(isinstance(c, tuple) for c in columns) and len({len(c) for c in columns}) == 1):
            raise ValueError("the cache's columns do not match this version")
        self.columns: tuple[tuple[Any, ...], ...] = columns
        keys = columns[0]
        # every key a distinct string: each row is then one entry (a gen is trusted only then)
        self.complete = idents.all_of_type(keys, str) and len(set(keys)) == len(keys)
        self._by_key: dict[str, tuple[Any, ...]] | None = None

    def groups(self) -> list[tuple[Any, Any]]:
        """Per row, its scopes' and origin's numbers in the tables: equal for exactly the rows
        whose records share both objects (`stats.LiveMemories.load`)."""
        return list(zip(self.columns[_SCOPES], self.columns[_ORIGIN]))

    def rows(self) -> dict[str, tuple[Any, ...]]:
        if self._by_key is None:
            self._by_key = {row[0]: row for row in zip(*self.columns) if isinstance(row[0], str)}
        return self._by_key

    def __getitem__(self, key: str) -> tuple[Any, ...]:
        return self.rows()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows())

    def __len__(self) -> int:
        return len(self.columns[0]) if self.complete else len(self.rows())


def encode(entries: Iterable[tuple[str, tuple[int, int], Memory, str]], gen: str) -> bytes:
    """The cache file's bytes: one row per (key, (size, mtime_ns) of the file when it was written
    or read, memory, sha256). The stat must be taken then, not when the cache is saved: a hand
    edit in between would otherwise be cached under the old content and go unnoticed.

    Stored by column, not by row: decoding then allocates what a start keeps (the records'
    contents, ids, stamps) apart from what it drops (keys, shas, the rows), so the freed memory
    is whole arenas the allocator can return. By row, a 100k start kept ~60 MB more RSS."""
    tables = RowTables()
    rows = [(key, stat[0], stat[1], sha, *tables.to_row(memory)) for key, stat, memory, sha in entries]
    columns = list(zip(*rows)) if rows else [()] * (4 + len(ROW_FIELDS))
    packed: bytes = msgpack.packb({"v": CACHE_VERSION, "gen": gen, "scopes": tables.scopes,
                                   "origins": tables.origins, "columns": columns}, use_bin_type=True)
    return packed


# -- the search index snapshot (`state/search.index`) ----------------------------------------------
# Rebuilding the BM25 indexes means analyzing every memory again: the largest part of a warm start
# at 100k memories. The snapshot is trusted only when its header names this format, this analyzer
# and the fingerprint of the record files loaded now (every id with its file's sha256), so a
# crash, a hand edit, a restore from backup or a new analyzer all mean a rebuild, never a stale
# index. msgpack, read with O_NOFOLLOW, for the same reasons as the parse cache.

INDEX_NAME = "search.index"
INDEX_VERSION = 3  # 3: content postings as one blob (search/postings.py, `_columns`)
_MAX_INDEX_BYTES = 2 * 1024 * 1024 * 1024


def encode_index(header: dict[str, Any], live: dict[str, Any], tombs: dict[str, Any]) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack({"v": INDEX_VERSION, **header}) + packer.pack([live, tombs])
    return packed


def read_index(path: Path | bytes, header: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The (live, tombstone) index states stored at `path` if its header has this version and
    every field of `header`; None when absent, unreadable, of another version or describing
    other files."""
    try:
        with (io.BytesIO(path) if isinstance(path, bytes)  # a start helper's snapshot
              else os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")) as file:
            unpacker = msgpack.Unpacker(file, raw=False, max_buffer_size=_MAX_INDEX_BYTES)
            stored = next(unpacker)
            expected = {"v": INDEX_VERSION, **header}
            if not isinstance(stored, dict) or any(stored.get(k) != v for k, v in expected.items()):
                return None
            live, tombs = next(unpacker)
    except (OSError, StopIteration, ValueError, TypeError, msgpack.UnpackException):
        return None
    if not (isinstance(live, dict) and isinstance(tombs, dict)):
        return None
    return live, tombs
