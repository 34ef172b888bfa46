"""What client hooks (`memoryd hook EVENT`) ask of the session tier beyond the tools: one memoryd session per
client session, last words (docs/storage.md, 'Session notes'), continuity at session start, the injected set and
the `anchored` memories. Import contract: core, clock, identity, credentials, records, memories' anchors."""

from __future__ import annotations

import itertools
import re
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.credentials.detector import PEM_END_RE, Hit, credential_hits, find_credentials
from memoryd.daemon.identity.scopes import is_hidden
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.memories.anchors import Hit as AnchorHit
from memoryd.daemon.memories.anchors import best
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.memories.staleness import FRESH
from memoryd.daemon.sessions import records
from memoryd.daemon.storage.clock import parse_iso
from memoryd.errors import MemorydError

LAST_WORDS_CHARS = 4000
MAX_WALK_BACK = 200          # sessions of one worktree searched for the newest handoff
SINCE_MAX = 3                # "since then" rows at session start, newest first
SINCE_CHARS = 300            # of each one's captured message
IDLE_END_S = 12 * 3600       # an ownerless hook session (no bridge, no session-end) ends this idle
IDLE_CHECK_S = 60.0
WITHHELD = "[withheld: it looked like a credential]"
# Last words are scanned from at most this many trailing chars (a 4 MiB scan would stall the loop);
# far wider than the kept window, so a private key cut here cannot reach into what is kept.
SCAN_CHARS = 64 * 1024
MAX_POINTERS = 2              # pointer lines one prompt may get (a demoted full hit included)
FIRST_WORD_RE = re.compile(r"^\S*\s*")


class ClientSessions:
    """Client session key -> memoryd session id, and the keys whose agent wrote a handoff."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.handed_off: set[str] = set()
        self.next_idle_check = 0.0  # the idle pass runs once a minute, off the request path

    def open_session(self, core: Core, key: str | None) -> Session | None:
        session = core.sessions.get(self.by_key.get(key or "", ""))
        return session if session is not None and session.is_open else None

    def bind(self, key: str | None, session: Session) -> None:
        if key:
            self.by_key[key] = session.id
            session.client_session = key

    def note_finished(self, session: Session) -> None:
        """A session the agent finished with a handoff: its client session needs no fallback."""
        if session.client_session and not session.is_open and session.handoff_id:
            self.handed_off.add(session.client_session)

    def forget(self, key: str | None) -> None:
        if key:
            self.by_key.pop(key, None)
            self.handed_off.discard(key)


def scrub(text: str) -> str | None:
    """`text` as last words: every line holding a credential withheld (a private key BEGIN through
    END, or to the end), then the last LAST_WORDS_CHARS chars kept; None when nothing is left or a
    secret still shows (fail closed). Scanned before the cut: a split token is not recognisable."""
    text = _cut(text.strip(), SCAN_CHARS)
    text = _withhold(text, credential_hits(text))
    if find_credentials(text):
        return None
    text = _cut(text, LAST_WORDS_CHARS)
    return None if not text or find_credentials(text) else text


def _withhold(text: str, hits: list[Hit]) -> str:
    """`text` with each run of lines a credential touches replaced by WITHHELD."""
    out: list[str] = []
    cursor = 0  # the end of the last run withheld
    for start, end, kind, _ in hits:
        if kind == "private_key" and not PEM_END_RE.search(text, start, end):
            end = len(text)  # no END line: all that follows may be key
        first = text.rfind("\n", 0, start) + 1
        last = text.find("\n", end)
        last = len(text) if last < 0 else last
        if out and first <= cursor:  # a second secret on a line already withheld
            cursor = max(cursor, last)
        else:
            out += [text[cursor:first], WITHHELD]
            cursor = last
    return "".join(out) + text[cursor:]


def _cut(text: str, limit: int) -> str:
    """The last `limit` chars of `text` less their first word, which the cut may have split."""
    if len(text) <= limit:
        return text
    rest = FIRST_WORD_RE.sub("", text[-limit:], count=1)
    return "…" + rest if rest else ""


def keep_last_words(session: Session, text: Any) -> dict[str, Any]:
    """Replace the session's last-words note; `kept` says whether anything was kept."""
    if not isinstance(text, str):
        return {"kept": False, "reason": "no text"}
    clean = scrub(text)
    if clean is None:
        return {"kept": False, "reason": "empty or holds a credential"}
    session.last_words = clean
    return {"kept": True, "chars": len(clean)}


