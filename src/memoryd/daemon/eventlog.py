"""The append-only, hash-chained JSONL event log, one segment per month.

Import contract: stdlib only. Each line is `{seq, ts, kind, …fields, prev, hash}` with
`hash = sha256(prev + canonical JSON of the event without hash)`; the chain runs across segments.
Appends are buffered; `sync` flushes and fsyncs once for everything appended since (group commit).
The log never holds content, bodies, queries or secrets: callers pass ids, counts and hashes only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

GENESIS = "0" * 64


def canonical(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(prev: str, event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return hashlib.sha256((prev + canonical(body)).encode()).hexdigest()


def segments(events_dir: Path) -> list[Path]:
    return sorted(events_dir.glob("*.jsonl")) if events_dir.is_dir() else []


class EventLog:
    def __init__(self, events_dir: Path) -> None:
        self.dir = events_dir
        self.seq = 0
        self.last_hash = GENESIS
        self.first_ts: str | None = None
        self._file: IO[str] | None = None
        self._segment: str | None = None
        self._dirty = False
        self._new_dir = False

    def replay(self, apply: Callable[[dict[str, Any]], None]) -> int:
        """Feed every event to `apply`, truncating a torn last line; returns bytes truncated."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        files = segments(self.dir)
        for path in files:
            for event in _read_events(path):
                self.seq, self.last_hash = event["seq"], event["hash"]
                self.first_ts = self.first_ts or event["ts"]
                apply(event)
        return _truncate_torn_tail(files[-1]) if files else 0

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
                self._file.close()
            path = self.dir / f"{month}.jsonl"
            self._new_dir = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
            self._segment = month
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
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
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


def _read_events(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.endswith("\n"):
                return  # a torn tail; truncated by the caller
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                return
            if isinstance(event, dict) and "seq" in event and "hash" in event:
                yield event


def _truncate_torn_tail(path: Path) -> int:
    """Cut the last line if a crash left it partial or unparseable (docs/storage.md)."""
    data = path.read_bytes()
    if not data:
        return 0
    keep = len(data)
    if not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
    else:
        last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
        try:
            json.loads(data[last_start:])
        except ValueError:
            keep = last_start
    if keep == len(data):
        return 0
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        os.fsync(handle.fileno())
    return len(data) - keep


def verify(events_dir: Path) -> dict[str, Any]:
    """Walk the whole chain; report the event count and the first broken `seq`, if any."""
    prev, expected_seq, count = GENESIS, 1, 0
    for path in segments(events_dir):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for lineno, line in enumerate(handle, 1):
                broken = _check_line(line, prev, expected_seq)
                if broken:
                    return {"ok": False, "events": count, "broken_seq": expected_seq,
                            "segment": path.name, "line": lineno, "reason": broken}
                event = json.loads(line)
                prev, expected_seq, count = event["hash"], expected_seq + 1, count + 1
    return {"ok": True, "events": count, "broken_seq": None}


def _check_line(line: str, prev: str, expected_seq: int) -> str | None:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return "unparseable line"
    if not isinstance(event, dict) or event.get("seq") != expected_seq:
        return f"expected seq {expected_seq}"
    if event.get("prev") != prev:
        return "prev does not match the previous hash"
    if event.get("hash") != chain_hash(prev, event):
        return "hash does not match the event"
    return None
