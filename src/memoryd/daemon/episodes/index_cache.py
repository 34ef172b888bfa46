"""The episode index cache (`state/episodes.cache`, docs/storage.md): each session's summary and
its rows, which stay in the open file until decoded. Derived data: anything that does not decode
means the files are read instead (msgpack, not pickle: a planted cache must not run code).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgpack

from memoryd.daemon.storage import nofollow

CACHE_VERSION = 3


class CacheFile:
    """The index cache a start read, kept open so that packed sessions' rows (~10 MB at 88k
    episodes) stay in the page cache, not on the heap; a later save renames over it harmlessly."""

    def __init__(self, fd: int, base: int) -> None:
        self.fd, self.base = fd, base  # base: where the rows region starts

    def read(self, offset: int, length: int) -> bytes | None:
        try:
            data = os.pread(self.fd, length, self.base + offset)
        except OSError:
            return None
        return data if len(data) == length else None

    def __del__(self) -> None:
        os.close(self.fd)


@dataclass(slots=True)
class Packed:
    """A session's episodes as the cache holds them: ids, a summary, and the msgpack of their rows
    ([size, mtime_ns, created, takeaway, first_line, scopes, swarm_id, worktree], one per id) in
    `rows`, or at `span` (offset, length) of `source`, the open cache file."""
    ids: tuple[str, ...]
    newest: str
    worktrees: tuple[tuple[str | None, int], ...]  # (worktree, episodes in it): a dict each was 2 MB
    swarms: tuple[str, ...]
    rows: bytes | None
    span: tuple[int, int] = (0, 0)
    source: CacheFile | None = None

    def row_bytes(self) -> bytes | None:
        return self.rows if self.source is None else self.source.read(*self.span)

    def entries(self) -> list[tuple[str, Any]]:
        """(id, row) pairs; every row None when the rows do not decode to one per id."""
        data = self.row_bytes()
        try:
            rows = None if data is None else msgpack.unpackb(data, raw=False)
        except (ValueError, msgpack.UnpackException):
            rows = None
        if type(rows) is not list or len(rows) != len(self.ids):
            rows = [None] * len(self.ids)
        return list(zip(self.ids, rows))


# Cache format 3: this magic, the header's length (8 bytes, little-endian), the header (msgpack:
# {"v", "seq", "sessions": [[id, ids, newest, worktrees, swarms, offset, length]]}), then each
# session's rows at its offset, read only when the session is decoded.
CACHE_MAGIC = b"memoryd-episodes\n"
_HEAD = len(CACHE_MAGIC) + 8


class Listing(NamedTuple):
    """What a prefetch helper found beside the episodes it packed: session folder names, bad files
    and temp files. Only in the anonymous file a helper hands over, never in `state/`."""
    dirs: tuple[str, ...]
    bad: tuple[dict[str, str], ...]
    temp: tuple[str, ...]

    @classmethod
    def of(cls, value: Any) -> Listing:
        """The listing a helper's cache header holds; ValueError when it has another shape."""
        if type(value) is not dict:
            raise ValueError("its result holds no listing")
        dirs, bad, temp = value.get("dirs"), value.get("bad"), value.get("temp")
        if (type(dirs) is not tuple or type(bad) is not tuple or type(temp) is not tuple
                or not all(type(d) is str for d in (*dirs, *temp))
                or not all(type(b) is dict and type(b.get("path")) is str and type(b.get("reason")) is str
                           for b in bad)):
            raise ValueError("its listing has the wrong shape")
        return cls(dirs, bad, temp)


def encode_cache(log_seq: int, sessions: list[tuple[str, Packed]], listing: dict[str, Any] | None = None) -> bytes:
    """The cache file's bytes; a prefetch helper adds what it listed (`Listing`)."""
    blobs, header, offset = [], [], 0
    for session_id, packed in sessions:
        rows = packed.row_bytes()
        if rows is None:  # its rows are unreadable now: the next start reads that folder
            continue
        header.append([session_id, list(packed.ids), packed.newest, list(packed.worktrees),
                       list(packed.swarms), offset, len(rows)])
        blobs.append(rows)
        offset += len(rows)
    head = msgpack.packb({"v": CACHE_VERSION, "seq": log_seq, "sessions": header,
                          **({"listing": listing} if listing is not None else {})}, use_bin_type=True)
    return b"".join([CACHE_MAGIC, len(head).to_bytes(8, "little"), head, *blobs])


