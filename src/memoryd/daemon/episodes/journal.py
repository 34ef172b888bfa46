"""The episode index: every episode file's frontmatter, kept in memory, bodies read on demand.

Import contract: store only. Provenance is not stored here: it comes from the event log's
index in `core` (an episode file says nothing trustworthy about how it got there).
Symlinked session folders and episode files are listed in `bad_files` and never indexed, so
nothing reads them and the TTL reaper never deletes through them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon import store

CACHE_VERSION = 1
FOLDER_LISTING_COST = 10  # a folder listing, in `verify_some` budget units (one unit: an lstat)


@dataclass(slots=True)
class Episode:
    id: str
    session_id: str
    created: str
    takeaway: str | None
    first_line: str
    scopes: tuple[str, ...]
    swarm_id: str | None
    worktree: str | None
    # No path is kept: it is always `episodes/<session_id>/<id>.md` (`Journal.path_of`), and 80k
    # path strings were ~10 MB of a large store's start.

    @property
    def headline(self) -> str:
        """The takeaway, or the body's first line when the writer gave none."""
        return self.takeaway if self.takeaway else self.first_line


def first_line(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""


class Journal:
    def __init__(self, root: Path, files: store.FileStore) -> None:
        self.dir = root / "episodes"
        self._prefix = str(self.dir) + os.sep
        self.files = files
        self.by_id: dict[str, Episode] = {}
        self.by_session: dict[str, dict[str, Episode]] = {}
        self.bad_files: list[dict[str, str]] = []
        self.session_dirs: list[str] = []  # every `sess-<n>` name under episodes/, links included
        self.stats: dict[str, tuple[int, int]] = {}  # episode id -> (size, mtime_ns) its file had
        self.unverified: list[str] = []  # loaded from the cache; not yet checked against the file
        self.unlisted: list[str] = []  # session folders taken from the cache, not yet listed
        # What the after-start check found that a start would have: episodes parsed (new or
        # changed files) and cache-loaded episodes whose file was gone; `Core.verify_files` logs it.
        self.found_late: list[str] = []
        self.dropped_late = 0

    def add(self, episode: Episode) -> None:
        self.by_id[episode.id] = episode
        self.by_session.setdefault(episode.session_id, {})[episode.id] = episode

    def remove(self, episode_id: str) -> Episode | None:
        episode = self.by_id.pop(episode_id, None)
        self.stats.pop(episode_id, None)
        if episode is not None:
            self.by_session.get(episode.session_id, {}).pop(episode_id, None)
        return episode

    def of_session(self, session_id: str) -> list[Episode]:
        """A session's live episodes, oldest first (ULIDs sort by creation time)."""
        return sorted(self.by_session.get(session_id, {}).values(), key=lambda e: (e.created, e.id))

    def all(self) -> Iterator[Episode]:
        return iter(self.by_id.values())

    def file_of(self, episode: Episode) -> str:
        return f"{self._prefix}{episode.session_id}/{episode.id}.md"

    def path_of(self, episode: Episode) -> Path:
        return Path(self.file_of(episode))

    def read_body(self, episode: Episode) -> str:
        try:
            return store.parse(self.files.read_bytes(self.path_of(episode)))[1]
        except (OSError, store.BadRecord, UnicodeDecodeError):
            return ""

    def path_for(self, session_id: str, episode_id: str) -> Path:
        # Both ids are validated by their minting code or by the caller before they reach a path.
        assert store.is_session_id(session_id) and store.is_ulid(episode_id)
        return self.dir / session_id / f"{episode_id}.md"

    def load(self, progress: Callable[[str, int, int], None] | None = None, listed_at: int | None = None) -> None:
        """Index every episode file; untrustworthy files are listed in `bad_files`, not loaded.

        A file the index cache (`state/episodes.cache`, written at stop) lists is taken from it
        without even a `stat`: 80k frontmatters cost ~5 s to parse and 80k stats most of a
        second. Whether those files still match the cache (a hand edit while the daemon was
        stopped) is checked after start, a slice at a time (`verify_some`); other files are
        parsed now.

        `listed_at`: on a start resumed from the checkpoint, the log's seq. A cache saved at that
        seq was written by the same clean stop, so it names every episode file there was; the
        session folders are then listed after start too (11k folder listings took 0.2 s with
        warm caches, 2 s cold), and a file added by hand while the daemon was stopped is found
        then (`verify_some`).
        """
        if not store.is_plain_dir(self.dir):
            return
        cached, saved_at = read_cache(self.cache_path)
        grouped = _by_folder(cached) if listed_at is not None and saved_at == listed_at else None
        with os.scandir(self.dir) as listing:
            folders = sorted((e for e in listing if store.is_session_id(e.name)), key=lambda e: e.name)
        for number, folder in enumerate(folders, 1):
            if progress is not None and not number % 256:
                progress("indexing episodes", len(self.by_id), len(cached))
            self.session_dirs.append(folder.name)
            if not folder.is_dir(follow_symlinks=False):
                self._bad(Path(folder.path), "a symbolic link or not a directory; not followed")
                continue
            if grouped is not None and self._load_cached(folder.name, grouped.get(folder.name, [])):
                self.unlisted.append(folder.name)
                continue
            with os.scandir(folder.path) as entries:
                self._load_folder(folder.name, list(entries), cached)

    def _load_cached(self, session_id: str, rows: list[tuple[str, list[Any]]]) -> bool:
        """A session's episodes from its cache rows alone; False (nothing added) when a row does
        not describe its file, so the folder is listed and read now instead."""
        episodes = [_from_row(row, session_id, name) for name, row in rows]
        if None in episodes:
            return False
        bucket = self.by_session.setdefault(session_id, {})
        for episode, (_name, row) in zip(episodes, rows, strict=True):
            assert episode is not None
            self.by_id[episode.id] = bucket[episode.id] = episode
            self.stats[episode.id] = (row[1], row[2])
            self.unverified.append(episode.id)
        return True

    def _load_folder(self, session_id: str, entries: list[os.DirEntry[str]], cached: dict[str, list[Any]]) -> None:
        """One session's folder: cached rows become episodes directly (the hot loop of a warm
        start with 80k episodes, hence inlined), the other files are parsed."""
        prefix, by_id, stats, unverified = session_id + "/", self.by_id, self.stats, self.unverified
        bucket = self.by_session.setdefault(session_id, {})
        for entry in entries:
            name = entry.name
            if not name.endswith(".md") or name.startswith("."):
                continue
            if not entry.is_file(follow_symlinks=False):
                self._bad(Path(entry.path), "a symbolic link or not a regular file; not followed")
                continue
            row = cached.get(prefix + name)
            episode = _from_row(row, session_id, name) if row is not None else None
            if row is None or episode is None:
                self._parse_file(session_id, entry.path, entry.stat(follow_symlinks=False))
                continue
            by_id[episode.id] = bucket[episode.id] = episode
            stats[episode.id] = (row[1], row[2])
            unverified.append(episode.id)

    def _bad(self, path: Path, reason: str) -> None:
        self.bad_files.append({"path": str(path), "reason": reason})

    def _parse_file(self, session_id: str, path: str, stat: os.stat_result, late: bool = False) -> None:
        try:
            meta, body = store.parse(store.read_nofollow(Path(path)))
            episode = from_meta(meta, body, session_id, path)
        except (OSError, store.BadRecord, KeyError, TypeError, ValueError) as exc:
            self._bad(Path(path), str(exc)[:200])
            return
        self.add(episode)
        self.stats[episode.id] = (stat.st_size, stat.st_mtime_ns)
        if late:
            self.found_late.append(episode.id)

    def verify_some(self, budget: int | None) -> int:
        """Check up to `budget` (None: all) cache-loaded episodes against their files; a file
        changed since the cache was written is parsed again (or listed as bad). Returns how many
        remain unchecked."""
        todo = self.unverified
        take = len(todo) if budget is None else min(budget, len(todo))
        for _ in range(take):
            episode = self.by_id.get(todo.pop())
            if episode is None:
                continue  # deleted since start (promoted, pruned)
            try:
                st = os.lstat(self.file_of(episode))
            except FileNotFoundError:  # deleted while the daemon was stopped: as if never listed
                self.remove(episode.id)
                self.dropped_late += 1
                continue
            except OSError:
                continue
            if (st.st_size, st.st_mtime_ns) != self.stats.get(episode.id):
                self.remove(episode.id)
                self._parse_file(episode.session_id, self.file_of(episode), st, late=True)
        spent = take
        while self.unlisted and (budget is None or spent < budget):
            self._list_folder(self.unlisted.pop())
            spent += FOLDER_LISTING_COST
        return len(todo) + len(self.unlisted)

    def _list_folder(self, session_id: str) -> None:
        """Parse what a session folder holds beyond its cached episodes (or list as bad)."""
        try:
            with os.scandir(self.dir / session_id) as listing:
                entries = list(listing)
        except OSError:
            return  # pruned since start, or replaced: the next start lists it
        known = self.by_session.get(session_id, {})
        for entry in entries:
            name = entry.name
            if not name.endswith(".md") or name.startswith(".") or name[:-3] in known:
                continue
            if not entry.is_file(follow_symlinks=False):
                self._bad(Path(entry.path), "a symbolic link or not a regular file; not followed")
                continue
            self._parse_file(session_id, entry.path, entry.stat(follow_symlinks=False), late=True)

    @property
    def cache_path(self) -> Path:
        return self.dir.parent / "state" / "episodes.cache"

    def save_cache(self, log_seq: int) -> None:
        """Write the index cache (derived data: losing it only costs a slower start). Stats are
        those seen at load or taken once for files written since (`stats`), not 80k lstats."""
        rows = []
        for episode in self.by_id.values():
            stat = self.stats.get(episode.id)
            if stat is None:
                try:
                    st = os.lstat(self.file_of(episode))
                except OSError:
                    continue
                stat = (st.st_size, st.st_mtime_ns)
            rows.append([f"{episode.session_id}/{episode.id}.md", stat[0], stat[1],
                         episode.id, episode.session_id, episode.created, episode.takeaway,
                         episode.first_line, list(episode.scopes), episode.swarm_id, episode.worktree])
        self.files.write_file(self.cache_path, msgpack.packb({"v": CACHE_VERSION, "seq": log_seq, "rows": rows}))


def read_cache(path: Path) -> tuple[dict[str, list[Any]], int | None]:
    """The index cache by "<session>/<file>", and the log seq it was saved at; empty when
    missing or unreadable (msgpack, not pickle: a planted cache must not run code)."""
    try:
        data = msgpack.unpackb(store.read_nofollow(path), raw=False)
    except (OSError, ValueError, msgpack.UnpackException):
        return {}, None
    if not isinstance(data, dict) or data.get("v") != CACHE_VERSION or not isinstance(data.get("rows"), list):
        return {}, None
    seq = data.get("seq")
    rows = {row[0]: row for row in data["rows"] if isinstance(row, list) and len(row) == 11 and type(row[0]) is str}
    return rows, seq if type(seq) is int else None


def _by_folder(cached: dict[str, list[Any]]) -> dict[str, list[tuple[str, list[Any]]]]:
    """Cache rows by session folder, each with its file name."""
    grouped: dict[str, list[tuple[str, list[Any]]]] = {}
    for key, row in cached.items():
        folder, _, name = key.partition("/")
        grouped.setdefault(folder, []).append((name, row))
    return grouped


def _from_row(row: list[Any], session_id: str, name: str) -> Episode | None:
    """The episode a cache row describes, or None when it does not describe this file. Ids are
    interned: the checkpoint's sets of episode ids then share these strings."""
    _key, _size, _mtime, episode_id, owner, created, takeaway, line, scopes, swarm, worktree = row
    if owner != session_id or name != f"{episode_id}.md" or type(created) is not str or type(scopes) is not list:
        return None
    shared = _SHARED.get(worktree) if type(worktree) is str else None
    if shared is None and type(worktree) is str:
        shared = _SHARED.setdefault(worktree, sys.intern(worktree))
    return Episode(id=sys.intern(episode_id), session_id=session_id, created=created, takeaway=takeaway,
                   first_line=line, scopes=tuple(map(sys.intern, scopes)) if scopes else (), swarm_id=swarm,
                   worktree=shared)


# Worktree strings seen in episode caches: one object each, shared by all their episodes.
_SHARED: dict[str, str] = {}


def from_meta(meta: dict[str, Any], body: str, session_id: str, path: str) -> Episode:
    episode_id = meta["id"]
    if not store.is_ulid(episode_id) or not path.endswith(f"/{episode_id}.md"):
        raise ValueError("id does not match the file name")
    created = timestamp_text(meta["created"])
    return Episode(
        id=episode_id, session_id=session_id, created=created,
        takeaway=meta.get("takeaway"), first_line=first_line(body),
        scopes=tuple(meta.get("scopes") or ()), swarm_id=meta.get("swarm_id"),
        worktree=meta.get("worktree"),
    )


def timestamp_text(value: Any) -> str:
    """A frontmatter timestamp as ISO text: hand-written files may hold a bare YAML timestamp."""
    if isinstance(value, datetime):
        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    if isinstance(value, str):
        return value
    raise ValueError("created is not a timestamp")


def to_meta(episode: Episode, session_id: str) -> dict[str, Any]:
    return {
        "schema_version": 1, "id": episode.id, "created": episode.created,
        "session_id": session_id, "scopes": list(episode.scopes), "takeaway": episode.takeaway,
        "swarm_id": episode.swarm_id, "worktree": episode.worktree,
    }
