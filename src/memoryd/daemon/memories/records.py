"""What a durable memory and a pending write are, and how they map to files (docs/storage.md).
Import contract: store only (stdlib + yaml below it)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from memoryd import names
from memoryd.daemon.identity import idents
from memoryd.daemon.storage import frontmatter
from memoryd.daemon.storage.clock import stamp_text

SCHEMA_VERSION = 1
# The values a caller may give, declared once as types the tool signatures use.
Category = Literal["fact", "user-inference", "ambient"]
Confidence = Literal["high", "medium", "low"]
Source = Literal["explicit-statement", "inferred", "user-correction"]
CATEGORIES: tuple[str, ...] = get_args(Category)
HANDOFF = "handoff"
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
SOURCES: tuple[str, ...] = get_args(Source)
HANDOFF_SOURCE = names.MEMORY_SESSION_FINISH
LINK_TYPES = ("supersedes", "contradicts", "extends", "depends_on")
ORIGIN_KEYS = ("worktree", "repo", "project", "branch", "commit", "client")
FIRST_LINE_CHARS = 200
PREVIEW_CHARS = 200


def first_line_of(text: str) -> str:
    return next((line.strip()[:FIRST_LINE_CHARS] for line in text.splitlines() if line.strip()), "")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class Memory:
    """One durable record, live or tombstoned. Never mutated (a change is a new record, `replace`);
    slotted and with tuples for its list fields, as 100k of them are held (~120 MB less)."""

    id: str
    content: str
    scopes: tuple[str, ...]
    category: str
    confidence: str
    source: str
    created: str
    updated: str
    session_id: str | None
    origin: dict[str, Any]
    last_verified_at: str | None = None
    verified_paths: tuple[str, ...] = ()
    verified_commits: tuple[str, ...] = ()
    verification_note: str | None = None
    links: tuple[dict[str, str], ...] = ()
    tainted: bool = False
    taint: tuple[str, ...] = ()
    anchor_session_id: str | None = None  # handoffs: the session they close
    removed_at: str | None = None
    removed_reason: str | None = None
    pinned: bool = False  # listed first at every session start (docs/search.md "Pinned rules")
    repo: str | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        repo = self.origin.get("repo")
        self.repo = repo if isinstance(repo, str) else None

    @property
    def first_line(self) -> str:
        return first_line_of(self.content)

    @property
    def verified_or_updated(self) -> str:
        """When the memory was last known to hold: its verification, else its last change."""
        return max(self.last_verified_at or "", self.updated)


@dataclass
class PendingWrite:
    """A staged write awaiting the user's yes: what confirm needs to re-run gates 1–6."""

    id: str
    session_id: str
    preview: str
    created: str
    expires_at: float
    source_episode_id: str | None
    reason: str
    draft: dict[str, Any]   # chain.Draft.to_dict()
    origin: dict[str, Any]


def to_meta(memory: Memory) -> dict[str, Any]:
    """The frontmatter mapping, in the documented key order; tombstone keys only when removed."""
    meta: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": memory.id, "created": memory.created,
                            "updated": memory.updated, "session_id": memory.session_id, "scopes": list(memory.scopes),
                            "category": memory.category, "confidence": memory.confidence, "source": memory.source,
                            "origin": {k: memory.origin.get(k) for k in ORIGIN_KEYS},
                            "last_verified_at": memory.last_verified_at, "verified_paths": list(memory.verified_paths),
                            "verified_commits": list(memory.verified_commits), "links": [dict(x) for x in memory.links],
                            "tainted": memory.tainted, "taint": list(memory.taint)}
    optional = {"verification_note": memory.verification_note, "pinned": True if memory.pinned else None,
                "anchor_session_id": memory.anchor_session_id, "removed_at": memory.removed_at}
    meta.update((key, value) for key, value in optional.items() if value is not None)
    if memory.removed_at is not None:
        meta["removed_reason"] = memory.removed_reason
    return meta


def render_memory(memory: Memory) -> bytes:
    """File bytes for `memory`; raises InvalidParams (naming content) if the frontmatter is too big."""
    return frontmatter.render(to_meta(memory), memory.content, blame="content")


def _str_list(meta: dict[str, Any], name: str) -> tuple[str, ...]:
    value = meta.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} is not a list of strings")
    return tuple(value)


