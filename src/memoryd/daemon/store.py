"""Record files: markdown with YAML frontmatter, written atomically and durably.

Import contract: stdlib + yaml (on first use) + errors; knows nothing of sessions, tools or the wire.
No path under the store is followed through a symbolic link: reads open with O_NOFOLLOW and
every directory between the root and a file is checked with lstat before a write or delete
(`LinkRefused`), so a planted link can neither leak a file from outside nor get one deleted.
Durability is two-phase so writes can share fsyncs (group commit): `write_file` fsyncs the data
and renames, and marks the directory dirty; `sync` fsyncs every dirty directory. A reply that
says "committed" is sent only after `sync` (and the log's sync) returned.
Faults (docs/storage.md, 'Reliability'): an OSError while staging is a `StorageError` that leaves
what was staged before untouched; a target that could not be replaced or removed (chattr +i/+a)
is refused at staging; `abort` drops a pass whose flush failed; `publish` never raises.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import stat
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import Any

from memoryd import fsio, safe_yaml
from memoryd.errors import InvalidParams, StorageError, StoreDamaged

log = logging.getLogger("memoryd.daemon")
MAX_FRONTMATTER_BYTES = 64 * 1024
FS_IOC_GETFLAGS = 0x80086601          # Linux: read an inode's attribute flags (`lsattr`)
PINNED_FLAGS = 0x00000010 | 0x00000020  # FS_IMMUTABLE_FL | FS_APPEND_FL: no rename over, no unlink
TMP_PREFIX = ".tmp-"
# Matched with `fullmatch`: `$` would also accept a value that ends in a newline.
ULID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
SESSION_RE = re.compile(r"sess-[1-9][0-9]{0,17}")
_ALIAS_HINT = re.compile(r"[&*!]")


def _syncfs_function() -> Any:
    """Linux's syncfs(2) through libc, or None where it does not exist (macOS)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None


def _is_whole_record(path: Path) -> bool:
    """A temp file is rolled forward only if it parses (its flush and the log's were one round)."""
    try:
        parse(read_nofollow(path))
    except (OSError, BadRecord, UnicodeDecodeError):
        return False
    return True


def pinned(path: Path) -> bool:
    """True when `path` (not followed) carries `chattr +i` or `+a`, so renaming over it or
    unlinking it would fail with EPERM after the log said committed. False when it is missing or
    the filesystem has no such flags (one failed open for a new file)."""
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
    """`StorageError` (EPERM/EACCES) now, at staging, when the publish of a change to `path`
    would fail — an immutable file, a directory we may not write — so the call is refused before
    anything is applied rather than after its event is durable."""
    if pinned(path):
        raise StorageError(str(path), errno.EPERM,
                           f"{path} is immutable or append-only (chattr +i/+a); it cannot be "
                           f"{'replaced' if replacing else 'removed'}; nothing of this call was applied")
    if not replacing and os.path.lexists(path) and not os.access(path.parent, os.W_OK):
        raise StorageError(str(path.parent), errno.EACCES)


class BadRecord(ValueError):
    """A record file that cannot be trusted (unparseable, aliased, oversized); it is skipped."""


