"""Markdown notes (a `CLAUDE.md`, an `AGENTS.md`, a folder of `.md` files) → drafts: a memory per top-level
bullet and per section's prose, each prefixed with its heading path (docs/import.md, "markdown")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.errors import BadImportInput
from memoryd.importers.draft import Draft, read_text

SOURCE_SCOPE = "import:markdown"
MAX_SECTION_CHARS = 2000
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
BULLET_RE = re.compile(r"^(?:[-*+]|\d{1,9}[.)])\s+(.*)$")
FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
RULE_RE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")


@dataclass
class Block:
    kind: str  # "bullet", or "prose" (a run of prose lines)
    line: int  # the line it starts on
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return _dedent("\n".join(self.lines)).strip()


@dataclass
class Section:
    path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)


def read(target: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """Drafts of one `.md` file, or of every `.md` file under a folder (hidden ones skipped)."""
    if target.is_file():
        return _file_drafts(target, target.name)
    if not (files := _note_files(target, skipped)):
        raise BadImportInput(target, "no .md files here")
    return [d for path in files for d in _file_drafts(path, str(path.relative_to(target)), follow_link=False)]


def _note_files(root: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """The `.md` files below `root`, hidden ones left out. A symbolic link at any depth is never followed
    but reported in `skipped`: it can point anywhere, and what is imported may sync to other machines."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):  # a linked folder is listed in `dirs`, never entered
        here = Path(folder)
        dirs.sort()  # os.walk descends in this order: the report and the drafts come out stable
        links = [name for name in dirs if not name.startswith(".") and (here / name).is_symlink()]
        skipped += [(str(here / name), "a symbolic link to a folder (not followed)") for name in links]
        dirs[:] = [name for name in dirs if not name.startswith(".") and name not in links]
        for name in sorted(files):
            if name.startswith(".") or not name.endswith(".md"):
                continue
            if (here / name).is_symlink():
                skipped.append((str(here / name), "a symbolic link (not followed)"))
            elif (here / name).is_file():
                found.append(here / name)
    return sorted(found)


def _file_drafts(path: Path, label: str, follow_link: bool = True) -> list[Draft]:
    text = read_text(path, follow_link)
    if "\x00" in text:
        raise BadImportInput(path, "a binary file, not markdown", text[: text.index("\x00")].count("\n") + 1)
    found: list[tuple[int, str]] = []
    for section in sections(text.splitlines(), path.name):
        context = " › ".join(section.path)
        pieces = [(b.line, b.text()) for b in section.blocks if b.kind == "bullet" and b.text()]
        found += [(line, f"{context}: {body}" if context else body)
                  for line, body in [*pieces, *_prose_chunks(section)]]
    return [Draft(content=body, scopes=(SOURCE_SCOPE,), origin=f"{label}:{line}") for line, body in sorted(found)]


def sections(lines: list[str], file_name: str = "") -> list[Section]:
    body_start = _after_frontmatter(lines)
    # 0 until the first heading; then 1 when it is a `# CLAUDE.md`-style title that only repeats the
    # file's name (it adds nothing to a note: left out), else None (`# Deploying` stays in the context).
    title_level: int | None = 0
    stack: list[tuple[int, str]] = []
    current = Section(())
    found = [current]
    fence: str | None = None
    for number, line in enumerate(lines[body_start:], body_start + 1):
        heading = None if fence else HEADING_RE.match(line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2).strip()
            if title_level == 0:
                names = (file_name.lower(), Path(file_name).stem.lower())
                title_level = 1 if level == 1 and title.lower() in names else None
            stack = [(lvl, name) for lvl, name in stack if lvl < level]
            if level != title_level:
                stack.append((level, title))
            current = Section(tuple(name for _, name in stack))
            found.append(current)
            continue
        # A fence's opening line is placed like any line; the lines after it, up to and with the
        # closing fence, follow it into the same block.
        _add_line(current, number, line, inside_fence=fence is not None)
        fence = _fence_after(line, fence)
    return found


def _after_frontmatter(lines: list[str]) -> int:
    """Index of the first line after a leading `---` … `---` block (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    return next((i + 1 for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open fence marker after `line` (None when outside a code block)."""
    if not (match := FENCE_RE.match(line)):
        return fence
    marker = match.group(1)
    if fence is None:
        return marker
    closes = marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker):].strip()
    return None if closes else fence


def _add_line(section: Section, number: int, line: str, inside_fence: bool) -> None:
    """Put `line` in the section's current bullet, a new bullet, or its prose."""
    last = section.blocks[-1] if section.blocks else None
    bullet = None if inside_fence and last is not None else BULLET_RE.match(line)
    if bullet and not line[:1].isspace():
        section.blocks.append(Block("bullet", number, [bullet.group(1)]))
    elif last is not None and (last.kind == "prose" or _continues(last, line, inside_fence)):
        last.lines.append(line)
    elif line.strip() and not RULE_RE.match(line):
        section.blocks.append(Block("prose", number, [line]))


def _continues(bullet: Block, line: str, inside_fence: bool) -> bool:
    """An indented line, a blank line, a code line, or a lazy continuation of the last line."""
    previous = bullet.lines[-1] if bullet.lines else ""
    return inside_fence or not line.strip() or line[:1].isspace() or bool(previous.strip())


def _prose_chunks(section: Section) -> list[tuple[int, str]]:
    """The section's prose as (first line, text) chunks of ~MAX_SECTION_CHARS, cut between paragraphs."""
    chunks: list[tuple[int, list[str]]] = []
    for line, paragraph in (p for b in section.blocks if b.kind == "prose" for p in _paragraphs(b)):
        if not chunks or len("\n\n".join([*chunks[-1][1], paragraph])) > MAX_SECTION_CHARS:
            chunks.append((line, []))
        chunks[-1][1].append(paragraph)
    return [(start, "\n\n".join(parts)) for start, parts in chunks]


def _paragraphs(block: Block) -> list[tuple[int, str]]:
    """(first line, text) of each blank-line-separated paragraph; a code block is one piece."""
    paragraphs: list[tuple[int, list[str]]] = []
    fence, apart = None, True
    for number, line in enumerate(block.lines, block.line):
        if not line.strip() and fence is None:
            apart = True
            continue
        if apart:
            paragraphs.append((number, []))
            apart = False
        paragraphs[-1][1].append(line)
        fence = _fence_after(line, fence)
    texts = [(number, "\n".join(lines).strip()) for number, lines in paragraphs]
    return [(n, p) for n, p in texts if p and not RULE_RE.match(p)]


def _dedent(text: str) -> str:
    """Continuation lines of a bullet lose their common indent (the first line has none)."""
    first, _, rest = text.partition("\n")
    if not rest:
        return first
    indents = [len(line) - len(line.lstrip()) for line in rest.splitlines() if line.strip()]
    cut = min(indents, default=0)
    return first + "\n" + "\n".join(line[cut:] for line in rest.splitlines())
