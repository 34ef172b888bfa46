"""Every kind of event the log holds, declared once (docs/storage.md, "Event log"); `Core.record` refuses an
undeclared kind. Import contract: stdlib and `memoryd.names` (the CLI's `log verify` imports it)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd import names

WRITE, WRITE_CONFIRM, SHOW, EPISODE_PRUNE = "write", "write_confirm", "show", "episode_prune"


@dataclass(frozen=True)
class Kind:
    name: str
    required: tuple[str, ...] = ()  # fields an applier indexes by name
    call: bool = True               # a caller's tool call: counts as its session's activity
    read: bool = False              # a read's audit event: its fsync may be shared a moment later


_DECLARED = (
    # the daemon and its passes
    Kind("daemon_start", call=False), Kind("daemon_stop", call=False), Kind("recovery", call=False),
    Kind("reaper_run", call=False), Kind("files_checked", call=False),
    # sessions
    Kind("session_start", ("session",), call=False), Kind("session_end", ("session", "reason"), call=False),
    Kind("session_reopen", ("session",), call=False), Kind("session_attach", call=False),
    Kind("session_note_expired"), Kind("scope_enable"), Kind("scope_disable"),
    # the journal tier
    Kind(names.EPISODE_WRITE, ("session", "episode_id")), Kind(names.EPISODE_SEARCH), Kind(names.EPISODE_HANDOFF),
    Kind(names.EPISODE_PROMOTE), Kind(EPISODE_PRUNE, call=False),
    # the memory tier
    Kind(WRITE), Kind(WRITE_CONFIRM), Kind("write_cancel"), Kind("pending_expired", call=False),
    Kind("update"), Kind("verify"), Kind("remove"), Kind("restore"), Kind("handoff_converted"),
    Kind("operator_resolve"),
    Kind("search", read=True), Kind(SHOW, read=True), Kind("digest", read=True), Kind("inject", read=True),
    # sync between machines
    Kind("sync"), Kind("sync_init"), Kind("sync_push"), Kind("sync_pull"), Kind("sync_resolve"),
    # what `memoryd log repair` leaves where it moved damaged lines aside (logcheck.QUARANTINED)
    Kind("quarantined", call=False),
)

KINDS: dict[str, Kind] = {kind.name: kind for kind in _DECLARED}
NON_CALL_KINDS = frozenset(name for name, kind in KINDS.items() if not kind.call)
READ_KINDS = frozenset(name for name, kind in KINDS.items() if kind.read)
REQUIRED_FIELDS = {name: kind.required for name, kind in KINDS.items() if kind.required}
