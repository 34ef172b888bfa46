"""What client hooks (`memoryd hook EVENT`) ask of the session tier, beyond the tools.

Import contract: core, connections, memories (gates, tier), scopes — no zmq, no msgpack.

- One memoryd session per client session: `ClientSessions` maps the client's session key (Claude
  Code's `session_id`, which its bridge also sees as `CLAUDE_CODE_SESSION_ID`) to the open memoryd
  session, so the bridge and every hook process of one client session share it. Runtime only: after
  a daemon restart the bridge's reattach binds the key again.
- Last words: the latest assistant message, capped and credential-scanned, kept as ONE note on the
  session and replaced each turn (runtime, never a record or an event per turn).
- Fallback handoff: a session that ends (session-end hook, bridge bye, lost bridge, idle) without a
  handoff from the agent gets its last words as its handoff, marked as captured by the hook.
- Injected set: the memories the prompt hook already showed in this session, so none repeats.
"""

from __future__ import annotations

import re
from typing import Any

from memoryd.daemon.connections import Session
from memoryd.daemon.core import Core, parse_iso

LAST_WORDS_CHARS = 4000
MAX_WALK_BACK = 200          # sessions of one worktree searched for the newest handoff
IDLE_END_S = 12 * 3600       # an ownerless hook session (no bridge, no session-end) ends this idle
IDLE_CHECK_S = 60.0
FALLBACK_HEADER = ("[captured by the memoryd session-end hook: the agent's last message of a session "
                   "that ended without writing a handoff]")
WITHHELD = "[withheld: it looked like a credential]"
# Last words are scanned from at most this many trailing chars: a wire client may send 4 MiB, and
# scanning that on the request path would stall the loop. Far wider than the kept window, so a
# private key cut off here (its BEGIN line lost) cannot reach into what is kept.
SCAN_CHARS = 64 * 1024
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
    from memoryd.daemon.memories.gates import credential_hits, find_credentials

    text = _cut(text.strip(), SCAN_CHARS)
    text = _withhold(text, credential_hits(text))
    if find_credentials(text):
        return None
    text = _cut(text, LAST_WORDS_CHARS)
    return None if not text or find_credentials(text) else text


def _withhold(text: str, hits: list[tuple[int, int, str, str]]) -> str:
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
            and bool(session.last_words) and session.client_session not in keys.handed_off
            and core.memories is not None)


def end_session(core: Core, session: Session, reason: str, keys: ClientSessions,
                identity: dict[str, Any] | None = None) -> dict[str, Any]:
    """End `session` with `reason`; its last words become its handoff when the agent wrote none."""
    if not session.is_open:
        return {"session_id": session.id, "ended": session.ended, "already_ended": True}
    handoff_id = None
    if needs_fallback(core, session, keys):
        text = f"{FALLBACK_HEADER}\n\n{session.last_words}"
        scopes = [f"projects:{session.project}"] if session.project else []
        try:
            handoff_id, _ = core.memories.capture_handoff(session, identity or {}, text, scopes)
        except Exception:  # a refused handoff must not keep the session open
            handoff_id = None
    core.end_session(session, reason, handoff_id=handoff_id, handoff_by="hook" if handoff_id else None)
    session.last_words = None
    return {"session_id": session.id, "ended": reason, "fallback_handoff": handoff_id}


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

def latest_handoff(core: Core, caller: Session) -> dict[str, Any] | None:
    """The newest handoff left by an earlier session of the caller's worktree (most recently
    active first, as `episode_handoff` walks), with who wrote it; None when there is none."""
    for count, session in enumerate(core.sessions.walk_back(caller.worktree, skip=caller.id)):
        if count >= MAX_WALK_BACK:
            break
        text = core.handoff_text(session.handoff_id) if session.handoff_id else None
        if text is not None:
            by_hook = text.startswith(FALLBACK_HEADER)
            body = text[len(FALLBACK_HEADER):].strip() if by_hook else text
            return {"session_id": session.id, "ended": session.ended, "ended_at": session.ended_at,
                    "id": session.handoff_id, "text": body, "captured_by_hook": by_hook}
    return None


def take_unseen(session: Session, ids: Any, limit: Any) -> list[str]:
    """The first `limit` of `ids` not injected before in this session; they count as injected."""
    if not isinstance(ids, list):
        return []
    cap = limit if isinstance(limit, int) and limit > 0 else 3
    fresh = [i for i in dict.fromkeys(x for x in ids if isinstance(x, str)) if i not in session.injected][:cap]
    session.injected = {*session.injected, *fresh}
    return fresh


def settings(core: Core) -> dict[str, Any]:
    """The hook settings a hook process needs (it never reads the config file itself)."""
    c = core.config
    return {"session_start_chars": c.hook_session_start_chars, "prompt_chars": c.hook_prompt_chars,
            "prompt_max_hits": c.hook_prompt_max_hits, "prompt_min_relevance": c.hook_prompt_min_relevance,
            "last_words": c.hook_last_words}
