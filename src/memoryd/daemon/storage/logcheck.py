"""What a line of the event log must be, and the whole-log `verify` and `repair` built on it (docs/storage.md,
"Event log" and "Reliability"). The CLI imports this module only, never the live log.
Import contract: stdlib, fsio, idents and errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from memoryd import fsio
from memoryd.daemon.identity.idents import SESSION_RE
from memoryd.daemon.storage.events import REQUIRED_FIELDS
from memoryd.errors import StoreDamaged

GENESIS = "0" * 64
QUARANTINED = "quarantined"   # the marker `log repair` leaves where it removed lines
QUARANTINE_DIR = "quarantine"
REPAIR_COMMAND = "memoryd stop && memoryd log repair"
_BASE_FIELDS = (("seq", int), ("ts", str), ("kind", str), ("prev", str), ("hash", str))
_GOOD_SESSIONS: set[str] = set()  # ids already checked: a replay sees each one many times
_REQUIRED = REQUIRED_FIELDS  # an event without the fields its applier indexes cannot be replayed
_DECODER = json.JSONDecoder()
_DECODE, _SCAN = _DECODER.decode, _DECODER.scan_once  # type: ignore[attr-defined]  # the C scanner (not in the stubs)
# One encoder, made once: `json.dumps` with these options builds one per call, twice per event.
canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def chain_hash(prev: str, event: dict[str, Any]) -> str:
    return hashlib.sha256((prev + canonical({k: v for k, v in event.items() if k != "hash"})).encode()).hexdigest()


def segments(events_dir: Path) -> list[Path]:
    return sorted(events_dir.glob("*.jsonl")) if events_dir.is_dir() else []


class LogDamaged(StoreDamaged):
    """The log holds something replay cannot trust away from its tail: the daemon does not start."""

    def __init__(self, segment: Path, line: int, reason: str) -> None:
        where = f"{segment.name}:{line}" if line else segment.name
        super().__init__(f"the event log is damaged at {where}: {reason}. Nothing was changed; "
                         f"`memoryd log verify` shows the first break and `{REPAIR_COMMAND}` moves "
                         f"the bad lines to {segment.parent / QUARANTINE_DIR} (docs/storage.md)",
                         str(segment), line, REPAIR_COMMAND)
        self.reason = reason


def event_problem(event: Any) -> str | None:
    """Why a parsed line is not an event replay can apply, or None (the hot path: one chain of checks)."""
    if type(event) is not dict:
        return "not a JSON object"
    get = event.get
    if not (type(get("seq")) is int and type(get("ts")) is str and type(get("kind")) is str
            and type(get("prev")) is str and type(get("hash")) is str):
        missing = next(key for key, kind in _BASE_FIELDS if type(get(key)) is not kind)
        return f"no valid '{missing}' field"
    session = get("session")
    if session is not None and session not in _GOOD_SESSIONS:
        if not (type(session) is str and SESSION_RE.fullmatch(session)):
            return "the 'session' field is not a session id"
        if len(_GOOD_SESSIONS) > 100_000:
            _GOOD_SESSIONS.clear()
        _GOOD_SESSIONS.add(session)
    for key in _REQUIRED.get(event["kind"], ()):
        if type(get(key)) is not str:
            return f"a {event['kind']} event without '{key}'"
    return None


def link_problem(event: dict[str, Any], seq: int, prev: str) -> str | None:
    """Why `event` does not follow the one (`seq`, hash `prev`) before it, or None."""
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


def parse_line(raw: bytes) -> tuple[dict[str, Any], None] | tuple[None, str]:
    if not raw.endswith(b"\n"):
        return None, "a line without its newline"
    try:
        text = raw.decode()
        try:  # the C scanner straight away (`decode` adds a whitespace skip)
            event, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text) - 1:
            event = _DECODE(text)  # space around the object, or data after it (raises)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None, "the line does not parse as JSON"
    problem = event_problem(event)
    return (None, problem) if problem else (event, None)


def is_torn_tail(raw: bytes) -> bool:
    """The last segment's last line as a crash mid-append leaves it: partial or unparseable."""
    try:
        json.loads(raw)
    except ValueError:
        return True
    return not raw.endswith(b"\n")