def needs_fallback(core: Core, session: Session, keys: ClientSessions) -> bool:
    return (core.config.hook_last_words and session.is_open and session.handoff_id is None
            and bool(session.last_words) and session.client_session not in keys.handed_off)


def end_session(core: Core, session: Session, reason: str, keys: ClientSessions) -> dict[str, Any]:
    """End `session` with `reason`; its last words become its note when the agent wrote no handoff."""
    if not session.is_open:
        return {"session_id": session.id, "ended": session.ended, "already_ended": True}
    note_sha = None
    if needs_fallback(core, session, keys):
        try:
            note_sha = records.write_note(core, session.id, session.last_words or "", reason)
        except MemorydError:  # a refused note (a folder we may not write) must not keep the session open
            note_sha = None
    core.end_session(session, reason, note_sha=note_sha)
    session.last_words = None
    return {"session_id": session.id, "ended": reason, "captured_note": note_sha is not None}


def idle_pass(core: Core, keys: ClientSessions, now: float) -> list[str]:
    """At most once a minute, end hook sessions no bridge owns, idle for IDLE_END_S (e.g. Codex)."""
    if now < keys.next_idle_check:
        return []
    keys.next_idle_check = now + IDLE_CHECK_S
    ended = [s for s in core.sessions.open_sessions() if s.conn is None and s.client_session
             and s.id not in core.suspended and now - parse_iso(s.last_active) > IDLE_END_S]
    for session in ended:
        end_session(core, session, "idle", keys)
        keys.forget(session.client_session)
    return [s.id for s in ended]


def continuity(core: Core, caller: Session) -> dict[str, Any]:
    """The newest handoff an agent wrote in the caller's worktree, and each ended session after it
    that left a note or an episode — newest first, at most SINCE_MAX (`since_total` counts all)."""
    found = records.of(core)
    notes = found.notes if found is not None else {}
    since: list[dict[str, Any]] = []
    handoff = None
    for session in itertools.islice(core.sessions.walk_back(caller.worktree, skip=caller.id), MAX_WALK_BACK):
        if session.is_open:
            continue
        handoff = _written_handoff(core, session)
        if handoff is not None:
            break
        note = notes.get(session.id)
        if note is not None or session.episodes_written:
            since.append({"session_id": session.id, "ended": session.ended, "ended_at": session.ended_at,
                          "last_message": _capped(note.text) if note is not None else None})
    return {"handoff": handoff, "since": since[:SINCE_MAX], "since_total": len(since)}


def _written_handoff(core: Core, session: Session) -> dict[str, Any] | None:
    text = core.handoff_text(session.handoff_id) if session.handoff_id else None
    if text is None or text.startswith(records.LEGACY_HEADER):  # (a capture from before notes)
        return None
    return {"session_id": session.id, "ended": session.ended, "ended_at": session.ended_at,
            "id": session.handoff_id, "text": text}


def _capped(text: str) -> str:
    return text if len(text) <= SINCE_CHARS else text[:SINCE_CHARS - 1].rstrip() + "…"


# A memory a hook injected is not shown again before a tool call until this many tool calls passed.
TOOL_WINDOW = 20


def recently_injected(session: Session, memory_id: str) -> bool:
    """Injected at most TOOL_WINDOW tool calls ago (`injected_at` holds the call count then)."""
    at = session.injected_at.get(memory_id)
    return at is not None and session.tool_calls - at <= TOOL_WINDOW


def take_unseen(session: Session, ids: Any, limit: Any, mark: bool = True, window: bool = False) -> list[str]:
    """The first `limit` of `ids` not injected yet (`window`: within TOOL_WINDOW tool calls); marked if `mark`."""
    cap = limit if isinstance(limit, int) and limit > 0 else 3
    seen = (lambda i: recently_injected(session, i)) if window else session.injected.__contains__
    fresh = [i for i in _texts(ids) if not seen(i)][:cap]
    if mark and fresh:
        session.injected = {*session.injected, *fresh}
        session.injected_at = {**session.injected_at, **dict.fromkeys(fresh, session.tool_calls)}
    return fresh


