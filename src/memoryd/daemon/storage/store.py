"""Record files under one root, written atomically, made durable in batches with the log (group commit),
never written or deleted through a symbolic link (docs/storage.md). Import contract: stdlib, fsio,
frontmatter, nofollow, prefetch and errors."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
from pathlib import Path
from typing import Any

from memoryd import fsio
from memoryd.daemon.storage.frontmatter import BadRecord, parse
from memoryd.daemon.storage.nofollow import LinkRefused, check_no_links, is_plain_dir, read_nofollow
from memoryd.daemon.storage.prefetch import write_all
from memoryd.errors import StorageError, StoreDamaged

log = logging.getLogger("memoryd.daemon")
FS_IOC_GETFLAGS = 0x80086601          # Linux: read an inode's attribute flags (`lsattr`)
PINNED_FLAGS = 0x00000010 | 0x00000020  # FS_IMMUTABLE_FL | FS_APPEND_FL: no rename over, no unlink
TMP_PREFIX = ".tmp-"
try:  # Linux's syncfs(2), or None where it does not exist (macOS)
    _syncfs: Any = ctypes.CDLL(None, use_errno=True).syncfs
except (AttributeError, OSError):
    _syncfs = None


def _is_whole_record(path: Path) -> bool:
    """A temp file is rolled forward only if it parses (its flush and the log's were one round)."""
    try:
        parse(read_nofollow(path))
    except (OSError, BadRecord, UnicodeDecodeError):
        return False
    return True


def pinned(path: Path) -> bool:
    """`path` (not followed) carries `chattr +i` or `+a`: a rename over it or its unlink would fail."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        buf = bytearray(8)
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
        return bool(int.from_bytes(buf[:4], "little") & PINNED_FLAGS)
    except OSError:
        return False
    finally:
        os.close(fd)


def check_changeable(path: Path, replacing: bool) -> None:
    """`StorageError` at staging when publishing a change to `path` would fail, before its event exists."""
    if pinned(path):
        raise StorageError(str(path), errno.EPERM,
                           f"{path} is immutable or append-only (chattr +i/+a); it cannot be "
                           f"{'replaced' if replacing else 'removed'}; nothing of this call was applied")
    if not replacing and os.path.lexists(path) and not os.access(path.parent, os.W_OK):
        raise StorageError(str(path.parent), errno.EACCES)


class FileStore:
    """Files staged, made durable with the log (`flush`), then renamed into place (`publish`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirty_dirs: set[Path] = set()
        self._staged: dict[Path, tuple[Path, int]] = {}  # final path -> (temp path, open fd)
        self._deletes: dict[Path, None] = {}
        self._rmdirs: dict[Path, None] = {}
        self._unpublished: dict[Path, Path] = {}  # logged, the rename failed: retried at each publish
        self.changes = 0  # staged writes and deletes so far: a call that changed nothing shows it
        self.strict = True  # refuse unchangeable targets at staging; recovery turns it off
        self.stuck: list[dict[str, str]] = []  # temp files recovery could not touch

    def write_file(self, path: Path, data: bytes, fresh: bool = False) -> None:
        """Stage `data` for `path` (`StoreDamaged` for a linked folder on the way); `fresh`: a new name,
        so no probe for an immutable file (an open)."""
        try:
            folders_exist = check_no_links(self.root, path)
        except LinkRefused as exc:
            raise StoreDamaged(str(exc), str(exc.path)) from exc
        if not folders_exist:  # a folder on the way is missing
            try:
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError.from_os(exc, path.parent) from exc
            self._dirty_dirs.add(path.parent.parent)
        if self.strict and not fresh:
            check_changeable(path, replacing=True)
        tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.urandom(4).hex()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:  # a full disk (inodes), a read-only or immutable directory
            raise StorageError.from_os(exc, tmp) from exc
        try:
            write_all(fd, data)
        except BaseException as exc:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError):  # ENOSPC, EDQUOT, EIO: the store is unchanged
                raise StorageError.from_os(exc, tmp) from exc
            raise
        self._supersede(path)  # only now: a failed write keeps what the pass staged before
        self._deletes.pop(path, None)
        self._staged[path] = (tmp, fd)
        self.changes += 1

    def read_bytes(self, path: Path) -> bytes:
        staged = self._staged.get(path)
        if staged is None and path in self._deletes:
            raise FileNotFoundError(str(path))
        check_no_links(self.root, path)
        return read_nofollow(staged[0] if staged else self._unpublished.get(path, path))

    def exists(self, path: Path) -> bool:
        return (path in self._staged or path in self._unpublished
                or (path not in self._deletes and path.exists()))

    def _supersede(self, path: Path) -> None:
        """Drop the version of `path` staged, or whose rename kept failing."""
        if (staged := self._staged.pop(path, None)) is not None:
            os.close(staged[1])
            staged[0].unlink(missing_ok=True)
        if (tmp := self._unpublished.pop(path, None)) is not None:
            tmp.unlink(missing_ok=True)

    def delete_file(self, path: Path) -> None:
        """Stage the removal of `path`, applied by `publish`; `StorageError` now when it could not be."""
        if self.strict:
            check_changeable(path, replacing=False)
        self._supersede(path)
        self._deletes[path] = None
        self.changes += 1

    def delete_dir_if_empty(self, path: Path) -> None:
        self._rmdirs[path] = None

    def sync(self) -> None:
        """Flush and publish in one go, durable at return (for callers with no log to order against)."""
        self.flush()
        self.publish()
        self.sync_dirs()

    def flush(self, extra_fds: tuple[int, ...] = ()) -> None:
        """Make every staged temp file durable with `extra_fds` (the log): one `syncfs` for all."""
        staged = [fd for _tmp, fd in self._staged.values() if fd >= 0]
        fds = staged + list(extra_fds)
        try:
            if fds and _syncfs is not None and _syncfs(fds[0]) == 0:
                self._dirty_dirs.clear()  # the same journal commit holds the last publish's renames
            else:
                for fd in fds:
                    os.fsync(fd)
        finally:
            for fd in staged:
                os.close(fd)
            self._staged = {path: (tmp, -1) for path, (tmp, _fd) in self._staged.items()}

    def publish(self) -> None:
        """Rename flushed records into place, then apply deletes (the second half of a move must not
        outrun the first). Never raises: a failed rename is logged and retried at every publish."""
        renames = {**self._unpublished, **{path: tmp for path, (tmp, _fd) in self._staged.items()}}
        self._staged.clear()
        self._unpublished = {}
        for path, tmp in renames.items():
            try:
                os.replace(tmp, path)
                self._dirty_dirs.add(path.parent)
            except OSError as exc:
                self._unpublished[path] = tmp
                log.error("could not publish %s (%s); kept as %s, retried at every commit", path, exc, tmp.name)
        if not self._unpublished:
            self._apply_deletes()
        if _syncfs is None:  # else the next flush's `syncfs` makes them durable
            self.sync_dirs()

    def sync_dirs(self) -> None:
        """Make the renames and deletes published so far durable (never raises)."""
        try:
            if len(self._dirty_dirs) > 1 and _syncfs is not None:
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    if _syncfs(fd) == 0:
                        self._dirty_dirs.clear()
                finally:
                    os.close(fd)
            dirty, self._dirty_dirs = self._dirty_dirs, set()
            for directory in dirty:
                with contextlib.suppress(FileNotFoundError):  # removed since (an emptied folder)
                    fsio.fsync_dir(directory)
        except OSError as exc:
            log.error("could not make the store's directories durable: %s", exc)

    def _apply_deletes(self) -> None:
        for path in list(self._deletes):
            try:
                check_no_links(self.root, path)  # never delete through a link planted since staging
                path.unlink()
                self._dirty_dirs.add(path.parent)
            except (FileNotFoundError, LinkRefused):
                pass
            except OSError as exc:  # EPERM: the file became immutable since staging
                log.error("could not delete %s (%s); left in place", path, exc)
        self._deletes.clear()
        for directory in self._rmdirs:
            with contextlib.suppress(OSError, LinkRefused):  # not empty, or a link planted since
                check_no_links(self.root, directory)
                directory.rmdir()
                self._dirty_dirs.add(directory.parent)
        self._rmdirs.clear()

    def abort(self) -> None:
        """Forget what was staged since the last publish (not renames a committed pass still owes)."""
        for tmp, fd in self._staged.values():
            if fd >= 0:
                os.close(fd)
            try:
                tmp.unlink(missing_ok=True)
            except OSError as exc:
                log.error("could not remove the temp file %s: %s", tmp, exc)
        self._staged.clear()
        self._deletes.clear()
        self._rmdirs.clear()

    @property
    def idle(self) -> bool:
        return not (self._staged or self._deletes or self._rmdirs or self._unpublished)

    @property
    def settled(self) -> bool:
        """Nothing staged and no rename left to retry: no temp file of ours is on disk."""
        return not self._staged and not self._unpublished

    def recover_temp_files(self, logged_ids: set[str], deep: bool = True,
                           found: tuple[str, ...] | None = None) -> dict[str, int]:
        """Roll forward whole temp files whose id the log names, remove the rest but this daemon's own;
        `deep=False` skips the episode folders, `found` settles only these."""
        counts = {"temp_files_removed": 0, "temp_files_rolled_forward": 0}
        stuck = len(self.stuck)
        ours = {tmp for tmp, _fd in self._staged.values()} | set(self._unpublished.values())
        for tmp in self._temp_files(deep) if found is None else map(Path, found):
            if tmp in ours or tmp.is_symlink() or not tmp.is_file():
                continue  # in flight, or not ours: never read, renamed or deleted
            final_name = tmp.name[len(TMP_PREFIX):].rsplit(".", 1)[0]
            roll = final_name.split(".", 1)[0] in logged_ids and _is_whole_record(tmp)
            try:
                if roll:
                    os.replace(tmp, tmp.with_name(final_name))
                else:
                    tmp.unlink(missing_ok=True)
            except OSError as exc:  # EPERM/EROFS: report it and carry on, never crash-loop here
                log.error("recovery could not %s %s: %s", "roll forward" if roll else "remove", tmp, exc)
                self.stuck.append({"path": str(tmp), "reason": f"recovery could not touch it: {exc.strerror}"})
                continue
            counts["temp_files_rolled_forward" if roll else "temp_files_removed"] += 1
            self._dirty_dirs.add(tmp.parent)
        counts["temp_files_stuck"] = len(self.stuck) - stuck
        return counts

    def _temp_files(self, deep: bool) -> list[Path]:
        """Temp files in the record folders and, when `deep`, each session's (never a linked one)."""
        folders = [self.root / sub for sub in ("memories", "tombstones", "episodes", "sessions", "state")]
        if deep and is_plain_dir(self.root / "episodes"):
            with os.scandir(self.root / "episodes") as listing:
                folders += [Path(e.path) for e in listing if e.is_dir(follow_symlinks=False)]
        found = []
        for directory in folders:
            if is_plain_dir(directory):  # unreadable: the episode index reports it as a bad file
                with contextlib.suppress(OSError), os.scandir(directory) as listing:
                    found += [Path(e.path) for e in listing if e.name.startswith(TMP_PREFIX)]
        return found
