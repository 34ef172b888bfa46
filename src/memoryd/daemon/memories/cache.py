"""A derived cache of parsed memory files (`state/memories.cache`), so a start with 100k memories
does not re-read and re-parse 100k YAML frontmatters (~25 s → a few seconds, most of the rest
being the search index rebuild).

Import contract: msgpack, memory_records. The cache is only ever a shortcut: an entry is used
when its file's name, size and mtime still match, anything else is parsed from the file, and an
unreadable cache is ignored. msgpack rather than pickle: a planted cache must not execute code.

Format: a msgpack stream — a header `{"v": 1}`, then one entry per record file in ascending key
order, `[key, size, mtime_ns, sha256 of the file, frontmatter mapping, body]` with key
`m/<file>` (memories) or `t/<file>` (tombstones). The reader streams it alongside the sorted
directory listing (a merge join), so the whole cache is never held in memory at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import msgpack

from memoryd.daemon.memories.records import Memory, to_meta

CACHE_NAME = "memories.cache"
CACHE_VERSION = 1
_READ_BUFFER_BYTES = 64 * 1024 * 1024  # the largest single entry the reader accepts


class CacheReader:
    """Entries looked up in ascending key order; anything unreadable ends the stream quietly."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] | None = None
        self._next: list[Any] | None = None
        try:
            # O_NOFOLLOW: a planted symlink is no cache. Held across lookups; close() ends it.
            self._file = os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")
        except OSError:
            return
        self._entries = msgpack.Unpacker(self._file, raw=False, max_buffer_size=_READ_BUFFER_BYTES)
        header = self._read()
        if isinstance(header, dict) and header.get("v") == CACHE_VERSION:
            self._advance()

    def _read(self) -> Any:
        try:
            return next(self._entries)
        except (StopIteration, ValueError, msgpack.UnpackException, TypeError):
            return None

    def _advance(self) -> None:
        entry = self._read()
        ok = isinstance(entry, list) and len(entry) == 6 and isinstance(entry[0], str)
        self._next = entry if ok else None

    def lookup(self, key: str, stat: os.stat_result) -> tuple[dict[str, Any], str, str] | None:
        """(frontmatter, body, sha) when the cache still describes this file exactly."""
        while self._next is not None and self._next[0] < key:
            self._advance()
        entry = self._next
        if entry is None or entry[0] != key:
            return None
        self._advance()
        _, size, mtime_ns, sha, meta, body = entry
        if size != stat.st_size or mtime_ns != stat.st_mtime_ns:
            return None
        if not (isinstance(meta, dict) and isinstance(sha, str) and isinstance(body, str)):
            return None
        return meta, body, sha

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def entry_for(key: str, stat: tuple[int, int], memory: Memory, sha: str) -> list[Any]:
    """A cache entry for a record whose file had `stat` (size, mtime_ns) when it was written or read.

    The stat must be taken then, not when the cache is saved: a hand edit in between would
    otherwise be cached under the old content and go unnoticed at the next start.
    """
    return [key, stat[0], stat[1], sha, to_meta(memory), memory.content]


def encode(entries: Iterable[list[Any]]) -> bytes:
    """The cache file's bytes; `entries` must come in ascending key order."""
    packer = msgpack.Packer(use_bin_type=True)
    return packer.pack({"v": CACHE_VERSION}) + b"".join(packer.pack(entry) for entry in entries)  # type: ignore[no-any-return]


# -- the search index snapshot (`state/search.index`) ----------------------------------------------
# Rebuilding the BM25 indexes means analyzing every memory again: the largest part of a warm start
# at 100k memories. The snapshot is trusted only when its header names this format, this analyzer
# and the fingerprint of the record files loaded now (every id with its file's sha256), so a
# crash, a hand edit, a restore from backup or a new analyzer all mean a rebuild, never a stale
# index. msgpack, read with O_NOFOLLOW, for the same reasons as the parse cache.

INDEX_NAME = "search.index"
INDEX_VERSION = 1
_MAX_INDEX_BYTES = 2 * 1024 * 1024 * 1024


def encode_index(header: dict[str, Any], live: dict[str, Any], tombs: dict[str, Any]) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    return packer.pack({"v": INDEX_VERSION, **header}) + packer.pack([live, tombs])  # type: ignore[no-any-return]


def read_index(path: Path, header: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The (live, tombstone) index states stored at `path` if its header matches `header`
    exactly; None when absent, unreadable, of another version or describing other files."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
            unpacker = msgpack.Unpacker(file, raw=False, max_buffer_size=_MAX_INDEX_BYTES)
            stored = next(unpacker)
            if stored != {"v": INDEX_VERSION, **header}:
                return None
            live, tombs = next(unpacker)
    except (OSError, StopIteration, ValueError, TypeError, msgpack.UnpackException):
        return None
    if not (isinstance(live, dict) and isinstance(tombs, dict)):
        return None
    return live, tombs
