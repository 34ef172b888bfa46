"""The episode index: every episode file's frontmatter, kept in memory, bodies read on demand.

Import contract: store only. Provenance is not stored here: it comes from the event log's
index in `core` (an episode file says nothing trustworthy about how it got there).
Symlinked session folders and episode files are listed in `bad_files` and never indexed, so
nothing reads them and the TTL reaper never deletes through them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon import store

CACHE_VERSION = 1


@dataclass
class Episode:
    id: str
    session_id: str
    created: str
    takeaway: str | None
    first_line: str
    scopes: tuple[str, ...]
    swarm_id: str | None
    worktree: str | None
    path: Path

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
        self.files = files
        self.by_id: dict[str, Episode] = {}
        self.by_session: dict[str, dict[str, Episode]] = {}
        self.bad_files: list[dict[str, str]] = []
        self.session_dirs: list[str] = []  # every `sess-<n>` name under episodes/, links included

    def add(self, episode: Episode) -> None:
        self.by_id[episode.id] = episode
        self.by_session.setdefault(episode.session_id, {})[episode.id] = episode

    def remove(self, episode_id: str) -> Episode | None:
        episode = self.by_id.pop(episode_id, None)
        if episode is not None:
            self.by_session.get(episode.session_id, {}).pop(episode_id, None)
        return episode

    def of_session(self, session_id: str) -> list[Episode]:
        """A session's live episodes, oldest first (ULIDs sort by creation time)."""
        return sorted(self.by_session.get(session_id, {}).values(), key=lambda e: (e.created, e.id))

    def all(self) -> Iterator[Episode]:
        return iter(self.by_id.values())

    def read_body(self, episode: Episode) -> str:
        try:
            return store.parse(self.files.read_bytes(episode.path))[1]
        except (OSError, store.BadRecord, UnicodeDecodeError):
            return ""

    def path_for(self, session_id: str, episode_id: str) -> Path:
        # Both ids are validated by their minting code or by the caller before they reach a path.
        assert store.is_session_id(session_id) and store.is_ulid(episode_id)
        return self.dir / session_id / f"{episode_id}.md"

    def load(self) -> None:
        """Index every episode file; untrustworthy files are listed in `bad_files`, not loaded.

        A file whose size and mtime match the index cache (`state/episodes.cache`, written at
        stop) is taken from it instead of being parsed: 80k frontmatters cost ~5 s to parse.
        """
        if not store.is_plain_dir(self.dir):
            return
        cached = read_cache(self.cache_path)
        for folder in sorted(self.dir.iterdir()):
            if not store.is_session_id(folder.name):
                continue
            self.session_dirs.append(folder.name)
            if not store.is_plain_dir(folder):
                self._bad(folder, "a symbolic link or not a directory; not followed")
                continue
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.name.endswith(".md") or entry.name.startswith("."):
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        self._bad(Path(entry.path), "a symbolic link or not a regular file; not followed")
                        continue
                    self._load_file(folder.name, Path(entry.path), entry.stat(follow_symlinks=False), cached)

    def _bad(self, path: Path, reason: str) -> None:
        self.bad_files.append({"path": str(path), "reason": reason})

    def _load_file(self, session_id: str, path: Path, stat: os.stat_result,
                   cached: dict[str, list[Any]]) -> None:
        hit = cached.get(f"{session_id}/{path.name}")
        if hit and hit[0] == stat.st_size and hit[1] == stat.st_mtime_ns:
            with contextlib.suppress(TypeError, ValueError):
                self.add(from_cache(hit, session_id, path))
                return
        try:
            meta, body = store.parse(store.read_nofollow(path))
            episode = from_meta(meta, body, session_id, path)
        except (OSError, store.BadRecord, KeyError, TypeError, ValueError) as exc:
            self._bad(path, str(exc)[:200])
            return
        self.add(episode)

    @property
    def cache_path(self) -> Path:
        return self.dir.parent / "state" / "episodes.cache"

    def save_cache(self) -> None:
        """Write the index cache (derived data: losing it only costs a slower start)."""
        rows = []
        for episode in self.by_id.values():
            try:
                stat = os.lstat(episode.path)
            except OSError:
                continue
            rows.append([f"{episode.session_id}/{episode.path.name}", stat.st_size, stat.st_mtime_ns,
                         episode.id, episode.session_id, episode.created, episode.takeaway,
                         episode.first_line, list(episode.scopes), episode.swarm_id, episode.worktree])
        self.files.write_file(self.cache_path, msgpack.packb({"v": CACHE_VERSION, "rows": rows}))


def read_cache(path: Path) -> dict[str, list[Any]]:
    """The index cache by "<session>/<file>"; empty when missing or unreadable (msgpack, not
    pickle: a planted cache must not run code)."""
    try:
        data = msgpack.unpackb(store.read_nofollow(path), raw=False)
    except (OSError, ValueError, msgpack.UnpackException):
        return {}
    if not isinstance(data, dict) or data.get("v") != CACHE_VERSION:
        return {}
    rows = data.get("rows")
    return {row[0]: row[1:] for row in rows if isinstance(row, list) and len(row) == 11} if isinstance(rows, list) else {}


def from_cache(row: list[Any], session_id: str, path: Path) -> Episode:
    _size, _mtime, episode_id, owner, created, takeaway, line, scopes, swarm, worktree = row
    if episode_id != path.stem or owner != session_id or not isinstance(created, str):
        raise ValueError("cache row does not describe this file")
    return Episode(id=episode_id, session_id=owner, created=created, takeaway=takeaway, first_line=line,
                   scopes=tuple(scopes), swarm_id=swarm, worktree=worktree, path=path)


def from_meta(meta: dict[str, Any], body: str, session_id: str, path: Path) -> Episode:
    episode_id = meta["id"]
    if not store.is_ulid(episode_id) or path.stem != episode_id:
        raise ValueError("id does not match the file name")
    created = timestamp_text(meta["created"])
    return Episode(
        id=episode_id, session_id=session_id, created=created,
        takeaway=meta.get("takeaway"), first_line=first_line(body),
        scopes=tuple(meta.get("scopes") or ()), swarm_id=meta.get("swarm_id"),
        worktree=meta.get("worktree"), path=path,
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
