"""`memoryd restore FILE.tar.gz`: a `memoryd export` back as the whole store, into an empty store with
the daemon stopped; the archive is untrusted (docs/storage.md, docs/security.md). Exit codes: 0 restored;
1 the daemon runs or the store is not empty (nothing written); 2 a bad archive (what was written is removed)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from memoryd import fsio
from memoryd.cli.export import PARTS
from memoryd.errors import BadImportInput

CHUNK = 1 << 20


def add_parser(sub: Any) -> None:
    restore = sub.add_parser("restore", help="bring a `memoryd export` back as the whole store (into an empty "
                             "store, daemon stopped)")
    restore.add_argument("archive")
    restore.set_defaults(func=lambda ns: main(ns.archive))


def main(archive: str) -> int:
    from memoryd import paths
    from memoryd.daemon.process import lifecycle

    root = paths.store_root()
    paths.ensure_private_dir(paths.runtime_dir())
    try:
        lock = lifecycle.take_lock(paths.lock_path())
    except lifecycle.AlreadyRunning as exc:
        print(f"memoryd: the daemon is {exc}; stop it first (memoryd stop), then restore", file=sys.stderr)
        return 1
    try:
        held = [part for part in PARTS if (root / part).is_dir() and any(p.is_file() for p in (root / part).rglob("*"))]
        if held:
            print(f"memoryd: {root} is not empty ({', '.join(held)}); restore fills an empty store "
                  "(`memoryd import memoryd-export` merges an export into this one)", file=sys.stderr)
            return 1
        path = Path(archive)
        try:
            count = restore(path, paths.ensure_private_dir(root))
        except BadImportInput as exc:
            for part in PARTS:  # a refused archive leaves the store as empty as it was
                shutil.rmtree(root / part, ignore_errors=True)
            print(f"memoryd: {exc.message}; nothing restored", file=sys.stderr)
            return 2
    finally:
        lock.close()
    print(f"memoryd: restored {count} files from {path} into {root}; the next start rebuilds state/ "
          "(memoryd reindex does it now, with progress)", file=sys.stderr)
    return 0


def restore(path: Path, root: Path) -> int:
    """Write every member of the archive under an export part into `root`; the files written."""
    from memoryd.importers.memoryd_export import opened

    count = 0
    folders: set[Path] = set()
    with opened(path) as archive:
        for member, source in archive:
            if (target := _target(path, root, member)) is None:
                continue
            assert source is not None  # a regular member
            folders.update(_make_parents(root, target))
            _write(path, target, source, member.size)
            count += 1
    for folder in folders:
        fsio.fsync_dir(folder)
    return count


def _target(path: Path, root: Path, member: tarfile.TarInfo) -> Path | None:
    """Where a regular member under an export part goes; None for anything else (`state/` is derived)."""
    parts = PurePosixPath(member.name).parts
    if not member.isreg() or len(parts) < 2 or parts[0] not in PARTS:
        return None
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise BadImportInput(path, f"member {member.name!r} is no name `memoryd export` writes; refused")
    return root.joinpath(*parts)


def _make_parents(root: Path, target: Path) -> list[Path]:
    """The folders from `root` down to `target`'s, made 0700 and never a link; each is to be fsynced."""
    folder, touched = root, [root]
    for name in target.relative_to(root).parts[:-1]:
        folder = folder / name
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                raise BadImportInput(target, f"{folder} is not a folder") from None
        touched.append(folder)
    return touched


def _write(path: Path, target: Path, source: IO[bytes], size: int) -> None:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise BadImportInput(path, f"it names {target.name!r} twice; refused") from None
    with os.fdopen(fd, "wb") as out:
        left = size
        while left > 0:
            if not (chunk := source.read(min(CHUNK, left))):
                raise BadImportInput(path, f"member for {target.name!r} ends early; refused")
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        os.fsync(out.fileno())
