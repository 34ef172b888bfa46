"""`memoryd export [PATH]`: a tar.gz of the store's records and log, which `memoryd restore` brings back.
Records are replaced atomically, so each is whole while the daemon runs; `state/` (derived) and links are left out."""

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
