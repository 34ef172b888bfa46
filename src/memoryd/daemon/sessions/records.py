"""Session records, `sessions/<sess-n>.md`: a session's summary or its captured last message (a note),
and the start-up conversion of captured handoff memories to notes (docs/storage.md, 'Session notes').
Import contract: core, clock, identity, store."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity import idents
from memoryd.daemon.storage import frontmatter, nofollow, store
from memoryd.daemon.storage.clock import iso
from memoryd.errors import StorageError

log = logging.getLogger("memoryd.daemon")

SCHEMA_VERSION = 1
DIR = "sessions"
NOTE_BY = "session-end hook"  # a note's provenance, frontmatter `captured_by`
# How the hook marked the handoff memories it wrote before notes existed (the conversion's test).
LEGACY_HEADER = ("[captured by the memoryd session-end hook: the agent's last message of a session "
                 "that ended without writing a handoff]")


@dataclass(slots=True)
class Note:
    """A session's captured last message; `captured_at` is when the session ended (TTL clock)."""

    text: str
    captured_at: str
    reason: str | None


def path_for(core: Core, session_id: str) -> Path:
    assert idents.is_session_id(session_id)  # minted by the daemon, never taken from a caller
    return core.root / DIR / f"{session_id}.md"


def of(core: Core) -> SessionRecords | None:
    return next((e for e in core.extensions if isinstance(e, SessionRecords)), None)


def write(core: Core, session_id: str, body: str, blame: str, **meta: Any) -> str:
    """Stage a session's record, e.g. its summary (durable at the pass's group commit); returns its sha256."""
    meta = {"schema_version": SCHEMA_VERSION, "session_id": session_id, "finished_at": core.now(), **meta}
    data = frontmatter.render(meta, body, blame=blame)
    core.files.write_file(path_for(core, session_id), data)
    return hashlib.sha256(data).hexdigest()


def write_note(core: Core, session_id: str, text: str, reason: str | None, ended_at: str | None = None) -> str:
    """The session's captured last message as its note, served at once; returns the sha to log."""
    ended_at = ended_at or core.now()
    sha = write(core, session_id, text, "note", finished_at=ended_at, captured_by=NOTE_BY, reason=reason)
    records = of(core)
    if records is not None:
        records.notes[session_id] = Note(text, ended_at, reason)
    return sha


def expire_notes(core: Core, now: float) -> list[str]:
    """Delete the notes of sessions that ended over `episode_ttl_days` ago; one event names them."""
    records = of(core)
    if records is None or not records.notes:
        return []
    cutoff = iso(now - core.config.episode_ttl_days * 86400)
    due = []
    for session_id in sorted(s for s, note in records.notes.items() if note.captured_at < cutoff):
        try:
            core.files.delete_file(path_for(core, session_id))
        except StorageError as exc:  # kept and said; the next pass tries again
            log.warning("note TTL: kept %s: %s", session_id, exc.message)
            continue
        due.append(session_id)
    if due:
        core.record("session_note_expired", None, sessions=due)
    return due


def convert_captured_handoffs(core: Core) -> int:
    """At start: move each live `handoff` memory the session-end hook captured (LEGACY_HEADER)
    to its session's note, then tombstone it; one `handoff_converted` event each."""
    tier, records = core.memories, of(core)
    if tier is None or records is None or not core.writable():
        return 0
    captured = sorted((m for m in map(tier.live.get, list(tier.index.handoffs.values()))
                       if m is not None and m.content.startswith(LEGACY_HEADER)), key=lambda m: m.created)
    try:
        for memory in captured:
            _convert(core, records, memory)
        core.sync()
    except StorageError as exc:  # undone by the commit's abort; the next start tries again
        log.error("captured handoffs not converted to session notes: %s", exc.message)
        return 0
    if captured:
        log.info("converted %d captured handoff memories to session notes (events handoff_converted)", len(captured))
    return len(captured)


def _convert(core: Core, records: SessionRecords, memory: Any) -> None:
    owner = memory.anchor_session_id or memory.session_id
    session = core.sessions.get(owner) if idents.is_session_id(owner) else None
    note_sha = None
    if session is not None and not session.is_open and owner not in records.logged:
        text = memory.content[len(LEGACY_HEADER):].strip()
        note_sha = write_note(core, owner, text, session.ended, session.ended_at or memory.created)
    sha = core.memories.bury(memory, f"captured by the session-end hook; converted to the session note of {owner}")
    core.record("handoff_converted", None, memory_id=memory.id, sha=sha, owner=owner, note_sha=note_sha)


def attach(core: Core) -> SessionRecords:
    records = SessionRecords(core)
    core.extensions.append(records)
    return records


class SessionRecords:
    """Which records the log names (replay), then reading them into the session table (recovery)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.logged: dict[str, str] = {}  # session id -> the sha of its record an event names
        self.notes: dict[str, Note] = {}  # session id -> its captured last message
        self.loaded = 0

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "session_end" and (event.get("summary_sha") or event.get("note_sha")):
            self.logged[event["session"]] = event.get("summary_sha") or event["note_sha"]
        elif kind == "handoff_converted":
            owner = str(event.get("owner") or "")
            if event.get("note_sha"):
                self.logged[owner] = event["note_sha"]
            session = self.core.sessions.get(owner)
            if session is not None and session.handoff_id == event.get("memory_id"):
                session.handoff_id = None  # no handoff of its agent's: the walk must not take it for one
        elif kind == "session_note_expired":
            for session_id in event.get("sessions") or ():
                self.logged.pop(session_id, None)
                self.notes.pop(session_id, None)

    def log_state(self) -> dict[str, Any]:
        return {"logged": self.logged}

    def restore_log_state(self, data: dict[str, Any]) -> Callable[[], None]:
        logged = {str(k): str(v) for k, v in data["logged"].items()}
        return lambda: setattr(self, "logged", logged)

    def load(self) -> None:
        directory = self.core.root / DIR
        if not nofollow.is_plain_dir(directory):
            return
        with os.scandir(directory) as listing:
            entries = sorted((e for e in listing if not e.name.startswith(store.TMP_PREFIX)), key=lambda e: e.name)
        for entry in entries:
            problem = self._load(Path(entry.path), entry.name)
            if problem:
                self.core.bad_files.append({"path": entry.path, "reason": problem})

    def _load(self, path: Path, name: str) -> str | None:
        """Read one record into its session; why it was refused, or None."""
        session_id = name[:-3] if name.endswith(".md") else ""
        if not idents.is_session_id(session_id):
            return "not a sess-<n>.md session record"
        self.core.note_session_id(session_id)
        try:
            meta, body = frontmatter.parse(nofollow.read_nofollow(path))
        except (OSError, frontmatter.BadRecord, UnicodeDecodeError) as exc:
            return str(exc)[:200]
        session = self.core.sessions.get(session_id)
        if session is None or session_id not in self.logged or meta.get("session_id") != session_id:
            return "no session_end event names this record"
        if meta.get("captured_by") == NOTE_BY:
            reason = meta.get("reason")
            self.notes[session_id] = Note(body, str(meta.get("finished_at") or ""),
                                          reason if isinstance(reason, str) else None)
        else:
            session.summary = body
        self.loaded += 1
        return None

    def reconcile(self) -> dict[str, Any]:
        return {"session_records": self.loaded, "session_notes": len(self.notes)}
