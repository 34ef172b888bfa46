"""`memoryd export [PATH]`: a portable tar.gz of the store (memories, tombstones, episodes,
sessions, log): a full backup, which `memoryd restore` brings back whole into an empty store.

Records are replaced atomically, so every file in the archive is a whole record even while the
daemon runs; `state/` is left out because it is derived. Symbolic links are left out too (the
daemon never follows one in its store, so they hold nothing of it).
"""

from __future__ import annotations

import sys
import tarfile
import time
from pathlib import Path

PARTS = ("memories", "tombstones", "episodes", "sessions", "events")


def main(path: str | None) -> int:
    from memoryd import paths

    root = paths.store_root()
    if not root.is_dir():
        print(f"memoryd: no store at {root}", file=sys.stderr)
        return 1
    target = Path(path or f"memoryd-export-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz").absolute()
    count = 0
    with tarfile.open(target, "w:gz") as archive:
        for part in PARTS:
            if (root / part).is_symlink():
                continue
            for file in sorted((root / part).rglob("*")):  # rglob does not descend into linked dirs
                if file.is_file() and not file.is_symlink() and not file.name.startswith(".tmp-"):
                    archive.add(file, arcname=str(file.relative_to(root)))
                    count += 1
    target.chmod(0o600)
    print(f"memoryd: exported {count} files from {root} to {target}", file=sys.stderr)
    return 0