def not_a_plain_file(path: Path) -> str | None:
    if path.is_symlink():
        return "the segment is a symbolic link (memoryd follows no link in its store)"
    if not path.is_file():
        return "the segment is not a regular file"
    return None


def marker_summary(event: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    return {"segment": path.name, "line": line, "first_seq": event.get("first_seq"), "seq": event["seq"],
            "lines": event.get("lines"), "file": event.get("file"), "reason": event.get("reason")}


def verify(events_dir: Path) -> dict[str, Any]:
    """Walk the whole chain, re-hashing every line but markers: {ok, events, broken_seq, segment?,
    line?, reason?, torn_tail?, quarantined}; a torn tail is ok (`torn_tail`: {segment, line, bytes})."""
    prev, seq, count = GENESIS, 0, 0
    quarantined: list[dict[str, Any]] = []
    files = segments(events_dir)
    for index, path in enumerate(files):
        if problem := not_a_plain_file(path):
            return {"ok": False, "events": count, "broken_seq": seq + 1, "segment": path.name, "line": 0,
                    "reason": problem, "quarantined": quarantined}
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                event, problem = parse_line(raw)
                if event is not None:
                    problem = link_problem(event, seq, prev) or hash_problem(event)
                if problem is not None:
                    report = {"ok": False, "events": count, "broken_seq": seq + 1, "segment": path.name,
                              "line": number, "reason": problem, "quarantined": quarantined}
                    if index == len(files) - 1 and not handle.peek(1) and is_torn_tail(raw):
                        report.update(ok=True, broken_seq=None,
                                      torn_tail={"segment": path.name, "line": number, "bytes": len(raw)})
                    return report
                assert event is not None
                if event["kind"] == QUARANTINED:
                    quarantined.append(marker_summary(event, path, number))
                else:
                    count += 1
                prev, seq = event["hash"], event["seq"]
    return {"ok": True, "events": count, "broken_seq": None, "quarantined": quarantined}


def hash_problem(event: dict[str, Any]) -> str | None:
    if event["kind"] != QUARANTINED and event["hash"] != chain_hash(event["prev"], event):
        return "hash does not match the event"
    return None


class _Repair:
    """One pass: each run of bad lines (or seq gap) becomes a marker that keeps the chain continuous."""

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
            if problem := not_a_plain_file(path):
                raise LogDamaged(path, 0, f"{problem}; move it away by hand, then repair again")
        for index, path in enumerate(files):
            self.out[path] = []
            with open(path, "rb") as handle:
                for number, raw in enumerate(handle, 1):
                    if index == len(files) - 1 and not self.bad and not handle.peek(1) and is_torn_tail(raw):
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
        event, problem = parse_line(raw)
        if event is not None and (problem := hash_problem(event)) is None:
            if self.bad or link_problem(event, self.seq, self.prev) is not None:
                if event["seq"] <= self.seq:
                    problem = f"seq {event['seq']} repeats or goes back (after seq {self.seq})"
                else:  # the chain resumes here after bad lines or a gap
                    self._close_run(event, path)
            if problem is None:
                self._keep(path, raw, event)
                return
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
    """Quarantine what replay refuses; the caller holds the daemon's lock. Returns {quarantined:
    [{segment, first_seq, seq, lines, reason, file}], torn_bytes_truncated, segments_rewritten}."""
    return _Repair(events_dir, now).run()


def _save_quarantine(path: Path, lines: list[tuple[Path, int, bytes, str]]) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    fsio.replace_atomic(path, b"".join(f"# {segment.name}:{number}: {why}\n".encode()
                                       + (raw if raw.endswith(b"\n") else raw + b"\n")
                                       for segment, number, raw, why in lines))
