"""The append-only, hash-chained JSONL event log, one segment per month.

Import contract: stdlib and errors only. Each line is `{seq, ts, kind, …fields, prev, hash}` with
`hash = sha256(prev + canonical JSON of the event without hash)`; the chain runs across segments.
Appends are buffered; `sync` flushes and fsyncs once for everything appended since (group commit).
The log never holds content, bodies, queries or secrets: callers pass ids, counts and hashes only.

Damage (docs/storage.md, 'Reliability'): only a torn tail — the last line of the last segment,
unterminated or unparseable, which a crash mid-append leaves — is cut at start. Anything else that
replay cannot trust (a bad line mid-log, a seq gap, a missing oldest segment, a symlinked segment)
stops the start with `LogDamaged` naming the segment and line; `memoryd log repair` (daemon
stopped) moves the bad lines to `events/quarantine/` and leaves a `quarantined` marker in their
place that keeps seq numbers and the chain continuous.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memoryd import fsio
from memoryd.errors import StoreDamaged

GENESIS = "0" * 64
QUARANTINED = "quarantined"   # the marker `log repair` leaves where it removed lines
QUARANTINE_DIR = "quarantine"
REPAIR_COMMAND = "memoryd stop && memoryd log repair"
TAIL_BYTES = 1 << 16           # read from a segment's end to find its last line
HINT_WINDOW = 8 << 20          # how far back from the end `last_seq_of` searches (~25k events)
RESERVE_BYTES = 1 << 20        # kept allocated past the log's end: ~3,000 events on a full disk
FALLOC_FL_KEEP_SIZE = 1
_BASE_FIELDS = (("seq", int), ("ts", str), ("kind", str), ("prev", str), ("hash", str))
_SESSION_RE = re.compile(r"sess-[1-9][0-9]{0,17}")
_GOOD_SESSIONS: set[str] = set()  # ids already checked: a replay sees each one many times
_DECODER = json.JSONDecoder()
_DECODE, _SCAN = _DECODER.decode, _DECODER.scan_once  # type: ignore[attr-defined]  # the C scanner (not in the stubs)
# Fields the core appliers index by name: an event without them cannot be replayed.
_REQUIRED = {"session_start": ("session",), "session_end": ("session", "reason"),
             "episode_write": ("session", "episode_id")}


def canonical(event: dict[str, Any]) -> str:
    return _CANONICAL(event)


# One encoder, made once: `json.dumps` with these options builds a new one per call (~2.5 µs of
# the ~10 µs an event's encoding takes, twice per event: the hash, then the line).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def chain_hash(prev: str, event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return hashlib.sha256((prev + canonical(body)).encode()).hexdigest()


def segments(events_dir: Path) -> list[Path]:
    return sorted(events_dir.glob("*.jsonl")) if events_dir.is_dir() else []


class LogDamaged(StoreDamaged):
    """The log holds something replay cannot trust away from its tail; the daemon does not start."""

    def __init__(self, segment: Path, line: int, reason: str) -> None:
        where = f"{segment.name}:{line}" if line else segment.name
        super().__init__(f"the event log is damaged at {where}: {reason}. Nothing was changed; "
                         f"`memoryd log verify` shows the first break and `{REPAIR_COMMAND}` moves "
                         f"the bad lines to {segment.parent / QUARANTINE_DIR} (docs/storage.md)",
                         str(segment), line, REPAIR_COMMAND)
        self.reason = reason


def event_problem(event: Any) -> str | None:
    """Why a parsed line is not an event replay can apply, or None when it is (on every line of
    every start: the common case is one chain of type checks)."""
    if type(event) is not dict:
        return "not a JSON object"
    get = event.get
    if not (type(get("seq")) is int and type(get("ts")) is str and type(get("kind")) is str
            and type(get("prev")) is str and type(get("hash")) is str):
        missing = next(key for key, kind in _BASE_FIELDS if type(get(key)) is not kind)
        return f"no valid '{missing}' field"
    session = get("session")
    if session is not None and session not in _GOOD_SESSIONS:
        if not (type(session) is str and _SESSION_RE.fullmatch(session)):
            return "the 'session' field is not a session id"
        if len(_GOOD_SESSIONS) > 100_000:
            _GOOD_SESSIONS.clear()
        _GOOD_SESSIONS.add(session)
    for key in _REQUIRED.get(event["kind"], ()):
        if type(get(key)) is not str:
            return f"a {event['kind']} event without '{key}'"
    return None


def link_problem(event: dict[str, Any], seq: int, prev: str) -> str | None:
    """Why `event` does not follow the event (`seq`, hash `prev`) before it, or None.

    A `quarantined` marker covers seq numbers first_seq..seq (none when seq == first_seq - 1).
    """
    if event["kind"] == QUARANTINED:
        first = event.get("first_seq")
        if first != seq + 1 or event["seq"] < seq:
            return f"a quarantine marker for seq {first}..{event['seq']} where {seq + 1} was expected"
    elif event["seq"] != seq + 1:
        missing = " (the segments before it are missing)" if seq == 0 else ""
        return f"seq {event['seq']} where {seq + 1} was expected{missing}"
    if event["prev"] != prev:
        return "'prev' is not the hash of the line before"
    return None


def _parse(raw: bytes) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """(event, None) for a well-formed line, else (None, why not)."""
    if not raw.endswith(b"\n"):
        return None, "a line without its newline"
    try:
        text = raw.decode()
        try:  # the C scanner straight away: what `decode` adds is a whitespace skip, each line
            event, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text) - 1:
            event = _DECODE(text)  # space around the object, or data after it (raises)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None, "the line does not parse as JSON"
    problem = event_problem(event)
    return (None, problem) if problem else (event, None)


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, raw bytes, is the file's last line) for each line of `path`."""
    with open(path, "rb") as handle:
        held: tuple[int, bytes] | None = None
        for number, raw in enumerate(handle, 1):
            if held is not None:
                yield held[0], held[1], False
            held = (number, raw)
        if held is not None:
            yield held[0], held[1], True


