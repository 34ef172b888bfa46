"""The sync folder and the names both sides of sync use: all a daemon start needs, without the
worker, git and the merge rule (imports are about a third of a start)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memoryd import fsio
from memoryd.daemon.storage import frontmatter, nofollow

LIVE, TOMB = "live", "tomb"  # a record's two states, in events and in the merge rule
FOLDER_OF = {LIVE: "memories", TOMB: "tombstones"}  # a state's folder, in the clone as in the store
CONFLICTS = "conflicts"  # the clone's folder of kept losers: conflicts/<id>/<sha256>.md
BRANCH = "main"  # the default branch (`worker.pick_branch`); the chosen one is in config.json
_BRANCH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/")


class Layout:
    """`$MEMORYD_HOME/sync/`: config.json (remote, device), repo/ (the clone), quarantine/."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "sync"
        self.repo = self.dir / "repo"
        self.config = self.dir / "config.json"
        self.quarantine = self.dir / "quarantine"
        self.last = self.dir / "last.json"
        self.open_conflicts = self.dir / "open-conflicts.json"

    def read_config(self) -> dict[str, Any]:
        try:
            raw = json.loads(nofollow.read_nofollow(self.config))
        except (OSError, ValueError, frontmatter.BadRecord):
            return {}
        return raw if isinstance(raw, dict) else {}

    def write_json(self, path: Path, value: dict[str, Any]) -> None:
        write_atomic(path, json.dumps(value, indent=1, sort_keys=True).encode())

    def is_set_up(self) -> bool:
        return bool(self.read_config().get("remote")) and nofollow.is_plain_dir(self.repo / ".git")


def branch_of(config: dict[str, Any]) -> str:
    """The branch config.json names, or `main` for none or one not a plain name (a hostile HEAD)."""
    name = config.get("branch")
    if not isinstance(name, str) or not 0 < len(name) <= 100 or not _BRANCH_CHARS.issuperset(name):
        return BRANCH
    return BRANCH if name.startswith(("-", "/")) or name.endswith(("/", ".lock")) or ".." in name else name


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace `path` with `data` (`fsio.replace_atomic`), making its folder if missing."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fsio.replace_atomic(path, data, durable=durable)


def escaped(text: str) -> str:
    """`text` as valid UTF-8: undecodable bytes (surrogates, from `Git.tree`) become `\\xff` escapes."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no undecodable byte stands for
        return text.encode("utf-8", "backslashreplace").decode()


def count_quarantined(layout: Layout) -> int:
    try:
        with open(layout.quarantine / "index.jsonl", encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0
