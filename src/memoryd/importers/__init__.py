"""Read other memory tools' stores into `Draft`s for memory_write (docs/import.md). Pure: nothing here
talks to the daemon, so a dry run needs none. Import contract: the stdlib, yaml and the shared
modules — never `memoryd.daemon`."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

from memoryd.errors import BadImportInput
from memoryd.importers.draft import Draft, check_scopes, with_scopes

__all__ = ["FORMATS", "Draft", "Skipped", "read"]


# (path, why) of each file or folder a parser passed over, for the import report
Skipped = list[tuple[str, str]]

# format name → (its module here, what PATH is); the CLI's choices and help come from here.
FORMATS: dict[str, tuple[str, str]] = {
    "bettermemory": ("bettermemory", "its store directory (BETTERMEMORY_DIR, ~/.claude-memory)"),
    "server-memory": ("server_memory", "the knowledge graph file (MEMORY_FILE_PATH, memory.jsonl)"),
    "markdown": ("markdown", "a .md file (CLAUDE.md, AGENTS.md, notes) or a folder of them"),
    "claude-code": ("claude_code", "Claude Code's <project>/memory/ folder(s); default ~/.claude/projects"),
    "memoryd-export": ("memoryd_export", "a tar.gz that `memoryd export` wrote"),
}


def read(fmt: str, path: str | Path, extra_scopes: Iterable[str] = (), skipped: Skipped | None = None) -> list[Draft]:
    """Every draft of `path` read as `fmt`, with `extra_scopes` added to each; BadImportInput (naming the
    file and line) when it cannot be read as that format. Files passed over are added to `skipped`."""
    if fmt not in FORMATS:
        raise BadImportInput(fmt, f"unknown format; one of {', '.join(FORMATS)}")
    target = Path(path)
    if not target.exists():
        raise BadImportInput(target, "no such file or directory")
    parser = importlib.import_module(f"memoryd.importers.{FORMATS[fmt][0]}")  # each imported only when used
    drafts: list[Draft] = parser.read(target, [] if skipped is None else skipped)
    return with_scopes(drafts, check_scopes(extra_scopes))