def _is_torn_tail(raw: bytes, is_last_line: bool, in_last_segment: bool) -> bool:
    """A crash mid-append leaves at most the final line partial (see `_truncate_torn_tail`)."""
    if not (is_last_line and in_last_segment):
        return False
    if not raw.endswith(b"\n"):
        return True
    try:
        json.loads(raw)
    except ValueError:
        return True
    return False


def _not_a_plain_file(path: Path) -> str | None:
    if path.is_symlink():
        return "the segment is a symbolic link (memoryd follows no link in its store)"
    if not path.is_file():
        return "the segment is not a regular file"
    return None


class EventLog:
    def __init__(self, events_dir: Path) -> None:
        self.dir = events_dir
        self.seq = 0
        self.last_hash = GENESIS
        self.first_ts: str | None = None
        self.quarantined: list[dict[str, Any]] = []  # markers replay met (memory_health lists them)
        self._file: IO[str] | None = None
        self._segment: str | None = None
        self._dirty = False
        self._new_dir = False
        self._reserved_to = 0  # the segment's allocation reaches this offset (see `reserve`)

    def replay(self, apply: Callable[[dict[str, Any]], None], resume: Resume | None = None) -> int:
        """Feed every event to `apply` — or, given a `resume` point (`checkpoint.resume_point`),
        only the events after it; returns the bytes of the torn tail it truncated.

        Raises `LogDamaged` (before truncating anything) for a line that is neither whole and
        chained nor the torn tail, and for an event `apply` cannot take.
        """
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        files = segments(self.dir)
        first, offset = 0, 0
        if resume is not None:
            first, offset = resume.index, resume.offset
            self.seq, self.last_hash, self.first_ts = resume.seq, resume.last_hash, resume.first_ts
            self.quarantined = list(resume.quarantined)
        for index in range(first, len(files)):
            path = files[index]
            problem = _not_a_plain_file(path)
            if problem:
                raise LogDamaged(path, 0, problem)
            self._replay_segment(path, apply, index == len(files) - 1, offset if index == first else 0)
        return _truncate_torn_tail(files[-1]) if files else 0

    def last_seq_of(self, kind: str) -> int:
        """The seq of the last whole `kind` event in the newest segment's last HINT_WINDOW bytes,
        by a byte search (a value cannot spell `"kind":"<kind>"`: its quotes are escaped); 0 if
        none, or if it is the last line (a torn tail replay may cut, so never reached)."""
        files = segments(self.dir)
        if not files or _not_a_plain_file(files[-1]):
            return 0
        with open(files[-1], "rb") as handle:
            base = max(0, os.fstat(handle.fileno()).st_size - HINT_WINDOW)
            data = os.pread(handle.fileno(), HINT_WINDOW, base)
        at = data.rfind(b'"kind":' + json.dumps(kind).encode())
        begin, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
        if at < 0 or (begin == 0 and base > 0) or end < 0 or end + 1 >= len(data):
            return 0
        event, _ = _parse(data[begin : end + 1])
        return event["seq"] if event is not None and event["kind"] == kind else 0

    def _replay_segment(self, path: Path, apply: Callable[[dict[str, Any]], None], last: bool,
                        offset: int = 0) -> None:
        with open(path, "rb") as handle:
            handle.seek(offset)
            for number, raw in enumerate(handle, 1):
                event, problem = _parse(raw)
                if event is not None:
                    problem = link_problem(event, self.seq, self.last_hash)
                if problem is not None:
                    # Whether this is the file's last line is asked only here, off the hot path.
                    if last and not handle.read(1) and _is_torn_tail(raw, True, True):
                        return
                    raise LogDamaged(path, number + _lines_before(path, offset), problem)
                assert event is not None
                self.seq, self.last_hash = event["seq"], event["hash"]
                self.first_ts = self.first_ts or event["ts"]
                if event["kind"] == QUARANTINED:
                    self.quarantined.append(_marker_summary(event, path, number))
                    continue
                try:
                    apply(event)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise LogDamaged(path, number, f"the {event['kind']} event cannot be applied "
                                                   f"({type(exc).__name__}: {exc})") from exc

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        """Stamp `event` (which must carry `ts` and `kind`) with seq/prev/hash and buffer it."""
        event["seq"] = self.seq + 1
        event["prev"] = self.last_hash
        event["hash"] = chain_hash(self.last_hash, event)
        self._open_segment(event["ts"][:7]).write(canonical(event) + "\n")
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
        """Called once the fd from `flush` was synced (possibly by the store's shared syncfs)."""
        if self._new_dir:  # a new segment's directory entry must be durable too
            fsio.fsync_dir(self.dir)
            self._new_dir = False
        self._dirty = False

    def sync(self) -> None:
        fd = self.flush()
        if fd is not None:
            os.fsync(fd)
            self.mark_durable()

    def close(self) -> None:
        self.sync()
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- a failed commit (docs/storage.md, 'Reliability') ----------------------------------------

    def checkpoint(self) -> tuple[Any, ...]:
        """Where the durable log ends now (call right after a sync): what `rollback` returns to."""
        if self._segment:  # the usual case, at every commit: no listing of the log's folder
            path: Path | None = self.dir / f"{self._segment}.jsonl"
        else:
            existing = segments(self.dir)
            path = existing[-1] if existing else None
        size = os.fstat(self._file.fileno()).st_size if self._file is not None else _size(path)
        return (self.seq, self.last_hash, self.first_ts, path, size)

    def rollback(self, mark: tuple[Any, ...]) -> None:
        """Forget every event appended since `mark`: buffered lines are dropped unwritten, lines
        a failed flush half-wrote are cut, a segment begun since is removed. Shrinking a file
        needs no free space, so this works on a full disk."""
        self._drop_file()
        self.seq, self.last_hash, self.first_ts, path, size = mark
        for segment in segments(self.dir):
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
        """Close the segment without letting its buffer reach the disk: /dev/null takes the fd's
        place first (atomically), so the close's flush writes nowhere."""
        handle, self._file = self._file, None
        if handle is None:
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, handle.fileno())
        finally:
            os.close(null)
        try:
            handle.close()
        except OSError:
            pass

    def reserve(self) -> bool:
        """Keep RESERVE_BYTES allocated past the segment's end (fallocate KEEP_SIZE), so appends —
        a read's audit event, a rollback's bookkeeping — still fit when the disk fills up. False
        when the filesystem has no room left for the reserve (the caller stops taking writes)."""
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


