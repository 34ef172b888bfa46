"""The draft every importer yields, and the small checks they share. Import contract: the stdlib and
`memoryd.errors`; never `memoryd.daemon`."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from memoryd.errors import BadImportInput

# The daemon's scope rule (docs/tools.md, "Scopes"); restated because importers never import
# the daemon, and a draft with a bad scope should fail here, in a dry run, not mid-import.
SCOPE_RE = re.compile(r"^(?=.{1,128}$)[a-z0-9]+(?:[-:][a-z0-9]+)*$")
CATEGORIES = ("fact", "user-inference", "ambient")
CONFIDENCES = ("high", "medium", "low")
SOURCES = ("explicit-statement", "inferred", "user-correction")
TITLE_CHARS = 72
MAX_FILE_BYTES = 64 << 20  # far above any memory store or notes file; bounds what one read holds


@dataclass(frozen=True)
class Draft:
    """One memory to write."""

    content: str
    scopes: tuple[str, ...]
    origin: str  # where it came from: `file:line`, or the source tool's id
    category: str = "fact"
    confidence: str = "medium"
    source: str = "explicit-statement"
    removed_reason: str | None = None  # the source had removed it: written, then removed at once
    verified_at: str | None = None  # the source's last verification (ISO-8601), carried in a `memory_verify` note

    @property
    def title(self) -> str:
        """The first non-blank line, cut to fit a report line."""
        first = next((line.strip() for line in self.content.splitlines() if line.strip()), "")
        return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"


def valid_scope(scope: str) -> bool:
    return bool(SCOPE_RE.match(scope))


def slug(text: str, limit: int = 80) -> str:
    """`text` as one scope level: lowercase `[a-z0-9]` words joined by `-` ("" if none)."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:limit].strip("-")


def with_scopes(drafts: Iterable[Draft], extra: Iterable[str]) -> list[Draft]:
    """Each draft with `extra` scopes appended (deduplicated, order kept)."""
    extra = list(extra)
    return [replace(d, scopes=tuple(dict.fromkeys([*d.scopes, *extra]))) for d in drafts]


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """`scopes` if every one is valid; else BadImportInput naming the first bad one."""
    scopes = list(scopes)
    for scope in scopes:
        if not valid_scope(scope):
            raise BadImportInput("--scope", f"{scope!r} is not a scope (lowercase a-z0-9 words "
                                 "joined by '-' or ':', e.g. projects:web)")
    return scopes


def choice(where: object, meta: dict[str, Any], key: str, allowed: tuple[str, ...], default: str | None = None,
           line_of: Callable[[str], int | None] | None = None) -> str:
    """`meta[key]` when it is one of `allowed` (missing or null: `default`, if given); else BadImportInput,
    at the line `line_of(key)` names."""
    value = meta.get(key)
    if value is None and default is not None:
        return default
    if value not in allowed:
        raise BadImportInput(where, f"{key} {value!r} is not one of {', '.join(allowed)}",
                             line_of(key) if line_of else None)
    return str(value)


def scopes_of(where: object, meta: dict[str, Any], line_of: Callable[[str], int | None] | None = None) -> list[str]:
    """`meta["scopes"]` (none: []) when it is a list of valid scopes; else BadImportInput."""
    scopes = meta.get("scopes") or []
    if not isinstance(scopes, list) or not all(isinstance(s, str) and valid_scope(s) for s in scopes):
        raise BadImportInput(where, f"scopes {scopes!r} are not a list of scopes",
                             line_of("scopes") if line_of else None)
    return list(scopes)


def open_regular(path: str | Path, follow_link: bool = True) -> IO[bytes]:
    """`path` open for reading if it is a regular file (opened without blocking: a FIFO would hang the
    import), else BadImportInput saying why; `follow_link=False` refuses a symbolic link at the last step."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_link else os.O_NOFOLLOW)
    try:
        handle = open(os.open(path, flags), "rb")
    except OSError as exc:
        raise BadImportInput(path, "a symbolic link (not followed)" if exc.errno == errno.ELOOP and not follow_link
                             else f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise BadImportInput(path, "not a regular file")
    return handle


def read_text(path: Path, follow_link: bool = True) -> str:
    """A regular file (`open_regular`) of at most MAX_FILE_BYTES as UTF-8, or BadImportInput saying why not."""
    with open_regular(path, follow_link) as handle:
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise BadImportInput(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise BadImportInput(path, f"over the {MAX_FILE_BYTES >> 20} MiB an import reads from one file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadImportInput(path, "not UTF-8 text", data[: exc.start].count(b"\n") + 1) from None
