"""What a pulled file must be before the live store takes it (the checks: docs/sync.md, "Admission
of pulled files"). A file that fails is quarantined with the reason, never indexed or served."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace

from memoryd.daemon.credentials.detector import find_credentials
from memoryd.daemon.identity import idents
from memoryd.daemon.memories.args import check_scope_list
from memoryd.daemon.memories.gates import scan_taint
from memoryd.daemon.memories.records import CATEGORIES, CONFIDENCES, HANDOFF, Memory, from_meta
from memoryd.daemon.storage import frontmatter
from memoryd.daemon.sync.layout import CONFLICTS, FOLDER_OF, TOMB
from memoryd.daemon.sync.merge import STAMP_FIELDS, horizon, stamp_ms
from memoryd.errors import InvalidParams

FOLDERS = {folder: state for state, folder in FOLDER_OF.items()}
REGULAR_MODES = ("100644", "100755")
_CONFLICT_RE = re.compile(rf"{CONFLICTS}/([^/]*)/([0-9a-f]{{64}})\.md")


@dataclass(frozen=True)
class Admitted:
    memory_id: str
    state: str
    memory: Memory


class Refused(Exception):
    """A pulled file the store will not take; `reason` is short and holds no file content."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def record_path(path: str) -> tuple[str, str] | None:
    """(id, state) for `memories/<ulid>.md` or `tombstones/<ulid>.md`; None for anything else."""
    folder, _, name = path.partition("/")
    state = FOLDERS.get(folder)
    if state is None or "/" in name or not name.endswith(".md") or not idents.is_ulid(name[:-3]):
        return None
    return name[:-3], state


def conflict_path(path: str) -> tuple[str, str] | None:
    """(id, sha256) for `conflicts/<ulid>/<sha256>.md`, the kept loser of a conflict."""
    named = _CONFLICT_RE.fullmatch(path)
    return (named[1], named[2]) if named and idents.is_ulid(named[1]) else None


def size_cap(max_content_bytes: int) -> int:
    """The largest record file: the content and frontmatter caps and the two fences."""
    return max_content_bytes + frontmatter.MAX_FRONTMATTER_BYTES + 16


def check_stamps(memory: Memory, not_after: int) -> None:
    """Every stamp is in the store's format (else reads break) and not past `not_after` in ms."""
    for name in STAMP_FIELDS:
        value = getattr(memory, name)
        if value is None and name in ("last_verified_at", "removed_at"):
            continue
        if (stamp := stamp_ms(value)) is None:
            raise Refused(f"{name} is not an ISO-8601 UTC stamp (YYYY-MM-DDTHH:MM:SS.mmmZ)")
        if stamp > not_after:
            raise Refused(f"{name} is in the future")


def check(path: str, mode: str, data: bytes, max_content_bytes: int, not_after: int | None = None) -> Admitted:
    """The record in `data` (pulled as `path` with git `mode`), or `Refused`; `not_after`: `horizon()`."""
    if mode == "120000":
        raise Refused("symbolic link")
    if mode not in REGULAR_MODES:
        raise Refused(f"not a regular file (git mode {mode})")
    named = record_path(path)
    if named is None:
        raise Refused("outside the synced folders, or not a <ulid>.md name")
    memory_id, state = named
    if len(data) > size_cap(max_content_bytes):
        raise Refused(f"over the size cap ({len(data)} bytes)")
    try:
        meta, body = frontmatter.parse(data)
        if meta.get("id") != memory_id:
            raise Refused("id does not match the file name")
        memory = from_meta(meta, body, memory_id)
    except (frontmatter.BadRecord, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise Refused(f"not a record: {str(exc)[:120]}") from None
    if len(body.encode()) > max_content_bytes:
        raise Refused(f"content over max_content_bytes ({max_content_bytes})")
    check_stamps(memory, horizon() if not_after is None else not_after)
    if (state == TOMB) != (memory.removed_at is not None):
        raise Refused("a tombstone without removed_at" if state == TOMB else "a live memory with removed_at")
    if memory.category == HANDOFF:
        raise Refused("a handoff (handoffs stay on their machine)")
    if memory.category not in CATEGORIES or memory.confidence not in CONFIDENCES:
        raise Refused("a category or confidence memoryd does not know")
    try:
        check_scope_list("scopes", list(memory.scopes))
    except InvalidParams:
        raise Refused("a scope memoryd would not write") from None
    if scan_taint(body) and not memory.tainted:  # the sender's scan said clean: this one disagrees
        raise Refused("prompt-injection markers in a record marked clean")
    markers = find_credentials(body + "\n" + (memory.verification_note or "") + "\n" + (memory.removed_reason or ""))
    if markers:
        raise Refused(f"holds a credential ({', '.join(sorted({m['kind'] for m in markers}))})")
    return Admitted(memory_id, state, memory)


def buries(state: str, pulled: Memory, live: Memory | None, live_sha: str | None, kept: Collection[str]) -> bool:
    """Whether a pulled version may replace this machine's `live` one (file sha `live_sha`; `kept`: the
    shas under `conflicts/<id>/`); the rule: docs/sync.md, "Admission of pulled files"."""
    if state != TOMB or live is None:
        return True
    if replace(pulled, removed_at=None, removed_reason=None) == live:
        return True
    if live_sha is None or live_sha not in kept:
        return False
    removed, updated = stamp_ms(pulled.removed_at), stamp_ms(live.updated)
    return removed is not None and updated is not None and removed >= updated  # a valid removal, no older
