"""The live event log: append-only JSONL of ids, counts and hashes (never content), one segment per month,
group-committed, replayed at start (docs/storage.md, "Event log" and "Reliability").
Import contract: stdlib, fsio, logcheck (the line format, what makes a line trustworthy) and errors."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memoryd import fsio
from memoryd.daemon.storage import logcheck
from memoryd.daemon.storage.logcheck import link_problem, parse_line  # on every line of a replay: no attribute lookup

TAIL_BYTES = 1 << 16           # read from a segment's end to find its last line
HINT_WINDOW = 8 << 20          # how far back from the end `last_seq_of` searches (~25k events)
RESERVE_BYTES = 1 << 20        # kept allocated past the log's end: ~3,000 events on a full disk
FALLOC_FL_KEEP_SIZE = 1


class EventLog:
    def __init__(self, events_dir: Path) -> None:
        self.dir = events_dir
        self.seq = 0
        self.last_hash = logcheck.GENESIS
        self.first_ts: str | None = None
        self.quarantined: list[dict[str, Any]] = []  # markers replay met (memory_health lists them)
        self._file: IO[str] | None = None
        self._segment: str | None = None
        self._dirty = False
        self._new_dir = False
        self._reserved_to = 0  # the segment's allocation reaches this offset (see `reserve`)

    def replay(self, apply: Callable[[dict[str, Any]], None], resume: Resume | None = None) -> int:
        """Feed every event (or those after `resume`) to `apply`; the torn tail's bytes cut. `LogDamaged`
        (before any cut) for a line neither whole and chained nor the torn tail, or one `apply` refuses."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        files = logcheck.segments(self.dir)
        first, offset = 0, 0
        if resume is not None:
            first, offset = resume.index, resume.offset
            self.seq, self.last_hash, self.first_ts = resume.seq, resume.last_hash, resume.first_ts
            self.quarantined = list(resume.quarantined)
        for index, path in enumerate(files[first:], first):
            if problem := logcheck.not_a_plain_file(path):
                raise logcheck.LogDamaged(path, 0, problem)
            self._replay_segment(path, apply, index == len(files) - 1, offset if index == first else 0)
        return _truncate_torn_tail(files[-1]) if files else 0

    def last_seq_of(self, kind: str) -> int:
        """The seq of the last whole `kind` event in the newest segment's last HINT_WINDOW bytes, but
        never its last line (maybe a torn tail); 0 if none. A value cannot spell `"kind":"<kind>"`."""
        files = logcheck.segments(self.dir)
        if not files or logcheck.not_a_plain_file(files[-1]):
            return 0
        with open(files[-1], "rb") as handle:
            base = max(0, os.fstat(handle.fileno()).st_size - HINT_WINDOW)
            data = os.pread(handle.fileno(), HINT_WINDOW, base)
        at = data.rfind(b'"kind":' + json.dumps(kind).encode())
        begin, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
        if at < 0 or (begin == 0 and base > 0) or end < 0 or end + 1 >= len(data):
            return 0
        event, _ = parse_line(data[begin : end + 1])
        return event["seq"] if event is not None and event["kind"] == kind else 0

    def _replay_segment(self, path: Path, apply: Callable[[dict[str, Any]], None], last: bool,
                        offset: int = 0) -> None:
        with open(path, "rb") as handle:
            handle.seek(offset)
            for number, raw in enumerate(handle, 1):
                event, problem = parse_line(raw)
                if event is not None:
                    problem = link_problem(event, self.seq, self.last_hash)
                if problem is not None:
                    if last and not handle.read(1) and logcheck.is_torn_tail(raw):
                        return
                    if offset:  # a resumed replay: the message counts the lines before `offset` too
                        with open(path, "rb") as whole:
                            number += whole.read(offset).count(b"\n")
                    raise logcheck.LogDamaged(path, number, problem)
                assert event is not None
                self.seq, self.last_hash = event["seq"], event["hash"]
                self.first_ts = self.first_ts or event["ts"]
                if event["kind"] == logcheck.QUARANTINED:
                    self.quarantined.append(logcheck.marker_summary(event, path, number))
                    continue
                try:
                    apply(event)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise logcheck.LogDamaged(path, number, f"the {event['kind']} event cannot be applied "
                                                   f"({type(exc).__name__}: {exc})") from exc

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        """Stamp `event` (which must carry `ts` and `kind`) with seq/prev/hash and buffer it."""
        event["seq"] = self.seq + 1
        event["prev"] = self.last_hash
        event["hash"] = logcheck.chain_hash(self.last_hash, event)
        self._open_segment(event["ts"][:7]).write(logcheck.canonical(event) + "\n")
        self.seq, self.last_hash = event["seq"], event["hash"]
        self.first_ts = self.first_ts or event["ts"]
        self._dirty = True
        return event

    def _open_segment(self, month: str) -> IO[str]:
        if self._file is None or self._segment != month:
            if self._file is not None:
                self.sync()
                fd = self._file.fileno()
                os.ftruncate(fd, os.fstat(fd).st_size)  # a finished month gives its reserve back
                self._file.close()
            path = self.dir / f"{month}.jsonl"
            self._new_dir = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
            self._segment, self._reserved_to = month, 0
        return self._file

    def flush(self) -> int | None:
        """Hand buffered events to the OS; the fd to make durable, or None when nothing is new."""
        if not self._dirty or self._file is None:
            return None
        self._file.flush()
        return self._file.fileno()

    def mark_durable(self) -> None:
        """Called once the fd from `flush` was synced (maybe by the store's syncfs)."""
        if self._new_dir:  # a new segment's directory entry must be durable too
            fsio.fsync_dir(self.dir)
            self._new_dir = False
        self._dirty = False

    def sync(self) -> None:
        if (fd := self.flush()) is not None:
            os.fsync(fd)
            self.mark_durable()

    def close(self) -> None:
        self.sync()
        if self._file is not None:
            self._file.close()
            self._file = None

    def checkpoint(self) -> tuple[Any, ...]:
        """Where the durable log ends now (call right after a sync): what `rollback` returns to."""
        path = (self.dir / f"{self._segment}.jsonl" if self._segment  # the usual case: no listing of the log's folder
                else next(reversed(logcheck.segments(self.dir)), None))
        size = os.fstat(self._file.fileno()).st_size if self._file is not None else _size(path)
        return (self.seq, self.last_hash, self.first_ts, path, size)

    def rollback(self, mark: tuple[Any, ...]) -> None:
        """Forget every event appended since `mark`; it only shrinks files, so it works on a full disk."""
        self._drop_file()
        self.seq, self.last_hash, self.first_ts, path, size = mark
        for segment in logcheck.segments(self.dir):
            if path is None or segment.name > path.name:
                segment.unlink(missing_ok=True)  # begun by this pass (a month boundary)
            elif segment == path and _size(segment) != size:
                fd = os.open(segment, os.O_WRONLY | os.O_NOFOLLOW)
                try:
                    os.ftruncate(fd, size)
                finally:
                    os.close(fd)
        self._segment, self._dirty, self._new_dir, self._reserved_to = None, False, False, 0

    def _drop_file(self) -> None:
        """Close the segment without its buffer reaching the disk: /dev/null takes the fd's place."""
        handle, self._file = self._file, None
        if handle is None:
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, handle.fileno())
        finally:
            os.close(null)
        with contextlib.suppress(OSError):
            handle.close()

    def reserve(self) -> bool:
        """Keep RESERVE_BYTES allocated past the segment's end for a full disk; False when no room."""
        if self._file is None or _fallocate is None:
            return True
        fd = self._file.fileno()
        end = os.fstat(fd).st_size
        if end + RESERVE_BYTES // 2 <= self._reserved_to:
            return True
        if _fallocate(fd, FALLOC_FL_KEEP_SIZE, end, RESERVE_BYTES) != 0:
            return ctypes.get_errno() not in (errno.ENOSPC, errno.EDQUOT)
        self._reserved_to = end + RESERVE_BYTES
        return True