def _fallocate_function() -> Any:
    """Linux's fallocate(2) through libc (KEEP_SIZE: O_APPEND writes still land at the end), or
    None where it does not exist."""
    try:
        func = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    func.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    return func


_fallocate = _fallocate_function()


@dataclass(frozen=True)
class Resume:
    """Where replay resumes: segment `index` at byte `offset`, after the event `seq`/`last_hash`."""

    index: int
    offset: int
    seq: int
    last_hash: str
    first_ts: str | None
    quarantined: list[dict[str, Any]]


def _lines_before(path: Path, offset: int) -> int:
    """How many lines precede byte `offset` (for error messages after a resumed replay)."""
    if not offset:
        return 0
    with open(path, "rb") as handle:
        return handle.read(offset).count(b"\n")


def _truncate_torn_tail(path: Path) -> int:
    """Cut the last line if a crash left it partial or unparseable (docs/storage.md). Only the
    segment's end is read: an event line is far shorter than TAIL_BYTES."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        base = max(0, size - TAIL_BYTES)
        handle.seek(base)
        tail = handle.read()
    if not tail:
        return 0
    if base and b"\n" not in tail[:-1]:  # a "line" longer than the window: judge the whole file
        base, tail = 0, path.read_bytes()
    data_len = base + len(tail)
    keep = _kept_length(tail)
    if keep == len(tail):
        return 0
    keep += base
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        os.fsync(handle.fileno())
    return data_len - keep


def _kept_length(data: bytes) -> int:
    """How much of `data` (the segment's end) survives cutting a torn last line."""
    keep = len(data)
    if not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
    else:
        last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
        try:
            json.loads(data[last_start:])
        except ValueError:
            keep = last_start
    return keep


def _marker_summary(event: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    return {"segment": path.name, "line": line, "first_seq": event.get("first_seq"), "seq": event["seq"],
            "lines": event.get("lines"), "file": event.get("file"), "reason": event.get("reason")}


def verify(events_dir: Path) -> dict[str, Any]:
    """Walk the whole chain, re-hashing every line.

    {ok, events, broken_seq, segment?, line?, reason?, torn_tail?, quarantined}: `ok` is False at
    the first line that breaks the chain, except a torn tail (`torn_tail`: {segment, line, bytes}),
    which the next start truncates. Quarantine markers are listed; their hash is not re-computed
    (the lines they replace are gone), their place in the chain is checked.
    """
    prev, seq, count = GENESIS, 0, 0
    quarantined: list[dict[str, Any]] = []
    files = segments(events_dir)
    for index, path in enumerate(files):
        problem = _not_a_plain_file(path)
        if problem:
            return {"ok": False, "events": count, "broken_seq": seq + 1, "segment": path.name, "line": 0,
                    "reason": problem, "quarantined": quarantined}
        for number, raw, is_last_line in _numbered_lines(path):
            event, problem = _parse(raw)
            if event is not None:
                problem = link_problem(event, seq, prev) or _hash_problem(event)
            if problem is not None:
                report = {"ok": False, "events": count, "broken_seq": seq + 1, "segment": path.name,
                          "line": number, "reason": problem, "quarantined": quarantined}
                if _is_torn_tail(raw, is_last_line, index == len(files) - 1):
                    report.update(ok=True, broken_seq=None,
                                  torn_tail={"segment": path.name, "line": number, "bytes": len(raw)})
                return report
            assert event is not None
            if event["kind"] == QUARANTINED:
                quarantined.append(_marker_summary(event, path, number))
            else:
                count += 1
            prev, seq = event["hash"], event["seq"]
    return {"ok": True, "events": count, "broken_seq": None, "quarantined": quarantined}


def _hash_problem(event: dict[str, Any]) -> str | None:
    if event["kind"] != QUARANTINED and event["hash"] != chain_hash(event["prev"], event):
        return "hash does not match the event"
    return None


# -- repair (`memoryd log repair`, with the daemon stopped) ---------------------------------------

class _Repair:
    """One pass over every segment: whole, chained lines are kept; each run of lines that are not
    (and each gap in seq) is replaced by one `quarantined` marker whose `prev` is the hash before
    the run and whose `hash` is the `prev` of the line after it, so the chain and the seq numbers
    stay continuous; the removed bytes are kept under `events/quarantine/`."""

    def __init__(self, events_dir: Path, now: str) -> None:
        self.dir, self.now = events_dir, now
        self.seq, self.prev, self.last_ts = 0, GENESIS, None
        self.out: dict[Path, list[bytes]] = {}
        self.changed: set[Path] = set()
        self.bad: list[tuple[Path, int, bytes, str]] = []   # the current run: (segment, line, raw, why)
        self.markers: list[dict[str, Any]] = []
        self.torn_bytes = 0

    def run(self) -> dict[str, Any]:
        files = segments(self.dir)
        for path in files:
            problem = _not_a_plain_file(path)
            if problem:
                raise LogDamaged(path, 0, f"{problem}; move it away by hand, then repair again")
        for index, path in enumerate(files):
            self.out[path] = []
            for number, raw, is_last_line in _numbered_lines(path):
                if _is_torn_tail(raw, is_last_line, index == len(files) - 1) and not self.bad:
                    self.changed.add(path)  # a crash's torn tail: cut, as a start would
                    self.torn_bytes = len(raw)
                    continue
                self._line(path, number, raw)
        if self.bad:
            self._close_run(None)
        for path in self.changed:
            fsio.replace_atomic(path, b"".join(self.out[path]))
        return {"quarantined": self.markers, "torn_bytes_truncated": self.torn_bytes,
                "segments_rewritten": sorted(p.name for p in self.changed)}

    def _line(self, path: Path, number: int, raw: bytes) -> None:
        event, problem = _parse(raw)
        if event is not None:
            problem = _hash_problem(event)
        if event is not None and problem is None:
            if link_problem(event, self.seq, self.prev) is None and not self.bad:
                self._keep(path, raw, event)
                return
            if event["seq"] > self.seq:  # the chain resumes here after bad lines or a gap
                self._close_run(event, path)
                self._keep(path, raw, event)
                return
            problem = f"seq {event['seq']} repeats or goes back (after seq {self.seq})"
        self.bad.append((path, number, raw, problem or "unusable line"))
        self.changed.add(path)

    def _keep(self, path: Path, raw: bytes, event: dict[str, Any]) -> None:
        self.out[path].append(raw)
        self.seq, self.prev, self.last_ts = event["seq"], event["hash"], event["ts"]

    def _close_run(self, resume: dict[str, Any] | None, resume_path: Path | None = None) -> None:
        """Write the marker for the current run (or gap) before `resume`, or at the very end."""
        home = self.bad[0][0] if self.bad else resume_path
        assert home is not None
        marker: dict[str, Any] = {
            "seq": resume["seq"] - 1 if resume else self.seq + len(self.bad),  # never reuse a seq
            "ts": self.last_ts or (resume["ts"] if resume else self.now), "kind": QUARANTINED,
            "first_seq": self.seq + 1, "lines": len(self.bad), "bytes": sum(len(b[2]) for b in self.bad),
            "reason": self.bad[0][3] if self.bad else "events missing (a deleted segment or lines)",
            "repaired_at": self.now, "prev": self.prev,
        }
        if self.bad:
            marker["file"] = f"{QUARANTINE_DIR}/{self.bad[0][0].stem}-line{self.bad[0][1]}.bad"
            _save_quarantine(self.dir / marker["file"], self.bad)
        marker["hash"] = resume["prev"] if resume else chain_hash(self.prev, marker)
        self.out[home].append((canonical(marker) + "\n").encode())
        self.changed.add(home)
        self.markers.append({k: marker.get(k) for k in ("first_seq", "seq", "lines", "reason", "file")}
                            | {"segment": home.name})
        self.seq, self.prev, self.bad = marker["seq"], marker["hash"], []


def repair(events_dir: Path, now: str) -> dict[str, Any]:
    """Quarantine what replay refuses (see `_Repair`); the caller holds the daemon's lock.

    Returns {quarantined: [{segment, first_seq, seq, lines, reason, file}], torn_bytes_truncated,
    segments_rewritten}.
    """
    return _Repair(events_dir, now).run()


def _save_quarantine(path: Path, lines: list[tuple[Path, int, bytes, str]]) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    fsio.replace_atomic(path, b"".join(f"# {segment.name}:{number}: {why}\n".encode()
                                       + (raw if raw.endswith(b"\n") else raw + b"\n")
                                       for segment, number, raw, why in lines))
