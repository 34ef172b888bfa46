"""What client hooks (`memoryd hook EVENT`) ask of the session tier, beyond the tools.

Import contract: core, clock, connections, credentials, session records — no zmq, no msgpack.

- One memoryd session per client session: `ClientSessions` maps the client's session key (Claude
  Code's `session_id`, which its bridge also sees as `CLAUDE_CODE_SESSION_ID`) to the open memoryd
  session, so the bridge and every hook process of one client session share it. Runtime only: after
  a daemon restart the bridge's reattach binds the key again.
- Last words: the latest assistant message, capped and credential-scanned, kept as ONE note on the
  session and replaced each turn (runtime, never a record or an event per turn).
- Captured note: a session that ends (session-end hook, bridge bye, lost bridge, idle) without a
  handoff from the agent keeps its last words as its session note (`records.write_note`): session
  tier, expiring with the episode TTL, never a memory — so never searched, injected or listed.
- Continuity at session start: the newest handoff an agent wrote in the worktree (a captured note
  never displaces it), then a "since then" row per later session that ended without one.
- Injected set: the memories the prompt hook already showed in this session, so none repeats.
"""

from __future__ import annotations

import re
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.credentials.detector import Hit, credential_hits, find_credentials
from memoryd.daemon.identity.session_table import Session
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
# Last words are scanned from at most this many trailing chars: a wire client may send 4 MiB, and
# scanning that on the request path would stall the loop. Far wider than the kept window, so a
# private key cut off here (its BEGIN line lost) cannot reach into what is kept.
SCAN_CHARS = 64 * 1024
MAX_POINTERS = 2              # pointer lines one prompt may get (a demoted full hit included)
PEM_END_RE = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")  # gates' _PEM_RE end
FIRST_WORD_RE = re.compile(r"^\S*\s*")


class ClientSessions:
    """Client session key -> memoryd session id, and the keys whose agent wrote a handoff."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.handed_off: set[str] = set()
        self.next_idle_check = 0.0  # the idle pass runs once a minute, off the request path

    def open_session(self, core: Core, key: str | None) -> Session | None:
        """The open session bound to `key`, or None."""
        if not key:
            return None
        session = core.sessions.get(self.by_key.get(key, ""))
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


# -- last words ------------------------------------------------------------------------------------

def scrub(text: str) -> str | None:
    """`text` as last words: every line holding a credential withheld, then the last
    LAST_WORDS_CHARS chars kept; None when nothing is left or a secret still shows (fail closed).

    Scanned before it is cut: a token the cut splits (`p_<36 chars>` of a `ghp_` one) is no longer
    recognisable. A private key is withheld BEGIN through END — its body lines look like nothing —
    and to the end of the text when END is missing. The cut then drops its first, partial word,
    so what was next to the cut cannot be a token's tail either."""
    text = _cut(text.strip(), SCAN_CHARS)
    text = _withhold(text, credential_hits(text))
    if find_credentials(text):
        return None
    text = _cut(text, LAST_WORDS_CHARS)
    return None if not text or find_credentials(text) else text


def _withhold(text: str, hits: list[Hit]) -> str:
    """`text` with each run of lines a credential touches replaced by WITHHELD."""
    runs: list[tuple[int, int]] = []
    for start, end, kind, _ in hits:
        if kind == "private_key" and not PEM_END_RE.search(text, start, end):
            end = len(text)  # no END line: all that follows may be key
        first = text.rfind("\n", 0, start) + 1
        last = text.find("\n", end)
        last = len(text) if last < 0 else last
        if runs and first <= runs[-1][1]:  # a second secret on a line already withheld
            runs[-1] = (runs[-1][0], max(runs[-1][1], last))
        else:
            runs.append((first, last))
    out, cursor = [], 0
    for first, last in runs:
        out += [text[cursor:first], WITHHELD]
        cursor = last
    return "".join(out) + text[cursor:]


def _cut(text: str, limit: int) -> str:
    """The last `limit` chars of `text` less their first word, which the cut may have split ("" if
    nothing is left): a token's tail cannot pass as a word of its own."""
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


# -- ending a session -------------------------------------------------------------------------------

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
    """End hook sessions no bridge owns and nothing touched for IDLE_END_S (a client without a
    session-end hook, e.g. Codex, or one killed before it could run it). At most once a minute."""
    if now < keys.next_idle_check:
        return []
    keys.next_idle_check = now + IDLE_CHECK_S
    ended = []
    for session in core.sessions.open_sessions():
        ownerless = session.conn is None and session.client_session and session.id not in core.suspended
        if ownerless and now - parse_iso(session.last_active) > IDLE_END_S:
            ended.append(session)
    for session in ended:
        end_session(core, session, "idle", keys)
        keys.forget(session.client_session)
    return [s.id for s in ended]


