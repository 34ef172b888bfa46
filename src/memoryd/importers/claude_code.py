"""Claude Code's own auto-memory (`~/.claude/projects/<project>/memory/`) → drafts; where it lives,
the mapping, and how a folder's project is found: docs/import.md, "claude-code". Symbolic links are
never followed, and a transcript is outside text: it never runs git nor names another folder's project."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from memoryd.errors import BadImportInput
from memoryd.importers.bettermemory import split_frontmatter
from memoryd.importers.draft import Draft, open_regular, read_text, slug
from memoryd.importers.markdown import _note_files

SOURCE_SCOPE = "import:claude-code"
INDEX = "MEMORY.md"
MEMORY_DIR = "memory"
TRANSCRIPT_HEAD_BYTES = 256 * 1024  # the cwd is on the first lines; a transcript can be megabytes
MAX_TRANSCRIPTS = 20
USER_TYPE = "user"
ENCODED_MAX = 200                 # Claude Code cuts a longer folder name and adds a hash
GIT_CONFIG_BYTES = 64 * 1024
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def default_root() -> Path:
    """Where Claude Code keeps every project's folder: `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"


def read(target: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """Drafts of every topic file in the memory folder(s) `target` is or holds."""
    if not (folders := memory_folders(target, skipped)):
        raise BadImportInput(target, "no Claude Code memory folder here (expected <project>/memory/ under "
                             f"{default_root()}, holding MEMORY.md and topic .md files)")
    drafts: list[Draft] = []
    for folder in folders:
        if (scopes := project_scopes(folder.parent, skipped)) is None:
            continue
        for path in _note_files(folder, skipped):
            if path.name != INDEX:
                draft = _topic(path, f"{folder.parent.name}/{path.relative_to(folder.parent)}", scopes, skipped)
                drafts += [draft] if draft else []
    return drafts


def memory_folders(target: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """`target` itself when it is a memory folder, its `memory/` when it is a project folder, else
    the `*/memory/` folders below it (the projects folder). Links below `target` are not followed."""
    if target.is_file():
        raise BadImportInput(target, "a file: give a memory folder, a project folder or the projects folder")
    if target.name == MEMORY_DIR:
        return [target]
    if (target / MEMORY_DIR).is_dir() or (target / MEMORY_DIR).is_symlink():
        candidates = [target / MEMORY_DIR]
    else:
        candidates = sorted(p / MEMORY_DIR for p in target.iterdir() if not p.is_symlink() and p.is_dir())
    skipped += [(str(folder), "a symbolic link to a folder (not followed)") for folder in candidates
                if folder.is_symlink()]
    return [folder for folder in candidates if not folder.is_symlink() and folder.is_dir()]


def project_scopes(project_dir: Path, skipped: list[tuple[str, str]]) -> tuple[str, ...] | None:
    """(`projects:<name>`,) for the cwd the folder's transcripts name, () when none does; None (reported)
    when that cwd is not the path the folder is named for (docs/import.md, "claude-code")."""
    if (cwd := transcript_cwd(project_dir)) is None:
        return ()
    if not named_for(project_dir.name, cwd):
        skipped.append((str(project_dir), f"its transcripts name {cwd[:200]!r}, not the path the folder is named "
                                          "for; skipped (import the memory folder with --scope to keep it)"))
        return None
    name = repo_project(cwd) or slug(Path(cwd).name)
    return (f"projects:{name}",) if name else ()


def named_for(folder: str, cwd: str) -> bool:
    """Whether Claude Code would name a project folder `folder` for `cwd`; past ENCODED_MAX characters
    only the cut is compared (the hash it adds cannot be recomputed)."""
    encoded = _NOT_ALNUM.sub("-", cwd)
    return folder == encoded if len(encoded) <= ENCODED_MAX else folder.startswith(encoded[:ENCODED_MAX])


def repo_project(cwd: str) -> str | None:
    """The project the bridge would name for `cwd`, read from `<cwd>/.git/config` as a plain file
    (bounded, no link followed) — never by running git in a path a transcript named."""
    from memoryd import identity

    git_dir = os.path.join(cwd, ".git")
    config = _head(os.path.join(git_dir, "config"), GIT_CONFIG_BYTES)
    return None if config is None else identity.project_name(_origin(config.decode("utf-8", "replace")), git_dir)


def _origin(config: str) -> str | None:
    section, url = None, None
    for raw in config.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = " ".join(line.strip("[]").split()).lower()
        elif section == 'remote "origin"' and line.split("=", 1)[0].strip().lower() == "url" and "=" in line:
            url = line.split("=", 1)[1].strip().strip('"')
    return url or None


def transcript_cwd(project_dir: Path) -> str | None:
    """The first absolute `cwd` in the head of the folder's transcripts (regular files only)."""
    for path in sorted(project_dir.glob("*.jsonl"))[:MAX_TRANSCRIPTS]:
        for line in (_head(path, TRANSCRIPT_HEAD_BYTES) or b"").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by the head, or not JSON: the next one may say
            cwd = entry.get("cwd") if isinstance(entry, dict) else None
            if isinstance(cwd, str) and os.path.isabs(cwd):
                return cwd
    return None


def _head(path: str | Path, limit: int) -> bytes | None:
    """The first `limit` bytes of a regular file that is not a link; None for anything else."""
    try:
        with open_regular(path, follow_link=False) as handle:
            return handle.read(limit)
    except BadImportInput:
        return None


def _topic(path: Path, origin: str, scopes: tuple[str, ...], skipped: list[tuple[str, str]]) -> Draft | None:
    text = read_text(path, follow_link=False)
    meta, body = split_frontmatter(path, text) if text.startswith("---") else ({}, text)
    extra = found if isinstance(found := meta.get("metadata"), dict) else {}
    kind = extra.get("type") or meta.get("type")
    description = found if isinstance(found := meta.get("description"), str) else ""
    body, description = body.strip(), description.strip()
    lead = [description] if description and description not in body else []
    if not (content := "\n\n".join([*lead, body]).strip()):
        skipped.append((str(path), "an empty memory file"))
        return None
    user = kind == USER_TYPE
    return Draft(content=content, scopes=(*scopes, SOURCE_SCOPE), origin=f"{origin}:1",
                 category="user-inference" if user else "fact", source="inferred" if user else "explicit-statement")