def _size(path: Path | None) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        return 0


try:  # Linux's fallocate(2), or None (KEEP_SIZE: O_APPEND writes still land at the end)
    _fallocate: Any = ctypes.CDLL(None, use_errno=True).fallocate
    _fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
except (AttributeError, OSError):
    _fallocate = None


@dataclass(frozen=True)
class Resume:
    """Where replay resumes: segment `index` at byte `offset`, after the event `seq`/`last_hash`."""

    index: int
    offset: int
    seq: int
    last_hash: str
    first_ts: str | None
    quarantined: list[dict[str, Any]]


def _truncate_torn_tail(path: Path) -> int:
    """Cut the last line if a crash left it partial or unparseable; only the segment's end is read."""
    with open(path, "rb") as handle:
        base = max(0, os.fstat(handle.fileno()).st_size - TAIL_BYTES)
        tail = os.pread(handle.fileno(), TAIL_BYTES, base)
    if not tail:
        return 0
    if base and b"\n" not in tail[:-1]:  # a "line" longer than the window: judge the whole file
        base, tail = 0, path.read_bytes()
    last_start = tail.rfind(b"\n", 0, len(tail) - 1) + 1
    if not logcheck.is_torn_tail(tail[last_start:]):
        return 0
    with open(path, "r+b") as handle:
        handle.truncate(base + last_start)
        os.fsync(handle.fileno())
    return len(tail) - last_start