def take_unpointed(session: Session, ids: Any, taken: list[str], mark: bool = True, window: bool = False) -> list[str]:
    """Of pointer candidates `ids`, at most MAX_POINTERS neither shown nor pointed to before in
    this session (with `window`: within it), nor in `taken`; pointed to from now on when `mark`."""
    seen = {*taken} if window else {*session.injected, *session.pointed, *taken}
    fresh = [i for i in _texts(ids) if i not in seen and not (window and recently_injected(session, i))][:MAX_POINTERS]
    if mark and fresh:
        session.pointed = {*session.pointed, *fresh}
        session.injected_at = {**session.injected_at, **dict.fromkeys(fresh, session.tool_calls)}
    return fresh


def _texts(ids: Any) -> list[str]:
    """The strings in `ids`, each once ([] when it is not a list)."""
    return list(dict.fromkeys(x for x in ids if isinstance(x, str))) if isinstance(ids, list) else []


def settings(core: Core) -> dict[str, Any]:
    return core.config.hook_settings()


# The `anchored` action: the memories a tool call is about to touch (the `pre-tool` hook; README
# "Automatic recall"). Anchors are exact keys (memories/anchors.py): no score floor to tune.
MAX_PATHS = 8
MAX_PATH_CHARS = 4096
MAX_COMMAND_CHARS = 8192
MAX_LIMIT = 5
CONTENT_CHARS = 700      # the hook cuts further to its budget; this keeps the reply small
BUILD_SLICE = 1000       # memories a lookup indexes itself while the idle-turn build is unfinished


def anchored(core: Core, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Up to `limit` memories anchored to `paths` / `command`, unseen in this session (seen from now
    on unless `peek`), best first, scoped like `memory_search`'s auto-scope."""
    from memoryd.daemon.memories.writes import tier_of

    tier = tier_of(core)
    if not args.get("peek"):
        session.tool_calls += 1  # the TOOL_WINDOW clock
    anchors = tier.index.anchors
    if not anchors.built:  # idle turns build it after a start; a call early on helps, boundedly
        anchors.build_some(tier.live, BUILD_SLICE)
    paths = args.get("paths")
    hits: list[AnchorHit] = []
    for path in paths[:MAX_PATHS] if isinstance(paths, list) else []:
        if isinstance(path, str) and path.strip():
            hits.extend(anchors.for_path(path[:MAX_PATH_CHARS]))
    command = args.get("command")
    if isinstance(command, str) and command.strip():
        hits.extend(anchors.for_command(command[:MAX_COMMAND_CHARS]))
    repos = (session.repo, None) if session.repo else (None,)
    ranked = [h for h in best(hits) if _visible(tier.live.get(h.memory_id), repos, session)]
    limit = args.get("limit")
    limit = min(limit, MAX_LIMIT) if isinstance(limit, int) and limit > 0 else 2
    fresh = set(take_unseen(session, [h.memory_id for h in ranked], limit, mark=not args.get("peek"), window=True))
    return {"memories": [_row(core, tier.live[h.memory_id], h) for h in ranked if h.memory_id in fresh]}


def _visible(memory: Memory | None, repos: tuple[str | None, ...], session: Session) -> bool:
    """Auto-scoped like `memory_search`, and never this session's own (its agent knows it: noise)."""
    return (memory is not None and memory.repo in repos and memory.session_id != session.id
            and not is_hidden(memory.scopes, session.disabled_scopes))


def _row(core: Core, memory: Memory, hit: AnchorHit) -> dict[str, Any]:
    """The hook's row; `note`: `moved` when a path it cites is gone, `stale` when a spot check is due."""
    from memoryd.daemon.memories.reads import staleness_fields

    content = memory.content if len(memory.content) <= CONTENT_CHARS else memory.content[:CONTENT_CHARS - 1] + "…"
    row = {"id": memory.id, "category": memory.category, "content": content, "why": hit.why}
    fields = staleness_fields(core, memory)
    if (fields.get("path_drift") or {}).get("missing"):
        row["note"] = "moved"
    elif fields.get("staleness_verdict") != FRESH:
        row["note"] = "stale"
    return row
