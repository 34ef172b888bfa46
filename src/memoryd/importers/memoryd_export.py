"""`memoryd export`'s tar.gz → drafts: the way back from an export, into this or another store.

The archive is read as untrusted and never extracted: it is streamed member by member, and any
member that is a link (symbolic or hard), a device, a FIFO, or named with an absolute path or a
`..` step is refused, the whole import with it (`memoryd export` never writes one, so it means
the file was made or changed by something else). Only `memories/<ULID>.md` and
`tombstones/<ULID>.md` are read, each at most MAX_RECORD_BYTES; episodes, sessions and the event
log belong to the exporting machine and are passed over unread.

Each record is parsed as the store parses its own files (a `---` YAML frontmatter read by
`safe_yaml`, which refuses anchors, aliases, tags and deep nesting unbuilt, then the body) and
must name the id its file is named after. Mapping: body → content; scopes, category, confidence
and source as they are (the same vocabularies); `last_verified_at` → `verified_at` (recorded with
memory_verify). A tombstone is written, then removed again, so the `previously_removed` gate
keeps the decision (a removed user-inference as a fact, like bettermemory's). Handoffs are passed
over (reported as skipped): they belong to the exporting machine's sessions, as in sync. Ids,
dates, links and provenance are not carried: the memories are new in this store.
"""

from __future__ import annotations

import os
import re
import stat
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from memoryd.errors import BadImportInput
from memoryd.importers.bettermemory import split_frontmatter
from memoryd.importers.draft import CATEGORIES, CONFIDENCES, SOURCES, Draft, valid_scope

SOURCE_SCOPE = "import:memoryd-export"
MAX_RECORD_BYTES = 8 << 20  # a record: content (max_content_bytes ≤ 4 MB) plus its frontmatter
MAX_MEMBERS = 2_000_000  # far above any store; bounds the walk of a crafted archive
RECORD_RE = re.compile(r"(memories|tombstones)/([0-9A-HJKMNP-TV-Z]{26})\.md")
HANDOFF = "handoff"


def read(path: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """Every memory and tombstone of the archive at `path`, oldest `created` first."""
    found = [_record(path, name, data, skipped) for name, data in _records(path)]
    if not found:
        raise BadImportInput(path, "no memories/<id>.md or tombstones/<id>.md in this archive "
                             "(is it a `memoryd export` tar.gz?)")
    found.sort(key=lambda pair: (pair[0], pair[1].origin if pair[1] else ""))
    return [draft for _, draft in found if draft is not None]


def _records(path: Path) -> list[tuple[str, bytes]]:
    """(member name, bytes) of each record member; BadImportInput for a member that is unsafe or
    too big, or an archive that is not a gzip'd tar."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO named as PATH must not hang the import
    except OSError as exc:
        raise BadImportInput(path, f"cannot read: {exc.strerror or exc}") from None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise BadImportInput(path, "not a regular file")
        try:
            with tarfile.open(fileobj=handle, mode="r|gz") as archive:  # a stream: nothing seeks, nothing lands on disk
                return _walk(path, archive)
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise BadImportInput(path, f"not a readable tar.gz archive ({type(exc).__name__}: {exc})") from None


def _walk(path: Path, archive: tarfile.TarFile) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for count, member in enumerate(archive, 1):
        if count > MAX_MEMBERS:
            raise BadImportInput(path, f"more than {MAX_MEMBERS} members; refused")
        _check_member(path, member)
        if not (member.isreg() and RECORD_RE.fullmatch(member.name)):
            continue
        if member.size > MAX_RECORD_BYTES:
            raise BadImportInput(path, f"member {member.name!r} is {member.size} bytes, over the "
                                 f"{MAX_RECORD_BYTES >> 20} MiB a record may hold; refused")
        extracted = archive.extractfile(member)
        assert extracted is not None  # a regular member
        out.append((member.name, extracted.read(MAX_RECORD_BYTES + 1)))
    return out


def _check_member(path: Path, member: tarfile.TarInfo) -> None:
    """Refuse what `memoryd export` never writes and an extraction would act on: links, devices,
    FIFOs, and names that climb out (`..`) or start at the root."""
    parts = PurePosixPath(member.name).parts
    if member.name.startswith(("/", "\\")) or ".." in parts or "\\" in member.name:
        raise BadImportInput(path, f"member {member.name!r} names a path outside the archive; refused")
    if member.issym() or member.islnk():
        raise BadImportInput(path, f"member {member.name!r} is a link (to {member.linkname!r}); refused")
    if not (member.isreg() or member.isdir()):
        raise BadImportInput(path, f"member {member.name!r} is a device or FIFO, not a file; refused")


def _record(path: Path, name: str, data: bytes, skipped: list[tuple[str, str]]) -> tuple[str, Draft | None]:
    """(created, draft) of one record member; a handoff → (created, None), noted in `skipped`."""
    where = f"{path}[{name}]"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadImportInput(where, "not UTF-8 text", data[: exc.start].count(b"\n") + 1) from None
    meta, body = split_frontmatter(Path(where), text)
    memory_id = RECORD_RE.fullmatch(name).group(2)  # type: ignore[union-attr]  # matched in _walk
    if meta.get("id") != memory_id:
        raise BadImportInput(where, f"its id {meta.get('id')!r} is not the file's name", 2)
    created = str(meta.get("created") or "")
    if meta.get("category") == HANDOFF:
        skipped.append((name, "a session handoff (it stays with the exporting machine's sessions)"))
        return created, None
    content = body.strip()
    if not content:
        raise BadImportInput(where, "the record has no body")
    removed = name.startswith("tombstones/")
    category = _field(where, meta, "category", CATEGORIES)
    return created, Draft(
        content=content, scopes=(*_scopes(where, meta), SOURCE_SCOPE), origin=name,
        category="fact" if removed and category == "user-inference" else category,
        confidence=_field(where, meta, "confidence", CONFIDENCES), source=_field(where, meta, "source", SOURCES),
        removed_reason=_removal(meta) if removed else None,
        verified_at=str(meta["last_verified_at"]) if meta.get("last_verified_at") else None)


def _field(where: str, meta: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = meta.get(key)
    if value not in allowed:
        raise BadImportInput(where, f"{key} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _scopes(where: str, meta: dict[str, Any]) -> list[str]:
    scopes = meta.get("scopes") or []
    if not isinstance(scopes, list) or not all(isinstance(s, str) and valid_scope(s) for s in scopes):
        raise BadImportInput(where, f"scopes {scopes!r} are not a list of scopes")
    return list(scopes)


def _removal(meta: dict[str, Any]) -> str:
    when = str(meta.get("removed_at") or "")[:10]
    reason = str(meta.get("removed_reason") or "no reason given").strip()
    return f"removed in the exported store{' on ' + when if when else ''}: {reason}"
