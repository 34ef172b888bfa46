"""`memoryd export`'s tar.gz → drafts. The archive is untrusted: streamed, never extracted, every
member checked and every size bounded as it is read (docs/import.md, "archives"); only
`memories/<ULID>.md` and `tombstones/<ULID>.md` are parsed, each naming the id it is filed under."""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any

from memoryd.errors import BadImportInput
from memoryd.importers.bettermemory import removal_note, split_frontmatter
from memoryd.importers.draft import CATEGORIES, CONFIDENCES, SOURCES, Draft, choice, open_regular, scopes_of

SOURCE_SCOPE = "import:memoryd-export"
MAX_RECORD_BYTES = 8 << 20  # a record: content (max_content_bytes ≤ 4 MB) plus its frontmatter
MAX_MEMBERS = 2_000_000  # far above any store; bounds the walk of a crafted archive
MAX_RECORDS_BYTES = 256 << 20   # all records together: ~2.5x a 100k-memory store's text
MAX_ARCHIVE_BYTES = 4 << 30     # everything unpacked, records or not: a gzip bomb stops here
MAX_HEADER_BYTES = 64 << 10     # a pax or GNU long-name header's value; `memoryd export` writes none
LONG_HEADER_TYPES = (b"x", b"g", b"L", b"K")
BLOCK = 512
RECORD_RE = re.compile(r"(memories|tombstones)/([0-9A-HJKMNP-TV-Z]{26})\.md")
HANDOFF = "handoff"


def read(path: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """Every memory and tombstone of the archive at `path`, oldest `created` first; a handoff is
    passed over (noted in `skipped`): it belongs to the exporting machine's sessions."""
    with opened(path) as archive:
        found = [_record(path, name, data, skipped) for name, data in _walk(path, archive)]
    if not found:
        raise BadImportInput(path, "no memories/<id>.md or tombstones/<id>.md in this archive "
                             "(is it a `memoryd export` tar.gz?)")
    found.sort(key=lambda pair: (pair[0], pair[1].origin if pair[1] else ""))
    return [draft for _, draft in found if draft is not None]


Members = Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]  # each with its reader (None: not a file)


@contextmanager
def opened(path: Path) -> Iterator[Members]:
    """The archive at `path`, streamed through the guard: each member comes once it passed
    `_check_member` (and the member count its bound). Also `memoryd restore`'s reader."""
    with open_regular(path) as handle:
        try:
            # We gunzip and watch each tar header ourselves (TarGuard): tarfile reads a pax or GNU
            # long-name header's whole value into memory before any check of ours could run.
            with gzip.GzipFile(fileobj=handle) as unzipped:
                guard: Any = TarGuard(unzipped, path)  # a file-like reader, as tarfile's stream mode reads one
                with tarfile.open(fileobj=guard, mode="r|") as archive:
                    yield _checked(path, archive)
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise BadImportInput(path, f"not a readable tar.gz archive ({type(exc).__name__}: {exc})") from None


def _checked(path: Path, archive: tarfile.TarFile) -> Members:
    for count, member in enumerate(archive, 1):
        if count > MAX_MEMBERS:
            raise BadImportInput(path, f"more than {MAX_MEMBERS} members; refused")
        _check_member(path, member)
        yield member, archive.extractfile(member)


def _walk(path: Path, archive: Members) -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of each record member, one at a time, each and all together bounded."""
    held = 0
    for member, extracted in archive:
        if not (member.isreg() and RECORD_RE.fullmatch(member.name)):
            continue
        if member.size > MAX_RECORD_BYTES:
            raise BadImportInput(path, f"member {member.name!r} is {member.size} bytes, over the "
                                 f"{MAX_RECORD_BYTES >> 20} MiB a record may hold; refused")
        held += member.size
        if held > MAX_RECORDS_BYTES:
            raise BadImportInput(path, f"its records hold over {MAX_RECORDS_BYTES >> 20} MiB; refused")
        assert extracted is not None  # a regular member
        yield member.name, extracted.read(MAX_RECORD_BYTES + 1)


class TarGuard:
    """The gunzipped stream tarfile reads, refused past MAX_ARCHIVE_BYTES or at a pax/GNU header whose
    value would pass MAX_HEADER_BYTES, each header looked at before tarfile allocates its value."""

    def __init__(self, raw: Any, path: Path) -> None:
        self.raw, self.path = raw, path
        self.pos = 0          # bytes handed to tarfile so far
        self.next_header = 0  # where the next header block starts
        self.partial = b""    # a header block split across two reads

    def read(self, size: int = -1) -> bytes:
        data: bytes = self.raw.read(size if size >= 0 else BLOCK * 20)
        start, self.pos = self.pos, self.pos + len(data)
        if self.pos > MAX_ARCHIVE_BYTES:
            raise BadImportInput(self.path, f"it unpacks to over {MAX_ARCHIVE_BYTES >> 30} GiB; refused")
        while self.next_header < self.pos:
            offset = self.next_header - start
            block = self.partial + data[max(0, offset) : offset + BLOCK]
            if len(block) < BLOCK:  # the rest comes with the next read
                self.partial = block
                break
            self.partial = b""
            self.next_header += BLOCK + self._data_span(block)
        return data

    def _data_span(self, block: bytes) -> int:
        if block == bytes(BLOCK):
            return 0  # an end-of-archive block
        size = _tar_number(block[124:136])
        if block[156:157] in LONG_HEADER_TYPES and size > MAX_HEADER_BYTES:
            raise BadImportInput(self.path, f"a {block[156:157].decode()!r} header of {size} bytes (over "
                                 f"{MAX_HEADER_BYTES >> 10} KiB); refused")
        return -(-size // BLOCK) * BLOCK  # the member's data, in whole blocks


def _tar_number(field: bytes) -> int:
    """A tar header's number: octal digits, or base-256 when the first byte's high bit is set."""
    if field[:1] and field[0] & 0x80:
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    digits = field.split(b"\0", 1)[0].strip()
    try:
        return int(digits or b"0", 8)
    except ValueError:
        return 0  # tarfile refuses such a header itself


def _check_member(path: Path, member: tarfile.TarInfo) -> None:
    """Refuse what `memoryd export` never writes: links, devices, FIFOs, names that climb out or are absolute."""
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
    if not (content := body.strip()):
        raise BadImportInput(where, "the record has no body")
    removed = name.startswith("tombstones/")
    category = choice(where, meta, "category", CATEGORIES)
    return created, Draft(
        content=content, scopes=(*scopes_of(where, meta), SOURCE_SCOPE), origin=name,
        category="fact" if removed and category == "user-inference" else category,
        confidence=choice(where, meta, "confidence", CONFIDENCES), source=choice(where, meta, "source", SOURCES),
        removed_reason=removal_note("the exported store", str(meta.get("removed_at") or ""), meta.get("removed_reason"))
        if removed else None, verified_at=str(meta["last_verified_at"]) if meta.get("last_verified_at") else None)

