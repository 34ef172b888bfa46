"""Read other memory tools' stores and turn each remembered thing into a `Draft` for memory_write.

Pure: the parsers read files and return drafts; nothing here talks to the daemon, so a dry run
needs none and the tests need no daemon. `memoryd import` (cli/importing.py) sends each draft
through the real `memory_write`, where the gates dedupe and refuse secrets. Import contract:
the stdlib, yaml and the shared modules — never `memoryd.daemon`.

Every draft carries the scope `import:<format>`, so imported memories can be told apart (and
filtered: `memoryd memories list --scope import:bettermemory`); `memory_write`'s `source` only
takes explicit-statement / inferred / user-correction, so the origin cannot ride there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from memoryd.errors import BadImportInput
from memoryd.importers.draft import Draft, check_scopes, with_scopes

__all__ = ["FORMATS", "Draft", "Skipped", "default_path", "read"]


# (path, why) of each file or folder a parser passed over, for the import report
Skipped = list[tuple[str, str]]


def _bettermemory(path: Path, skipped: Skipped) -> list[Draft]:
    from memoryd.importers import bettermemory

    return bettermemory.read(path, skipped)


def _server_memory(path: Path, skipped: Skipped) -> list[Draft]:
    from memoryd.importers import server_memory

    return server_memory.read(path)


def _markdown(path: Path, skipped: Skipped) -> list[Draft]:
    from memoryd.importers import markdown

    return markdown.read(path, skipped)


def _claude_code(path: Path, skipped: Skipped) -> list[Draft]:
    from memoryd.importers import claude_code

    return claude_code.read(path, skipped)


def _memoryd_export(path: Path, skipped: Skipped) -> list[Draft]:
    from memoryd.importers import memoryd_export

    return memoryd_export.read(path, skipped)


def default_path(fmt: str) -> Path | None:
    """Where a format's store is when PATH is not given (only claude-code has one place)."""
    if fmt == "claude-code":
        from memoryd.importers import claude_code

        return claude_code.default_root()
    return None


# format name → (parser, what PATH is); the CLI's choices and help come from here.
FORMATS: dict[str, tuple[Callable[[Path, Skipped], list[Draft]], str]] = {
    "bettermemory": (_bettermemory, "its store directory (BETTERMEMORY_DIR, ~/.claude-memory)"),
    "server-memory": (_server_memory, "the knowledge graph file (MEMORY_FILE_PATH, memory.jsonl)"),
    "markdown": (_markdown, "a .md file (CLAUDE.md, AGENTS.md, notes) or a folder of them"),
    "claude-code": (_claude_code, "Claude Code's <project>/memory/ folder(s); default ~/.claude/projects"),
    "memoryd-export": (_memoryd_export, "a tar.gz that `memoryd export` wrote"),
}


def read(fmt: str, path: str | Path, extra_scopes: Iterable[str] = (), skipped: Skipped | None = None) -> list[Draft]:
    """Every draft of `path` read as `fmt`, with `extra_scopes` added to each; BadImportInput
    (naming the file and line) when the input cannot be read as that format. Files passed over
    (symbolic links, which are never followed inside a folder) are added to `skipped`."""
    if fmt not in FORMATS:
        raise BadImportInput(fmt, f"unknown format; one of {', '.join(FORMATS)}")
    target = Path(path)
    if not target.exists():
        raise BadImportInput(target, "no such file or directory")
    return with_scopes(FORMATS[fmt][0](target, [] if skipped is None else skipped), check_scopes(extra_scopes))
