"""The derived caches of start-up: parsed memory files (`state/memories.cache`) and the search index snapshot
(`state/search.index`); formats and trust rules: docs/storage.md, "Caches in `state/`". Import contract:
msgpack, store, records."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon.identity import idents
from memoryd.daemon.memories.records import ROW_FIELDS, Memory, RowTables
from memoryd.daemon.storage import nofollow

CACHE_NAME = "memories.cache"
CACHE_VERSION = 4  # 4: `pinned` is the last column
_SCOPES, _ORIGIN = (4 + ROW_FIELDS.index(name) for name in ("scopes", "origin"))  # their columns


def read(source: Path | bytes) -> tuple[Mapping[str, tuple[Any, ...]], RowTables, str | None]:
    """The cache's rows by key, their tables and the save's `gen`, from its file (a link is never read) or bytes;
    empty when absent, unreadable or of an older format. Arrays decode as tuples (every empty one the shared `()`)."""
    try:
        raw = source if isinstance(source, bytes) else nofollow.read_nofollow(source)
        data = msgpack.unpackb(raw, raw=False, use_list=False)
        if not isinstance(data, dict) or data.get("v") != CACHE_VERSION:
            return {}, RowTables(), None
        tables = RowTables(data["scopes"], data["origins"])
        rows = ColumnRows(data["columns"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException):
        return {}, RowTables(), None
    gen = data.get("gen")
    return rows, tables, gen if type(gen) is str and rows.complete else None


class ColumnRows(Mapping[str, tuple[Any, ...]]):
    """The rows (key, size, mtime_ns, sha256, then `records.ROW_FIELDS`) kept as stored columns;
    the rows by key are made only if the folders are listed."""

    def __init__(self, columns: Any) -> None:
        if not (isinstance(columns, tuple) and len(columns) == 4 + len(ROW_FIELDS)
                and all(isinstance(c, tuple) for c in columns) and len({len(c) for c in columns}) == 1):
            raise ValueError("the cache's columns do not match this version")
        self.columns: tuple[tuple[Any, ...], ...] = columns
        keys = columns[0]
        self.complete = idents.all_of_type(keys, str) and len(set(keys)) == len(keys)

    def groups(self) -> list[tuple[Any, Any]]:
        """Per row, its scopes' and origin's numbers (`LiveMemories.load`'s groups)."""
        return list(zip(self.columns[_SCOPES], self.columns[_ORIGIN]))

    @cached_property
    def rows(self) -> dict[str, tuple[Any, ...]]:
        return {row[0]: row for row in zip(*self.columns) if isinstance(row[0], str)}

    def __getitem__(self, key: str) -> tuple[Any, ...]:
        return self.rows[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.columns[0]) if self.complete else len(self.rows)


def encode(entries: Iterable[tuple[str, tuple[int, int], Memory, str]], gen: str) -> bytes:
    """The cache file's bytes: per (key, (size, mtime_ns) taken when the file was written or read,
    memory, sha256), by column (why: docs/storage.md, "Caches in `state/`")."""
    tables = RowTables()
    rows = [(key, stat[0], stat[1], sha, *tables.to_row(memory)) for key, stat, memory, sha in entries]
    columns = list(zip(*rows)) if rows else [()] * (4 + len(ROW_FIELDS))
    packed: bytes = msgpack.packb({"v": CACHE_VERSION, "gen": gen, "scopes": tables.scopes,
                                   "origins": tables.origins, "columns": columns}, use_bin_type=True)
    return packed


INDEX_NAME = "search.index"
INDEX_VERSION = 3  # 3: content postings as one blob (search/postings.py, `_columns`)
_MAX_INDEX_BYTES = 2 * 1024 * 1024 * 1024


def encode_index(header: dict[str, Any], live: dict[str, Any], tombs: dict[str, Any]) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack({"v": INDEX_VERSION, **header}) + packer.pack([live, tombs])
    return packed


def read_index(path: Path | bytes, header: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The (live, tombstone) index states at `path` (or in these bytes) if stored with this version and `header`."""
    try:
        with (io.BytesIO(path) if isinstance(path, bytes)
              else os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")) as file:
            unpacker = msgpack.Unpacker(file, raw=False, max_buffer_size=_MAX_INDEX_BYTES)
            stored = next(unpacker)
            expected = {"v": INDEX_VERSION, **header}
            if not isinstance(stored, dict) or any(stored.get(k) != v for k, v in expected.items()):
                return None
            live, tombs = next(unpacker)
    except (OSError, StopIteration, ValueError, TypeError, msgpack.UnpackException):
        return None
    return (live, tombs) if isinstance(live, dict) and isinstance(tombs, dict) else None
