"""Session records: `sessions/<sess-n>.md`, where a finished session's summary is kept.

Import contract: core, store. The event log holds no content, so `memory_session_finish`'s
`summary` is written here (frontmatter: schema_version, session_id, finished_at; body: the
summary) in the same group commit as its `session_end` event, which carries only `summary_sha`.
At start, after replay, each record is read back into `Session.summary` — only when a
`session_end` event names it; a record no event names, a symlink or an unparseable file is a bad
file (memory_health), never served. Logs written before records existed keep their `summary`
field, which replay still honours.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon import store
from memoryd.daemon.connections import Session
from memoryd.daemon.core import Core

SCHEMA_VERSION = 1
DIR = "sessions"


def path_for(core: Core, session_id: str) -> Path:
    assert store.is_session_id(session_id)  # minted by the daemon, never taken from a caller
    return core.root / DIR / f"{session_id}.md"


def write_summary(core: Core, session: Session, summary: str) -> str:
    """Stage the session's record (durable at the pass's group commit); returns its sha256, which
    the caller logs as `summary_sha`."""
    meta = {"schema_version": SCHEMA_VERSION, "session_id": session.id, "finished_at": core.now()}
    data = store.render(meta, summary, blame="summary")
    core.files.write_file(path_for(core, session.id), data)
    return hashlib.sha256(data).hexdigest()


def attach(core: Core) -> SessionRecords:
    """Join replay and recovery, so summaries come back after a restart."""
    records = SessionRecords(core)
    core.extensions.append(records)
    return records


class SessionRecords:
    """The start-up half: which records the log names, then reading them into the session table."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.logged: dict[str, str] = {}  # session id -> the summary_sha its session_end names
        self.loaded = 0

    def apply(self, event: dict[str, Any]) -> None:
        if event["kind"] == "session_end" and event.get("summary_sha"):
            self.logged[event["session"]] = event["summary_sha"]

    def log_state(self) -> dict[str, Any]:
        return {"logged": self.logged}

    def restore_log_state(self, data: dict[str, Any]) -> Callable[[], None]:
        logged = {str(k): str(v) for k, v in data["logged"].items()}
        return lambda: setattr(self, "logged", logged)

    def load(self) -> None:
        directory = self.core.root / DIR
        if not store.is_plain_dir(directory):
            return
        with os.scandir(directory) as listing:
            entries = sorted((e for e in listing if not e.name.startswith(store.TMP_PREFIX)),
                             key=lambda e: e.name)
        for entry in entries:
            problem = self._load(Path(entry.path), entry.name)
            if problem:
                self.core.bad_files.append({"path": entry.path, "reason": problem})

    def _load(self, path: Path, name: str) -> str | None:
        """Read one record into its session; why it was refused, or None."""
        session_id = name[:-3] if name.endswith(".md") else ""
        if not store.is_session_id(session_id):
            return "not a sess-<n>.md session record"
        self.core.note_session_id(session_id)
        try:
            data = store.read_nofollow(path)
            meta, body = store.parse(data)
        except (OSError, store.BadRecord, UnicodeDecodeError) as exc:
            return str(exc)[:200]
        session = self.core.sessions.get(session_id)
        if session is None or session_id not in self.logged or meta.get("session_id") != session_id:
            return "no session_end event names this record"
        session.summary = body
        self.loaded += 1
        return None

    def reconcile(self) -> dict[str, Any]:
        return {"session_records": self.loaded}
