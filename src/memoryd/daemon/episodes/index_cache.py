"""The episode index cache (`state/episodes.cache`, docs/storage.md): each session's summary and its rows, which
stay in the open file until decoded; the journal's `by_id` view, and the packing of a session. Derived data: anything
that does not decode means the files are read instead (msgpack, not pickle: a planted cache must not run code)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, KeysView, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgpack

from memoryd.daemon.episodes.episode import Episode

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
    """A session's episodes as the cache holds them: ids, a summary, and the msgpack of their rows ([size,
    mtime_ns, created, takeaway, first_line, scopes, swarm_id, worktree] per id), or their `span` in `source`."""
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


class EpisodeIndex(Mapping[str, Episode]):
    """`journal.by_id`: every episode by id; only a lookup decodes its session."""

    def __init__(self, owner: dict[str, str], get: Callable[[str], Episode | None]) -> None:
        self._owner, self._get = owner, get  # `owner`: every episode id -> its session, decoded or not

    def __getitem__(self, episode_id: str) -> Episode:
        found = self._get(episode_id)
        if found is None:
            raise KeyError(episode_id)
        return found

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._owner

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def keys(self) -> KeysView[str]:
        return self._owner.keys()


def pack(bucket: dict[str, Episode], stats: dict[str, tuple[int, int]],
         file_of: Callable[[Episode], str]) -> Packed | None:
    """A decoded session as the cache holds it (stats from `stats`, else an lstat); None when empty."""
    rows, listed = [], []
    for episode in bucket.values():
        stat = stats.get(episode.id)
        if stat is None:
            try:
                st = os.lstat(file_of(episode))
            except OSError:
                continue
            stat = (st.st_size, st.st_mtime_ns)
        listed.append(episode)
        rows.append([stat[0], stat[1], episode.created, episode.takeaway, episode.first_line,
                     list(episode.scopes), episode.swarm_id, episode.worktree])
    if not listed:
        return None
    return Packed(ids=tuple(e.id for e in listed), newest=max(e.created for e in listed),
                  worktrees=tuple(Counter(e.worktree for e in listed).items()),
                  swarms=tuple({e.swarm_id for e in listed if e.swarm_id is not None}),
                  rows=msgpack.packb(rows, use_bin_type=True))


# Cache format 3: this magic, the header's length (8 bytes, little-endian), the header (msgpack:
# {"v", "seq", "sessions": [[id, ids, newest, worktrees, swarms, offset, length]]}), then each
# session's rows at its offset, read only when the session is decoded.
CACHE_MAGIC = b"memoryd-episodes\n"
_HEAD = len(CACHE_MAGIC) + 8


class Listing(NamedTuple):
    """What a prefetch helper found beside what it packed (folders, bad and temp files); never in `state/`."""
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
    it was saved at; empty when missing, unreadable or of an older format (the folders are read)."""
    try:
        source, data = read_header(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC))
    except (OSError, ValueError, msgpack.UnpackException):
        return {}, None
    if not isinstance(data, dict) or data.get("v") != CACHE_VERSION or not isinstance(data.get("sessions"), tuple):
        return {}, None
    seq = data.get("seq")
    return sessions_of(data["sessions"], source), seq if type(seq) is int else None


def sessions_of(entries: Any, source: CacheFile) -> dict[str, Packed]:
    """The header's well-shaped session entries, rows in `source`; checked inline (a call each was slow at 11k)."""
    sessions = {}
    for entry in entries:
        try:
            session_id, ids, newest, worktrees, swarms, offset, length = entry
            if (type(ids) is not tuple or type(newest) is not str or type(swarms) is not tuple
                    or type(worktrees) is not tuple or any(type(n) is not int for _, n in worktrees)
                    or type(offset) is not int or type(length) is not int or offset < 0 or length < 0):
                continue
            "".join(ids)  # TypeError unless every id is text: at C speed (docs/benchmark.md)
        except (TypeError, ValueError):
            continue
        sessions[session_id] = Packed(ids, newest, worktrees, swarms, None, (offset, length), source)
    return sessions


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