def read_cache(path: Path) -> tuple[dict[str, Packed], int | None]:
    """The index cache's header by session (entries of the wrong shape left out), and the log seq
    it was saved at; empty when missing or unreadable. Formats 1 and 2 are still read."""
    try:
        source, data = _open_cache(path)
    except (OSError, ValueError, msgpack.UnpackException):
        return {}, None
    if isinstance(data, dict) and data.get("v") == 1 and isinstance(data.get("rows"), tuple):
        data = {**data, "v": 2, "sessions": _from_version_1(data["rows"])}
    if not isinstance(data, dict) or data.get("v") != (2 if source is None else CACHE_VERSION) or \
            not isinstance(data.get("sessions"), tuple):
        return {}, None
    seq = data.get("seq")
    return sessions_of(data["sessions"], source), seq if type(seq) is int else None


def sessions_of(entries: Any, source: CacheFile | None) -> dict[str, Packed]:
    """The header's session entries that have the right shape, by session: rows inline (format 2,
    `source` None) or in `source`. Checked inline, not a call each: that was slow at 11k entries."""
    sessions = {}
    for entry in entries:
        try:
            session_id, ids, newest, worktrees, swarms, *place = entry
            if (type(ids) is not tuple or type(newest) is not str or type(swarms) is not tuple
                    or type(worktrees) is not tuple or any(type(n) is not int for _, n in worktrees)):
                continue
            "".join(ids)  # TypeError unless every id is text: at C speed (docs/benchmark.md)
            if source is None:
                (rows,) = place
                if type(rows) is not bytes:
                    continue
                packed = Packed(ids, newest, worktrees, swarms, rows)
            else:
                offset, length = place
                if type(offset) is not int or type(length) is not int or offset < 0 or length < 0:
                    continue
                packed = Packed(ids, newest, worktrees, swarms, None, (offset, length), source)
        except (TypeError, ValueError):
            continue
        sessions[session_id] = packed
    return sessions


def _open_cache(path: Path) -> tuple[CacheFile | None, Any]:
    """(the open file, the header) of a format-3 cache; (None, the whole map) of an older one."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        older = os.pread(fd, len(CACHE_MAGIC), 0) != CACHE_MAGIC
    except BaseException:
        os.close(fd)
        raise
    if older:  # read whole; the descriptor was only for the magic (it stayed open once per start)
        os.close(fd)
        return None, msgpack.unpackb(nofollow.read_nofollow(path), raw=False, use_list=False)
    return read_header(fd)


def read_header(fd: int) -> tuple[CacheFile, Any]:
    """(a `CacheFile` now owning `fd`, the header); closes `fd` and raises when it is no cache."""
    try:
        start = os.pread(fd, _HEAD, 0)
        if not start.startswith(CACHE_MAGIC) or len(start) != _HEAD:
            raise ValueError("not an episode index cache")
        length = int.from_bytes(start[len(CACHE_MAGIC):], "little")
        if _HEAD + length > os.fstat(fd).st_size:
            raise ValueError("the cache header is cut short")
        header = msgpack.unpackb(os.pread(fd, length, _HEAD), raw=False, use_list=False)
    except BaseException:
        os.close(fd)
        raise
    return CacheFile(fd, _HEAD + length), header  # closes fd when the last packed session lets go


def _from_version_1(rows: tuple[Any, ...]) -> tuple[Any, ...]:
    """Session entries from a version-1 cache (one row per file: key, size, mtime, id, session,
    created, takeaway, first_line, scopes, swarm, worktree); rows of another shape are left out."""
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        if type(row) is tuple and len(row) == 11 and type(row[4]) is str and type(row[5]) is str:
            grouped.setdefault(row[4], []).append(row)
    return tuple((session_id, tuple(r[3] for r in group), max(r[5] for r in group),
                  tuple(Counter(r[10] for r in group).items()), tuple({r[9] for r in group if r[9] is not None}),
                  msgpack.packb([[*r[1:3], *r[5:]] for r in group], use_bin_type=True))
                 for session_id, group in grouped.items())
