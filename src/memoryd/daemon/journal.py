"""The episode index: every episode file's frontmatter, kept in memory, bodies read on demand.

Import contract: store only. Provenance is not stored here: it comes from the event log's
index in `core` (an episode file says nothing trustworthy about how it got there).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memoryd.daemon import store


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
        except (OSError, store.BadRecord):
            return ""

    def path_for(self, session_id: str, episode_id: str) -> Path:
        # Both ids are validated by their minting code or by the caller before they reach a path.
        assert store.is_session_id(session_id) and store.is_ulid(episode_id)
        return self.dir / session_id / f"{episode_id}.md"

    def load(self) -> None:
        """Index every episode file; untrustworthy files are listed in `bad_files`, not loaded."""
        if not self.dir.is_dir():
            return
        for folder in sorted(self.dir.iterdir()):
            if not (folder.is_dir() and store.is_session_id(folder.name)):
                continue
            for path in folder.glob("*.md"):
                self._load_file(folder.name, path)

    def _load_file(self, session_id: str, path: Path) -> None:
        try:
            meta, body = store.parse(path.read_bytes())
            episode = from_meta(meta, body, session_id, path)
        except (OSError, store.BadRecord, KeyError, TypeError, ValueError) as exc:
            self.bad_files.append({"path": str(path), "reason": str(exc)[:200]})
            return
        self.add(episode)


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