class LinkRefused(BadRecord):
    """A symbolic link (or another non-regular entry) where the store keeps its own files."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path} is a symbolic link or not a regular file; memoryd does not follow it")
        self.path = Path(path)


def read_nofollow(path: Path | str) -> bytes:
    """The bytes of the regular file at `path`; `LinkRefused` when it is a symlink or not a file."""
    return read_with_stat(path)[0]


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# Reads leave the access time alone: under `relatime` the first read of a file since it was
# written dirties its inode, and a cold start reads every record, so the next `syncfs` (the first
# commit) would write back ~100k inodes: 40k files cost 44 ms here. Linux only, and only for the
# files' owner (EPERM otherwise: then dropped for good, see `read_with_stat`).
_noatime = getattr(os, "O_NOATIME", 0)


def read_with_stat(path: Path | str) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path` and its `fstat`, taken before the read (an edit in
    between shows as a change next time); `LinkRefused` for a symlink or non-file. No `lstat`
    and one `read`: a third less time over the 100k files of a cold start."""
    global _noatime
    try:
        fd = os.open(path, _READ_FLAGS | _noatime)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from exc
        if exc.errno != errno.EPERM or not _noatime:
            raise
        _noatime = 0  # a file someone else owns: no O_NOATIME from now on, nothing else changes
        return read_with_stat(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LinkRefused(path)
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # it grew or shrank since, or the read was short: read to the end
            data += b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        return data, st
    finally:
        os.close(fd)


def is_plain_dir(path: Path) -> bool:
    """A real directory, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def check_no_links(root: Path, path: Path) -> bool:
    """`LinkRefused` if any directory between `root` (exclusive) and `path` (exclusive) is a
    symlink; missing ones are fine (they are created as real directories). True when they all
    exist. Works on the strings: `relative_to` and a `Path` per level were ~25 µs of a write."""
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
    """Create one of the store's top-level directories; a symlink or a file there stops the start."""
    if os.path.islink(path) or (path.exists() and not path.is_dir()):
        raise StoreDamaged(f"{path} is a symbolic link or not a directory; memoryd follows no link in "
                           "its store: replace it with a real directory (move the files in)", str(path))
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def mint_ulid(when: float) -> str:
    """A new ULID for `when` (Unix seconds): 48 bits of Unix milliseconds, then 80 random bits, in Crockford
    base32. Minted here rather than with python-ulid, whose import (it reads its own package
    metadata) was ~60 ms of a daemon start of ~0.5 s budget."""
    value = int(when * 1000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join([_CROCKFORD[value >> shift & 31] for shift in _ULID_SHIFTS])


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_SHIFTS = range(125, -1, -5)


def is_ulid(value: Any) -> bool:
    return isinstance(value, str) and bool(ULID_RE.fullmatch(value))


_ULID_LINES = re.compile(rf"(?:{ULID_RE.pattern}\n)*")


def all_ulids(values: list[str]) -> bool:
    """`is_ulid` of every one of `values` (strings), in one regex call: 100k ids at start.
    27 characters a value means no value held a newline (each line is one id)."""
    lines = "\n".join(values) + "\n" if values else ""
    return len(lines) == 27 * len(values) and bool(_ULID_LINES.fullmatch(lines))


def all_of_type(values: Sequence[Any], kind: type) -> bool:
    """Every one of `values` exactly of `kind` (not a subclass), at C speed: 100k values in
    ~3 ms, against ~8 ms for a generator's `type(v) is kind` each."""
    return not values or set(map(type, values)) == {kind}


def is_session_id(value: Any) -> bool:
    return isinstance(value, str) and bool(SESSION_RE.fullmatch(value))


def _yaml() -> tuple[Any, Any, Any]:
    """PyYAML with its safe loader and dumper, imported on first use: the frontmatter memoryd writes
    and reads is `key: <JSON>` lines (below), and the import was ~40 ms of every daemon start."""
    return safe_yaml.yaml_kit()


def render(meta: dict[str, Any], body: str, blame: str) -> bytes:
    """Serialize a record; refuse (naming `blame`) a frontmatter over 64 KiB or one that
    does not parse back to what was written.

    A frontmatter of ASCII text, whole numbers, booleans and nulls is written one `key: <JSON>`
    line per key — JSON is YAML, so the file reads the same with any YAML tool — because a YAML
    dump and the load that checks it cost ~1 ms, most of a write. Anything else (non-ASCII text,
    floats) goes through the YAML dumper and the round-trip check as before.
    """
    front = _json_lines(meta)  # exact by construction (tests/unit/test_store_format.py reads it back)
    if front is None:
        yaml, loader, dumper = _yaml()
        front = yaml.dump(meta, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1_000_000)
        if yaml.load(front, Loader=loader) != meta:
            raise InvalidParams(blame, "the value does not survive a YAML round trip")
    raw = front.encode()
    if len(raw) > MAX_FRONTMATTER_BYTES:
        raise InvalidParams(blame, f"the record's frontmatter would be {len(raw)} bytes, over the 64 KiB limit")
    return b"---\n" + raw + b"---\n" + body.encode()


# A key YAML reads as a string: lowercase words, but not the ones YAML 1.1 reads as a boolean or null.
_PLAIN_KEY = re.compile(r"(?!(?:yes|no|on|off|true|false|null|y|n)\Z)[a-z_]+")
# JSON escapes that YAML's double-quoted scalars read differently: `\/`, and surrogate halves
# (JSON joins a pair into one character, YAML does not).
_JSON_ONLY_ESCAPE = re.compile(r"\\/|\\u[dD][89a-fA-F]")


def _json_lines(meta: dict[str, Any]) -> str | None:
    """`key: <JSON>` lines when every key is plain and every value is made of ASCII strings,
    ints, booleans, nulls, lists and mappings; else None (the YAML dumper handles it)."""
    lines = []
    for key, value in meta.items():
        if key not in _PLAIN_KEYS_SEEN:
            if not (type(key) is str and _PLAIN_KEY.fullmatch(key)):
                return None
            if len(_PLAIN_KEYS_SEEN) < 1024:  # the frontmatter keys of a few record kinds
                _PLAIN_KEYS_SEEN.add(key)
        text = _json_text(value)
        if text is None:
            return None
        lines.append(f"{key}: {text}\n")
    return "".join(lines)


_PLAIN_KEYS_SEEN: set[str] = set()
_JSON_SCALARS = {None: "null", True: "true", False: "false"}


def _json_text(value: Any) -> str | None:
    """`value` as `json.dumps` writes it (ASCII, its default separators), or None when it holds
    anything but ASCII strings, ints, booleans, nulls, lists and string-keyed mappings. Written
    out here, strings by the C encoder `json.dumps` itself uses, because one `json.dumps` per
    key was ~75 µs of a ~1 ms memory write."""
    kind = type(value)
    if kind is str:
        return _json_string(value) if value.isascii() else None
    if kind is int:
        return int.__repr__(value)
    if value is None or kind is bool:
        return _JSON_SCALARS[value]
    if kind is list:
        items = [_json_text(v) for v in value]
        return None if None in items else "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
    if kind is dict:
        pairs = []
        for k, v in value.items():
            text = _json_text(v)
            if type(k) is not str or not k.isascii() or text is None:
                return None
            pairs.append(f"{_json_string(k)}: {text}")
        return "{" + ", ".join(pairs) + "}"
    return None


def _parse_json_lines(text: str) -> dict[str, Any] | None:
    """The mapping of a frontmatter written as `key: <JSON>` lines, exactly as YAML would read
    it; None for anything else (blank lines, comments, YAML-only syntax, floats), which the YAML
    loader then reads. Parsing JSON is ~10x faster than YAML: a cold start reads every file.
    Each value goes straight to the C scanner (half the cost of `json.loads` per line); a value
    with space around it or data after it takes the full decoder, which settles it exactly."""
    if _JSON_ONLY_ESCAPE.search(text):  # keys are [a-z_]+: a match can only be in a value
        return None
    meta: dict[str, Any] = {}
    plain_key = _PLAIN_KEY.fullmatch
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if not sep or not plain_key(key):
            return None
        try:
            try:
                meta[key], end = _SCAN(value, 0)
            except StopIteration:
                end = -1
            if end != len(value):
                meta[key] = _JSON.decode(value)
        except ValueError:
            return None
    return meta


def _no_float(text: str) -> Any:
    raise ValueError("YAML reads this number differently")


_JSON = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)
_SCAN = _JSON.scan_once  # type: ignore[attr-defined]  # the C scanner (not in the stubs)


def parse(data: bytes) -> tuple[dict[str, Any], str]:
    """The (frontmatter, body) of a record file; raises `BadRecord` for anything untrustworthy."""
    if not data.startswith(b"---\n"):
        raise BadRecord("no frontmatter")
    end = data.find(b"\n---\n", 3)
    if end < 0:
        raise BadRecord("unterminated frontmatter")
    front = data[4 : end + 1]
    if len(front) > MAX_FRONTMATTER_BYTES:
        raise BadRecord("frontmatter over 64 KiB")
    text = front.decode("utf-8", errors="strict")
    meta = _parse_json_lines(text)
    if meta is not None:
        return meta, data[end + 5 :].decode("utf-8", errors="replace")
    try:  # only text holding '&', '*' or '!' can hold an anchor, alias or tag: walk its events first
        meta = safe_yaml.load(text, walk=bool(_ALIAS_HINT.search(text)))
    except safe_yaml.YAMLRefused as exc:
        raise BadRecord(f"frontmatter: {exc.reason}") from exc
    if not isinstance(meta, dict):
        raise BadRecord("frontmatter is not a mapping")
    return meta, data[end + 5 :].decode("utf-8", errors="replace")


class FileStore:
    """Atomic, durable file operations under one root, made durable in batches (group commit).

    Changes are staged, then made durable in two rounds: `flush` syncs every staged temp file
    together with the event log in one `syncfs` (one journal commit instead of an fsync per
    file: ~0.08 ms a record in a batch of 8 against ~0.26 ms here); `publish` then renames the
    temp files into place, applies staged deletes and syncs the directories. A crash after the
    flush leaves temp files whose ids the log names: recovery rolls the whole ones forward
    (`recover_temp_files`), so a record is never visible without its event. Readers in the same
    pass see staged records (`read_bytes`).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirty_dirs: set[Path] = set()
        self._staged: dict[Path, tuple[Path, int]] = {}  # final path -> (temp path, open fd)
        self._deletes: dict[Path, None] = {}
        self._rmdirs: dict[Path, None] = {}
        # Flushed and logged, but the rename failed (EPERM, EIO...): retried at every publish and
        # served by `read_bytes` meanwhile; the log already says they are committed.
        self._unpublished: dict[Path, Path] = {}
        self.changes = 0  # staged writes and deletes so far: a call that changed nothing shows it
        self.strict = True  # refuse unchangeable targets at staging; recovery turns it off
        self.stuck: list[dict[str, str]] = []  # temp files recovery could not touch (bad files)
        self._syncfs = _syncfs_function()

    def ensure_dir(self, path: Path) -> None:
        if not is_plain_dir(path):
            try:
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError.from_os(exc, path) from exc
            self._dirty_dirs.add(path.parent)

    def write_file(self, path: Path, data: bytes, fresh: bool = False) -> None:
        """Stage `data` for `path`; it replaces `path` atomically at the next `publish`.
        A symlinked directory on the way is refused (`StoreDamaged`, -32002) before anything is
        staged. `fresh`: the caller just minted the name (a new ULID), so there is no file to be
        immutable and the probe for one (an open, ~2% of an episode write) is skipped."""
        try:
            folders_exist = check_no_links(self.root, path)
        except LinkRefused as exc:
            raise StoreDamaged(str(exc), str(exc.path)) from exc
        if not folders_exist:
            self.ensure_dir(path.parent)
        if self.strict and not fresh:
            check_changeable(path, replacing=True)
        tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.urandom(4).hex()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:  # a full disk (inodes), a read-only or immutable directory
            raise StorageError.from_os(exc, tmp) from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except BaseException as exc:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError):  # ENOSPC, EDQUOT, EIO: the store is unchanged
                raise StorageError.from_os(exc, tmp) from exc
            raise
        self._unstage(path)  # only now: a failed write keeps what the pass staged before
        self._deletes.pop(path, None)
        self._drop_unpublished(path)
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

    def _drop_unpublished(self, path: Path) -> None:
        """A newer version of `path` supersedes one whose rename kept failing."""
        tmp = self._unpublished.pop(path, None)
        if tmp is not None:
            tmp.unlink(missing_ok=True)

    def _unstage(self, path: Path) -> bool:
        staged = self._staged.pop(path, None)
        if staged is None:
            return False
        os.close(staged[1])
        staged[0].unlink(missing_ok=True)
        return True

    def delete_file(self, path: Path) -> None:
        """Stage the removal of `path`; applied by `publish`, after the log records why.
        `StorageError` now when the unlink could not happen then (immutable file or directory)."""
        if self.strict:
            check_changeable(path, replacing=False)
        self._unstage(path)
        self._drop_unpublished(path)
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
        """Make every staged temp file's bytes durable, with `extra_fds` (the log) in the same
        round: one `syncfs` covers them all (two fsyncs cost ~2x one syncfs here)."""
        staged = [fd for _tmp, fd in self._staged.values() if fd >= 0]
        fds = staged + list(extra_fds)
        try:
            if fds and self._syncfs is not None and self._syncfs(fds[0]) == 0:
                self._dirty_dirs.clear()  # the same journal commit holds the last publish's renames
            else:
                for fd in fds:
                    os.fsync(fd)
        finally:
            for fd in staged:
                os.close(fd)
            self._staged = {path: (tmp, -1) for path, (tmp, _fd) in self._staged.items()}

    def publish(self) -> None:
        """Rename flushed records into place, apply deletes, and make the directories durable.

        Never raises: the log already says these changes committed. A rename that fails (EPERM
        from an immutable file set since staging, EIO) is logged and retried at every publish,
        its temp file served meanwhile; deletes and rmdirs wait until every rename went through
        (a delete is the second half of a move: it must never outrun the first)."""
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
        if self._syncfs is None:  # else the next flush's `syncfs` makes them durable (see below)
            self.sync_dirs()

    def sync_dirs(self) -> None:
        """Make the renames and deletes published so far durable (never raises).

        Where `syncfs` works, `publish` leaves this to the next flush: its one journal commit also
        holds the renames before it, and a crash in between loses nothing, because recovery rolls
        forward the durable temp files (and finishes the deletes) that the durable log names. The
        clean stop calls this, so a start after it finds no temp file (docs/storage.md)."""
        try:
            self._sync_dirs()
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
            try:
                check_no_links(self.root, directory)
                directory.rmdir()
                self._dirty_dirs.add(directory.parent)
            except (OSError, LinkRefused):
                pass
        self._rmdirs.clear()

    def _sync_dirs(self) -> None:
        if len(self._dirty_dirs) > 1 and self._syncfs is not None:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if self._syncfs(fd) == 0:
                    self._dirty_dirs.clear()
            finally:
                os.close(fd)
        dirty, self._dirty_dirs = self._dirty_dirs, set()
        for directory in dirty:
            with contextlib.suppress(FileNotFoundError):  # removed since (an emptied folder)
                fsio.fsync_dir(directory)

    def abort(self) -> None:
        """Forget everything staged since the last publish (a commit that failed): temp files
        closed and removed, deletes and rmdirs dropped. Renames already owed by an earlier,
        committed pass (`_unpublished`) are kept."""
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
        """Nothing staged, to delete or to publish again: a sync would only flush the log."""
        return not (self._staged or self._deletes or self._rmdirs or self._unpublished)

    @property
    def settled(self) -> bool:
        """Nothing staged and no rename left to retry: no temp file of ours is on disk."""
        return not self._staged and not self._unpublished

    def recover_temp_files(self, logged_ids: set[str], deep: bool = True,
                           found: tuple[str, ...] | None = None) -> dict[str, int]:
        """Recovery step 1: roll forward temp files whose record id the log names (they were
        flushed before the log was synced); remove the rest, which no reply ever acknowledged.
        `deep=False` skips the episode folders (tens of thousands of listings at scale): for a
        start after a clean stop that left the store `settled`, with nothing run since, or one
        whose prefetch helper lists them. `found`: settle these temp files (what that helper
        saw) and look for no other. A temp file this daemon still holds (staged, or a rename
        to retry) is left alone: the sweep may run while serving (`Core.verify_files`).
        `temp_files_stuck` counts what this call added to `stuck`."""
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
        """Temp files where the daemon writes records: the top-level folders and, when `deep`,
        each session's episode folder (never a linked one; never the log, which has none)."""
        folders = [self.root / sub for sub in ("memories", "tombstones", "episodes", "sessions", "state")]
        if deep and is_plain_dir(self.root / "episodes"):
            with os.scandir(self.root / "episodes") as listing:
                folders += [Path(e.path) for e in listing if e.is_dir(follow_symlinks=False)]
        found = []
        for directory in folders:
            if is_plain_dir(directory):
                try:
                    with os.scandir(directory) as listing:
                        found += [Path(e.path) for e in listing if e.name.startswith(TMP_PREFIX)]
                except OSError:  # unreadable: a session folder is reported by the episode index (bad file)
                    continue
        return found