def _links(value: Any) -> tuple[dict[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TypeError("links is not a list")
    if not all(isinstance(x, dict) and isinstance(x.get("type"), str) and idents.is_ulid(x.get("target_id"))
               for x in value):
        raise TypeError("a link is not {type, target_id}")
    return tuple({"type": x["type"], "target_id": x["target_id"]} for x in value)


def _opt_str(meta: dict[str, Any], key: str) -> str | None:
    value = stamp_text(meta.get(key))
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def from_meta(meta: dict[str, Any], body: str, file_id: str) -> Memory:
    """Rebuild a memory from its file; ValueError/KeyError for anything that does not fit."""
    if meta.get("id") != file_id or not idents.is_ulid(file_id):
        raise ValueError("id does not match the file name")
    meta = {**meta, "created": stamp_text(meta.get("created")), "updated": stamp_text(meta.get("updated"))}
    for key in ("created", "updated", "category", "confidence", "source"):
        if not isinstance(meta.get(key), str):
            raise TypeError(f"{key} is missing or not a string")
    origin = meta.get("origin") or {}
    if not isinstance(origin, dict):
        raise TypeError("origin is not a mapping")
    taint = _str_list(meta, "taint")
    created, updated = meta["created"], meta["updated"]
    return Memory(
        id=file_id, content=body, scopes=_str_list(meta, "scopes"), category=meta["category"],
        confidence=meta["confidence"], source=meta["source"], created=created,
        updated=created if updated == created else updated, session_id=_opt_str(meta, "session_id"),
        origin={k: origin.get(k) if isinstance(origin.get(k), str) else None for k in ORIGIN_KEYS},
        last_verified_at=_opt_str(meta, "last_verified_at"), verified_paths=_str_list(meta, "verified_paths"),
        verified_commits=_str_list(meta, "verified_commits"), verification_note=_opt_str(meta, "verification_note"),
        links=_links(meta.get("links")), tainted=bool(meta.get("tainted")) or bool(taint), taint=taint,
        anchor_session_id=_opt_str(meta, "anchor_session_id"), removed_at=_opt_str(meta, "removed_at"),
        removed_reason=_opt_str(meta, "removed_reason"), pinned=meta.get("pinned") is True)


# Memory fields in declared order, as the parse cache stores them (`scopes`, `origin`: numbers into RowTables).
ROW_FIELDS = ("id", "content", "scopes", "category", "confidence", "source", "created", "updated", "session_id",
              "origin", "last_verified_at", "verified_paths", "verified_commits", "verification_note", "links",
              "tainted", "taint", "anchor_session_id", "removed_at", "removed_reason", "pinned")


class RowTables:
    """The distinct scope lists and origins of a cache, shared by the memories loaded from it."""

    def __init__(self, scopes: list[Any] | None = None, origins: list[Any] | None = None) -> None:
        intern = sys.intern  # TypeError for anything but a str: a scope or origin key of another type
        self.scopes: list[tuple[str, ...]] = [tuple(intern(s) for s in row) for row in scopes or ()]
        self.origins: list[dict[str, Any]] = [
            {intern(k): intern(v) if type(v) is str else None for k, v in row.items()} for row in origins or ()]
        self._scope_ix: dict[tuple[str, ...], int] = {}
        self._origin_ix: dict[tuple[Any, ...], int] = {}

    def to_row(self, memory: Memory) -> list[Any]:
        values = [getattr(memory, f) for f in ROW_FIELDS]
        values[2] = self._number(self._scope_ix, self.scopes, memory.scopes, memory.scopes)
        values[9] = self._number(self._origin_ix, self.origins, tuple(memory.origin.items()), memory.origin)
        return values

    @staticmethod
    def _number(index: dict[Any, int], table: list[Any], key: Any, value: Any) -> int:
        if key not in index:
            index[key] = len(table)
            table.append(value)
        return index[key]

    def from_row(self, row: Sequence[Any]) -> Memory:
        """A memory from a row `to_row` wrote; TypeError/ValueError/IndexError for any other row."""
        (memory_id, content, scopes, category, confidence, source, created, updated, session_id, origin,
         last_verified_at, verified_paths, verified_commits, note, links, tainted, taint, anchor, removed_at,
         removed_reason, pinned) = row
        if not (type(content) is str and type(created) is str and type(updated) is str):  # intern checks the rest
            raise TypeError("a cache row with a field of the wrong type")
        intern = sys.intern
        # Positional: keyword calls slow a large start. Never edited: one string for created and updated.
        return Memory(intern(memory_id), content, self.scopes[scopes], intern(category), intern(confidence),
                      intern(source), created, created if updated == created else updated,
                      intern(session_id) if type(session_id) is str else session_id,
                      self.origins[origin], last_verified_at, verified_paths,
                      verified_commits, note, links, bool(tainted), taint, anchor, removed_at, removed_reason,
                      pinned is True)

    def from_columns(self, columns: Sequence[Sequence[Any]]) -> list[Memory]:
        """`from_row` of every row of these `ROW_FIELDS` columns, a column at a time (C speed)."""
        (ids, content, scopes, category, confidence, source, created, updated, session_id, origin,
         last_verified_at, verified_paths, verified_commits, note, links, tainted, taint, anchor, removed_at,
         removed_reason, pinned) = columns
        if not all(idents.all_of_type(c, str) for c in (ids, content, created, updated, category)):
            raise TypeError("a cache column with a field of the wrong type")
        intern = sys.intern
        return list(map(Memory, map(intern, ids), content, map(self.scopes.__getitem__, scopes),
                        map(intern, category), map(intern, confidence), map(intern, source), created,
                        [c if u == c else u for c, u in zip(created, updated)],
                        [intern(s) if type(s) is str else s for s in session_id],
                        map(self.origins.__getitem__, origin), last_verified_at, verified_paths,
                        verified_commits, note, links, map(bool, tainted), taint, anchor, removed_at,
                        removed_reason, [p is True for p in pinned]))


def encode_pending(pending: list[PendingWrite]) -> bytes:
    return json.dumps({"schema_version": SCHEMA_VERSION, "pending": [asdict(p) for p in pending]},
                      ensure_ascii=False).encode()


def decode_pending(data: bytes) -> list[PendingWrite]:
    """The snapshot's entries; a damaged snapshot yields what can be read (it is only a cache)."""
    try:
        raw = json.loads(data)
        rows = raw["pending"] if isinstance(raw, dict) else []
    except (ValueError, KeyError, TypeError):
        return []
    found = []
    for row in rows if isinstance(rows, list) else []:
        with suppress(TypeError):
            found.append(PendingWrite(**row))
    return found
