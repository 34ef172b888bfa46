"""bettermemory's store directory (`BETTERMEMORY_DIR`, schema_version 1) → drafts: live memories and
tombstones, each a YAML frontmatter and a body; mapping and what is passed over: docs/import.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd import safe_yaml
from memoryd.errors import BadImportInput
from memoryd.importers.draft import CATEGORIES, CONFIDENCES, SOURCES, Draft, choice, read_text, scopes_of

TOMBSTONES = ".tombstones"
QUARANTINE = ".quarantine.json"
SOURCE_SCOPE = "import:bettermemory"
SCHEMA_VERSION = 1  # the newest frontmatter shape this reader knows


def read(root: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """Live memories and tombstones of a store directory (or one memory file), oldest first."""
    files = [root] if root.is_file() else _memory_files(root, skipped)
    if not files:
        raise BadImportInput(root, "no bettermemory memory files here (expected <date>-<slug>-<id>.md "
                             "files with YAML frontmatter, as in BETTERMEMORY_DIR)")
    parsed = sorted((_parse(path, follow_link=path == root) for path in files), key=lambda p: (p[0], p[1].origin))
    return [draft for _, draft in parsed]


def _memory_files(root: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """Top-level and `.tombstones/` `*.md` files, never a link (reported) nor one bettermemory quarantined."""
    refused = _quarantined(root)

    def plain(entry: Path) -> bool:
        if entry.suffix != ".md" or entry.name.startswith(".") or entry.name in refused:
            return False
        if entry.is_symlink():
            skipped.append((str(entry), "a symbolic link (not followed)"))
            return False
        return entry.is_file()

    files = sorted(e for e in root.iterdir() if plain(e))
    tombstones = root / TOMBSTONES
    if tombstones.is_symlink():
        skipped.append((str(tombstones), "a symbolic link to a folder (not followed)"))
    elif tombstones.is_dir():
        files += sorted(e for e in tombstones.iterdir() if plain(e))
    return files


def _quarantined(root: Path) -> set[str]:
    """File names `.quarantine.json` lists (`{"files": {name: …}}`); damaged, none, as bettermemory reads it."""
    try:
        payload = json.loads(read_text(root / QUARANTINE, follow_link=False))
    except (BadImportInput, ValueError, RecursionError):
        return set()
    files = payload.get("files") if isinstance(payload, dict) else None
    return set(files) if isinstance(files, dict) else set()


def split_frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str]:
    """(frontmatter mapping, body) of a `---`-fenced file; BadImportInput naming the line."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise BadImportInput(path, "no YAML frontmatter (the file must start with '---')", 1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise BadImportInput(path, "the frontmatter has no closing '---'", 1)
    try:  # anchors (a few hundred bytes can expand to gigabytes) and deep nesting are refused unbuilt
        meta = safe_yaml.load("".join(lines[1:end]))
    except safe_yaml.YAMLRefused as exc:
        line = exc.line + 1 if exc.line is not None else 2  # +1 for the opening fence
        raise BadImportInput(path, f"frontmatter: {exc.reason}", line) from None
    if not isinstance(meta, dict):
        raise BadImportInput(path, "the frontmatter is not a mapping", 2)
    return meta, "".join(lines[end + 1:])


def _parse(path: Path, follow_link: bool) -> tuple[str, Draft]:
    """(created, draft) of one memory or tombstone file."""
    text = read_text(path, follow_link)
    meta, body = split_frontmatter(path, text)
    content = body.strip()

    def line_of(field: str) -> int | None:
        return next((n for n, line in enumerate(text.splitlines(), 1) if line.startswith(f"{field}:")), None)

    version = meta.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise BadImportInput(path, f"schema_version {version!r} is newer than this importer reads "
                             f"({SCHEMA_VERSION})", line_of("schema_version"))
    if not isinstance(meta.get("id"), str) or not meta["id"]:
        raise BadImportInput(path, "the frontmatter has no 'id'", 2)
    if not content:
        raise BadImportInput(path, "the memory has no body")
    removed = "removed" in meta or "removed_reason" in meta
    category = choice(path, meta, "category", CATEGORIES, "fact", line_of)
    # A removed user-inference is written as a fact: it is never live, and a claim about the user would wait.
    draft = Draft(content=content, scopes=(*scopes_of(path, meta, line_of), SOURCE_SCOPE),
                  origin=f"bettermemory:{meta['id']}",
                  category="fact" if removed and category == "user-inference" else category,
                  confidence=choice(path, meta, "confidence", CONFIDENCES, "medium", line_of),
                  source=choice(path, meta, "source", SOURCES, "explicit-statement", line_of),
                  removed_reason=removal_note("bettermemory", _iso(meta.get("removed")), meta.get("removed_reason"))
                  if removed else None, verified_at=_iso(meta.get("last_verified_at")))
    return _iso(meta.get("created")) or "", draft


def removal_note(where: str, when: str | None, reason: Any) -> str:
    """A tombstone's `removed_reason`: where and when (a stamp's date) the source removed it, and why."""
    return f"removed in {where}{' on ' + when[:10] if when else ''}: {str(reason or 'no reason given').strip()}"


def _iso(value: Any) -> str | None:
    """A frontmatter timestamp (YAML gives a datetime; a string is kept) as ISO-8601 UTC."""
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return stamp.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value) if value else None
