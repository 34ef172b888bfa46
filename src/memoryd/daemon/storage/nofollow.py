"""Reading the store without following a link, and `check_no_links` before every write or delete: a planted
link can neither leak a file from outside nor get one written or deleted (`LinkRefused`).
Import contract: stdlib, `frontmatter` (for `BadRecord`) and errors."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from memoryd.daemon.storage.frontmatter import BadRecord
from memoryd.errors import StoreDamaged


class LinkRefused(BadRecord):
    """A symbolic link (or another non-regular entry) where the store keeps its own files."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path} is a symbolic link or not a regular file; memoryd does not follow it")
        self.path = Path(path)


def read_nofollow(path: Path | str) -> bytes:
    """The bytes of the regular file at `path`; `LinkRefused` when it is a symlink or not a file."""
    return read_with_stat(path)[0]


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# No access-time update: else a cold start's reads dirty ~100k inodes for the first commit to write
# (docs/storage.md, "Recovery at start"). Linux, the files' owner only (dropped at the first EPERM).
_noatime = getattr(os, "O_NOATIME", 0)


def read_with_stat(path: Path | str) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path` and its `fstat` taken before the read; `LinkRefused`."""
    global _noatime
    try:
        fd = os.open(path, _READ_FLAGS | _noatime)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from exc
        if exc.errno != errno.EPERM or not _noatime:
            raise
        _noatime = 0  # a file someone else owns: no O_NOATIME from now on
        return read_with_stat(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LinkRefused(path)
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # it changed since, or the read was short: read to the end
            data += b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        return data, st
    finally:
        os.close(fd)


def is_plain_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def check_no_links(root: Path, path: Path) -> bool:
    """`LinkRefused` if `path` is not under `root` or a directory between them is a link; True when
    they all exist. On strings: a `Path` per level slowed each write."""
    top, full = os.fspath(root), os.fspath(path)
    if full == top:
        return True
    if not full.startswith(top + os.sep):
        raise LinkRefused(path)
    current = top
    for part in full[len(top) + 1:].split(os.sep)[:-1]:
        current = f"{current}{os.sep}{part}"
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(mode):
            raise LinkRefused(current)
    return True


def ensure_store_dir(path: Path) -> None:
    """Create one of the store's top-level directories; a link or a file there stops the start."""
    if os.path.islink(path) or (path.exists() and not path.is_dir()):
        raise StoreDamaged(f"{path} is a symbolic link or not a directory; memoryd follows no link in "
                           "its store: replace it with a real directory (move the files in)", str(path))
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
