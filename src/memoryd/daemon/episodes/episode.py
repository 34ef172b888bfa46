"""An episode as the index holds it, and its file's frontmatter (docs/storage.md, 'Episodes').
Import contract: `store` only."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.identity import idents
from memoryd.daemon.storage.clock import stamp_text


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
    # No path kept: it is always `episodes/<session_id>/<id>.md`; 80k path strings were ~10 MB.

    @property
    def headline(self) -> str:
        """The takeaway, or the body's first line when the writer gave none."""
        return self.takeaway if self.takeaway else self.first_line


def first_line(body: str) -> str:
    return next((line.strip()[:500] for line in body.splitlines() if line.strip()), "")


# Worktree strings seen in episode caches: one object each, shared by all their episodes.
_SHARED: dict[str, str] = {}


def _shared(worktree: Any) -> Any:
    """One string object per worktree, however many episodes and summaries name it."""
    if type(worktree) is not str:
        return worktree
    return _SHARED.get(worktree) or _SHARED.setdefault(worktree, sys.intern(worktree))


def from_row(row: list[Any], session_id: str, episode_id: str) -> Episode | None:
    """The episode a cache row describes (ids interned, shared with the checkpoint's), or None."""
    try:
        _size, _mtime, created, takeaway, line, scopes, swarm, worktree = row
    except (TypeError, ValueError):
        return None
    if not idents.is_ulid(episode_id) or type(created) is not str or type(scopes) is not list:
        return None
    return Episode(id=sys.intern(episode_id), session_id=session_id, created=created, takeaway=takeaway,
                   first_line=line, scopes=tuple(map(sys.intern, scopes)) if scopes else (), swarm_id=swarm,
                   worktree=_shared(worktree))


def from_meta(meta: dict[str, Any], body: str, session_id: str, path: str) -> Episode:
    episode_id = meta["id"]
    if not idents.is_ulid(episode_id) or not path.endswith(f"/{episode_id}.md"):
        raise ValueError("id does not match the file name")
    created = stamp_text(meta["created"])  # hand-written files may hold a bare YAML timestamp
    if not isinstance(created, str):
        raise ValueError("created is not a timestamp")
    return Episode(id=episode_id, session_id=session_id, created=created, takeaway=meta.get("takeaway"),
                   first_line=first_line(body), scopes=tuple(meta.get("scopes") or ()),
                   swarm_id=meta.get("swarm_id"), worktree=meta.get("worktree"))


def to_meta(episode: Episode, session_id: str) -> dict[str, Any]:
    return {"schema_version": 1, "id": episode.id, "created": episode.created, "session_id": session_id,
            "scopes": list(episode.scopes), "takeaway": episode.takeaway, "swarm_id": episode.swarm_id,
            "worktree": episode.worktree}