# -- reads for the session-start hook ---------------------------------------------------------------

def continuity(core: Core, caller: Session) -> dict[str, Any]:
    """What a new session in the caller's worktree continues from, walking its sessions from the
    most recently active (as `episode_handoff` does): the newest handoff an agent wrote, and each
    session that ended after it without one — newest first, at most SINCE_MAX (`since_total`
    counts them all). A session that left neither a note nor an episode (a bridge that connected
    and only read) has nothing to continue from and is passed over; open ones have not ended."""
    found = records.of(core)
    notes = found.notes if found is not None else {}
    since: list[dict[str, Any]] = []
    total = 0
    for count, session in enumerate(core.sessions.walk_back(caller.worktree, skip=caller.id)):
        if count >= MAX_WALK_BACK:
            break
        if session.is_open:
            continue
        written = _written_handoff(core, session)
        if written is not None:
            return {"handoff": written, "since": since, "since_total": total}
        note = notes.get(session.id)
        if note is None and not session.episodes_written:
            continue
        total += 1
        if len(since) < SINCE_MAX:
            since.append({"session_id": session.id, "ended": session.ended, "ended_at": session.ended_at,
                          "last_message": _capped(note.text) if note is not None else None})
    return {"handoff": None, "since": since, "since_total": total}


def _written_handoff(core: Core, session: Session) -> dict[str, Any] | None:
    text = core.handoff_text(session.handoff_id) if session.handoff_id else None
    if text is None or text.startswith(records.LEGACY_HEADER):  # (a capture from before notes)
        return None
    return {"session_id": session.id, "ended": session.ended, "ended_at": session.ended_at,
            "id": session.handoff_id, "text": text}


def _capped(text: str) -> str:
    return text if len(text) <= SINCE_CHARS else text[:SINCE_CHARS - 1].rstrip() + "…"


# Point of action: a memory a prompt or tool hook injected (in full or as a pointer) is not shown
# again before a tool call until this many of the session's tool calls have passed. The start
# context is a digest read long before the action, so it does not count (docs/hooks.md).
TOOL_WINDOW = 20


def recently_injected(session: Session, memory_id: str) -> bool:
    """Injected at most TOOL_WINDOW tool calls ago: `injected_at` holds the count of calls so far
    at that moment, and the call being decided has already been counted."""
    at = session.injected_at.get(memory_id)
    return at is not None and session.tool_calls - at <= TOOL_WINDOW


def count_tool_call(session: Session) -> None:
    """One more tool call the pre-tool hook asked about (the window's clock)."""
    session.tool_calls += 1


def take_unseen(session: Session, ids: Any, limit: Any, mark: bool = True, window: bool = False) -> list[str]:
    """The first `limit` of `ids` not injected before in this session — or, before a tool call
    (`window`), not within the last TOOL_WINDOW tool calls; they count as injected now unless
    `mark` is False (a hook's dry run only looks)."""
    if not isinstance(ids, list):
        return []
    cap = limit if isinstance(limit, int) and limit > 0 else 3
    seen = (lambda i: recently_injected(session, i)) if window else session.injected.__contains__
    fresh = [i for i in dict.fromkeys(x for x in ids if isinstance(x, str)) if not seen(i)][:cap]
    if mark:
        session.injected = {*session.injected, *fresh}
        _stamp(session, fresh)
    return fresh


def take_unpointed(session: Session, ids: Any, taken: list[str], mark: bool = True, window: bool = False) -> list[str]:
    """Of `ids` (pointer candidates), those neither shown in full nor pointed to before in this
    session (before a tool call: within the window), nor shown in full by this same call
    (`taken`). A prompt's pointer never repeats; a memory pointed to may still be shown in full
    later, when a prompt is clearly about it."""
    if not isinstance(ids, list):
        return []
    if window:
        fresh = [i for i in dict.fromkeys(x for x in ids if isinstance(x, str))
                 if i not in taken and not recently_injected(session, i)][:MAX_POINTERS]
    else:
        seen = {*session.injected, *session.pointed, *taken}
        fresh = [i for i in dict.fromkeys(x for x in ids if isinstance(x, str)) if i not in seen][:MAX_POINTERS]
    if mark:
        session.pointed = {*session.pointed, *fresh}
        _stamp(session, fresh)
    return fresh


def _stamp(session: Session, ids: list[str]) -> None:
    if ids:
        session.injected_at = {**session.injected_at, **dict.fromkeys(ids, session.tool_calls)}


def settings(core: Core) -> dict[str, Any]:
    """The hook settings a hook process needs (it never reads the config file itself)."""
    return core.config.hook_settings()
