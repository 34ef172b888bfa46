"""Replacing a file atomically and durably, and making a directory's entries durable (stdlib only)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path | str) -> None:
    """Make `directory`'s entries durable: a rename or a new file in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomic(path: Path, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """`path` holds `data` (bits `mode`) after one rename, durable unless `durable` is False (a copy kept
    elsewhere). No link is followed: the temp file is a fresh O_EXCL name. The parent must exist."""
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
