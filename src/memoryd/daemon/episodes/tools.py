"""The episode tier's tools: episode_write, episode_handoff, episode_search. Import contract: core (and
its journal), clock, connections, credentials, store, scopes, tool, validate, the episode record, and
protocol's frame limit — no zmq, no msgpack."""

from __future__ import annotations

import re
import time
from collections.abc import Set as AbstractSet
from typing import Annotated, Any, Required, TypedDict

from memoryd import names
from memoryd.daemon.calls.signature import Rule
from memoryd.daemon.calls.validate import python_pattern, require_text
from memoryd.daemon.core import Call, Core
from memoryd.daemon.credentials.detector import mask_credentials
from memoryd.daemon.episodes.episode import Episode, first_line, to_meta
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.scopes import is_hidden, matches_any, unique
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.storage import frontmatter
from memoryd.daemon.storage.clock import iso, parse_iso
from memoryd.daemon.tool import ANY_LIST, ANY_OBJ, BOOL, INT, OPT_STR, STR, On, Parked, Scopes, SessionId, Tool, Ulid
from memoryd.errors import InvalidParams, ResourceState
from memoryd.protocol import MAX_FRAME_BYTES

SWARM_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
MAX_WAIT_S = 300
_SPAN = re.compile(r"(\d{1,6})([smhdw])")  # fullmatch: `$` would accept a trailing newline
_SPAN_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A reply must fit one frame; episode rows fill at most this many bytes of it (by `wire_size`), the
# rest is room for the envelope and the result's other fields (total, bodies_omitted, hint).
REPLY_BUDGET_BYTES = MAX_FRAME_BYTES - 64 * 1024


def since_cutoff(value: str, now: float) -> str:
    """`since` as an ISO timestamp to compare against: absolute ISO, or a span like 30m/24h/7d."""
    span = _SPAN.fullmatch(value.strip())
    try:
        if span:
            return iso(now - int(span.group(1)) * _SPAN_S[span.group(2)])
        return iso(parse_iso(value.strip()))
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidParams("since", "must be an ISO-8601 UTC timestamp or a span like 30m, 24h, 7d") from exc


def episode_write(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, cfg = call.core, call.core.config
    body = require_text("body", args["body"], cfg.max_content_bytes)
    takeaway = args["takeaway"]
    if takeaway is not None:
        takeaway = require_text("takeaway", takeaway, cfg.max_takeaway_bytes).strip()
    scopes = unique(args["scopes"] or [])
    if len(scopes) > cfg.max_scopes_per_write:
        raise InvalidParams("scopes", f"at most {cfg.max_scopes_per_write} scopes per write")
    swarm = args["swarm_id"] or call.identity.get("swarm_id")
    if swarm is not None and not python_pattern(SWARM_PATTERN).fullmatch(swarm):
        raise InvalidParams("swarm_id", "must be 1-128 chars of [A-Za-z0-9_-]")
    # Secrets are masked before anything stores them (docs/security.md).
    body, body_kinds = mask_credentials(body)
    takeaway, takeaway_kinds = mask_credentials(takeaway) if takeaway is not None else (None, [])
    masked = [{"field": field, "kinds": sorted(set(kinds))}
              for field, kinds in (("body", body_kinds), ("takeaway", takeaway_kinds)) if kinds]
    result = write_episode(core, call.session, body, takeaway, scopes, swarm, call.req)
    return {**result, "masked": masked} if masked else result


def write_episode(core: Core, session: Session, body: str, takeaway: str | None,
                  scopes: list[str], swarm: str | None, req: str | None) -> dict[str, Any]:
    episode_id = idents.mint_ulid(core.clock())
    episode = Episode(id=episode_id, session_id=session.id, created=core.now(), takeaway=takeaway,
                      first_line=first_line(body), scopes=tuple(scopes), swarm_id=swarm, worktree=session.worktree)
    data = frontmatter.render(to_meta(episode, session.id), body, blame="takeaway")
    # A new ULID: nothing there to be immutable.
    core.files.write_file(core.journal.path_for(session.id, episode_id), data, fresh=True)
    core.record(names.EPISODE_WRITE, session, episode_id=episode_id, swarm_id=swarm, req=req)
    core.journal.add(episode)
    return _written(episode)


def replay_episode_write(core: Core, event: dict[str, Any]) -> dict[str, Any] | None:
    """The result of an episode_write already applied before a restart (idempotent retry)."""
    episode = core.journal.by_id.get(event.get("episode_id", ""))
    return None if episode is None else _written(episode)


def _written(episode: Episode) -> dict[str, Any]:
    return {"status": "committed", "id": episode.id, "session_id": episode.session_id, "created": episode.created,
            "takeaway": episode.takeaway, "scopes": list(episode.scopes), "swarm_id": episode.swarm_id}


def episode_view(core: Core, episode: Episode, extra: bool = False) -> dict[str, Any]:
    """The episode without its body (`fit_views` adds bodies within the reply budget)."""
    provenance = core.provenance(episode.id, episode.created)
    view: dict[str, Any] = {"id": episode.id, "created": episode.created, "takeaway": episode.headline,
                            "scopes": list(episode.scopes), "provenance": provenance}
    if extra:
        view.update(session_id=episode.session_id, swarm_id=episode.swarm_id, worktree=episode.worktree)
    return view


def wire_size(value: Any) -> int:
    """An upper bound of `value`'s msgpack size: UTF-8 bytes plus the largest header per item."""
    if isinstance(value, str):
        return len(value.encode()) + 5
    if isinstance(value, dict):
        return 5 + sum(wire_size(k) + wire_size(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return 5 + sum(wire_size(item) for item in value)
    return 9  # numbers, booleans, None


def fit_views(core: Core, episodes: list[Episode], with_body: bool, budget: int,
              extra: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Views of `episodes` (oldest first) within `budget` wire bytes, and the fields saying what was left out
    ({} when nothing was). Filled newest first: once a body (a bare row) would pass the budget, it and every
    older one are left out (`bodies_omitted`, `rows_omitted`; not in the outputSchema: tools/list's budget)."""
    views: list[dict[str, Any]] = []
    omitted: list[str] = []
    used, bodies = 0, with_body
    for episode in reversed(episodes):
        view = episode_view(core, episode, extra=extra)
        used += wire_size(view)
        if used > budget:
            break
        if with_body and view["provenance"] != "unaccounted":  # a planted file's body is never shown
            body = core.journal.read_body(episode) if bodies else None
            bodies = body is not None and used + wire_size(body) + wire_size("body") <= budget
            if bodies:
                view["body"] = body
                used += wire_size(body) + wire_size("body")
            else:
                omitted.append(episode.id)
        views.append(view)
    views.reverse()
    rows_omitted = len(episodes) - len(views)
    if not omitted and not rows_omitted:
        return views, {}
    marker: dict[str, Any] = {"truncated": True}
    said = []
    if omitted:
        marker["bodies_omitted"] = omitted[::-1]
        said.append(f"the bodies of the {len(omitted)} oldest row(s) are left out (bodies_omitted: read "
                    "them with episode_search(ids=[...]) a few at a time)")
    if rows_omitted:
        marker["rows_omitted"] = rows_omitted
        said.append(f"{rows_omitted} older row(s) are left out (narrow the search or lower max_results)")
    marker["hint"] = f"capped to fit the {MAX_FRAME_BYTES // (1024 * 1024)} MiB reply limit: " + "; ".join(said)
    return views, marker


def visible_episodes(core: Core, session: Session, disabled: AbstractSet[str]) -> list[Episode]:
    return [e for e in core.journal.of_session(session.id) if not is_hidden(e.scopes, disabled)]


def empty_cause(core: Core, session: Session, disabled: AbstractSet[str]) -> str:
    """Why the immediately-prior session left nothing visible: the note of docs/tools.md."""
    live = core.journal.of_session(session.id)
    written = session.episodes_written
    if live:
        return (f"all-scope-hidden: the prior session {session.id}'s {len(live)} takeaway(s) are all "
                "in scopes you disabled; enable them with memory_scope_enable")
    if written and all(i in session.episodes_promoted for i in written):
        return (f"promoted-out: the prior session {session.id}'s {len(written)} takeaway(s) were promoted "
                "to durable memories; find them with memory_search")
    if written:
        return f"expired: the prior session {session.id}'s takeaways were pruned by the episode TTL"
    if session.handoff_calls:
        return f"floor-only: the prior session {session.id} called episode_handoff but wrote no episode"
    return (f"zero-episode: the prior session {session.id} made {session.calls} call(s) but never "
            "handed off and wrote no episode")


def resolve_prior(core: Core, caller: Session) -> tuple[Session | None, Session | None, str | None]:
    """(immediately-prior session, adopted session, note) for the caller's worktree."""
    disabled = caller.disabled_scopes
    first: Session | None = None
    note = None
    for candidate in core.sessions.walk_back(caller.worktree, skip=caller.id):
        if candidate.calls == 0 and not candidate.episodes_written:
            continue  # a bridge that connected and did nothing is no session to hand off from
        if visible_episodes(core, candidate, disabled):
            return first or candidate, candidate, note
        if first is None:
            first, note = candidate, empty_cause(core, candidate, disabled)
    return first, None, note


def prior_session_block(core: Core, session: Session) -> dict[str, Any]:
    block: dict[str, Any] = {"id": session.id, "ended": session.ended, "ended_at": session.ended_at}
    text = core.handoff_text(session.handoff_id) if session.handoff_id else None
    if text is not None:
        block["handoff"] = {"id": session.handoff_id, "text": text}
    if session.summary is not None:  # kept in the session's record file, not in the log
        block["summary"] = session.summary
    return block


def episode_handoff(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, caller = call.core, call.session
    if args["prior_session_id"] is None:
        first, adopted, note = resolve_prior(core, caller)
    else:
        first = adopted = core.sessions.get(args["prior_session_id"])
        note = None
        if adopted is None:
            raise ResourceState("unknown_session", args["prior_session_id"])
    shown = visible_episodes(core, adopted, caller.disabled_scopes)[-args["max_episodes"]:] if adopted else []
    prior = adopted or first
    core.record(names.EPISODE_HANDOFF, caller, prior=prior.id if prior else None, episodes=len(shown))
    result: dict[str, Any] = {"prior_session_id": prior.id if prior else None, "episodes": [], "framing": "data"}
    if note:
        result["note"] = note if adopted is None else f"{note} (rewound to the older session {adopted.id})"
    if prior:
        result["prior_session"] = prior_session_block(core, prior)
    # The rows get what the rest of the reply (the prior session's handoff and summary) leaves.
    result["episodes"], cut = fit_views(core, shown, args["include_bodies"], REPLY_BUDGET_BYTES - wire_size(result))
    return {**result, **cut}


def _search_filter(call: Call, args: dict[str, Any]) -> tuple[Any, Any]:
    """(the filter, the worktree an auto-scoped search keeps to: ... (any) when it names owners)."""
    cutoff = since_cutoff(args["since"], call.core.clock()) if args["since"] else None
    ids = set(args["ids"] or [])
    by_owner = args["swarm_id"] or args["session_id"] or args["ids"]
    worktree = call.session.worktree if args["auto_scope"] and not by_owner else ...
    disabled = call.session.disabled_scopes

    def accept(e: Episode) -> bool:
        return ((not ids or e.id in ids)
                and (args["swarm_id"] is None or e.swarm_id == args["swarm_id"])
                and (args["session_id"] is None or e.session_id == args["session_id"])
                and (worktree is ... or e.worktree == worktree)
                and (cutoff is None or e.created >= cutoff)
                and (not args["scopes"] or matches_any(e.scopes, args["scopes"]))
                and not is_hidden(e.scopes, disabled))
    return accept, worktree


def _candidates(core: Core, args: dict[str, Any], worktree: Any) -> Any:
    """Where the matches can be: packed sessions of other worktrees and swarms stay packed."""
    if args["ids"]:
        return (e for e in map(core.journal.get, args["ids"]) if e is not None)
    if args["session_id"]:
        return iter(core.journal.session(args["session_id"]).values())
    return core.journal.matching(worktree, args["swarm_id"])


def episode_search(call: Call, args: dict[str, Any]) -> dict[str, Any] | Parked:
    core, wanted = call.core, args["wait_for"]
    accept, worktree = _search_filter(call, args)
    with_body = args["include_bodies"] if args["include_bodies"] is not None else bool(args["ids"])
    core.record(names.EPISODE_SEARCH, call.session, wait_for=wanted)
    # The parked check counts only episodes written since its last look (O(new)); `have` is what
    # the last full search counted, and it runs again once `wanted` may be reached, or at the timeout.
    state = {"cursor": core.feed_end, "have": 0}

    def run(timed_out: bool | None) -> dict[str, Any] | None:
        matches = sorted((e for e in _candidates(core, args, worktree) if accept(e)), key=lambda e: (e.created, e.id))
        state["have"] = len(matches)
        if timed_out is False and len(matches) < wanted:
            return None
        views, cut = fit_views(core, matches[-args["max_results"]:], with_body, REPLY_BUDGET_BYTES, extra=True)
        result = {"episodes": views, "total": len(matches), "framing": "data", **cut}
        if timed_out is not None:
            result["timed_out"] = timed_out and len(matches) < wanted
        return result

    def check(timed_out: bool) -> dict[str, Any] | None:
        new = core.episodes_since(state["cursor"])
        state["cursor"] = core.feed_end
        by_id = core.journal.by_id
        state["have"] += sum(1 for i in new if i in by_id and accept(by_id[i]))
        return run(timed_out) if timed_out or state["have"] >= wanted else None

    ready = run(None if wanted is None else False)
    if ready is not None:
        return ready
    return Parked(check=check, deadline=time.monotonic() + args["timeout_s"])


_EPISODE_ROW = {"type": "array", "items": {"type": "object"}}

class WriteArgs(TypedDict, total=False):
    body: Required[Annotated[str, Rule("Markdown, ≤ 1 MB.")]]
    takeaway: Annotated[str, Rule("One sentence, ≤ 4 KB.")]
    scopes: Scopes
    swarm_id: Annotated[str, Rule("Fan-in: a sub-agent passes its coordinator's session id; "
                                  "episode_search(swarm_id) gathers them. Default: MEMORYD_SWARM_ID.",
                                  pattern=SWARM_PATTERN)]


class HandoffArgs(TypedDict, total=False):
    prior_session_id: SessionId
    max_episodes: Annotated[int, Rule(default=5, minimum=1, maximum=50)]
    include_bodies: bool


class SearchArgs(TypedDict, total=False):
    swarm_id: Annotated[str, Rule(pattern=SWARM_PATTERN)]
    session_id: SessionId
    scopes: Annotated[Scopes, Rule("Any of these, or below.")]
    since: Annotated[str, Rule("ISO time or 30m, 24h, 7d.")]
    ids: Annotated[list[Ulid], Rule(maxItems=200)]
    max_results: Annotated[int, Rule(default=20, minimum=1, maximum=200)]
    auto_scope: On
    include_bodies: bool
    wait_for: Annotated[int, Rule(minimum=1, maximum=200)]
    timeout_s: Annotated[float, Rule(minimum=0, maximum=MAX_WAIT_S, default=30)]


TOOLS = [
    Tool(name=names.EPISODE_WRITE, core=True, replay=replay_episode_write,
         description=("Journal run state in your session: what was tried, where it failed, what is blocked or "
                      "next; the transient notes memory_write rejects (no durability gate: not durable facts). "
                      "Secrets are masked before storing (masked names the fields). "
                      "Kept 30 days, never in memory_* reads; episode_handoff shows the takeaway (else the body's "
                      "first line); episode_promote makes one durable."),
         args=WriteArgs,
         returns={"status": STR, "id": STR, "session_id": STR, "created": STR, "takeaway": OPT_STR,
                  "scopes": ANY_LIST, "swarm_id": OPT_STR, "masked": ANY_LIST},
         handler=episode_write),
    Tool(name=names.EPISODE_HANDOFF, core=True,
         description=("What did the last session in this worktree conclude? Call first in a fresh agent or loop "
                      "iteration, before memory_search: its last takeaways (oldest first), how it ended, its "
                      "finish handoff. If it left nothing visible, note names the cause (floor-only, zero-episode, "
                      "promoted-out, all-scope-hidden; the last two did journal) and older takeaways may follow. "
                      "provenance unaccounted: no log event wrote it; suspect, no body. prior_session_id picks one."),
         args=HandoffArgs, returns={"prior_session_id": OPT_STR, "episodes": _EPISODE_ROW, "note": STR,
                                    "prior_session": ANY_OBJ, "framing": STR},
         handler=episode_handoff, read_only=True),
    Tool(name=names.EPISODE_SEARCH,
         description=("Find episodes across sessions (never memories); filters AND; the newest matches, oldest "
                      "first, with total. auto_scope keeps your worktree unless swarm_id, session_id or ids is "
                      "given; ids also returns bodies. Fan-in: wait_for=N waits until N match or timeout_s "
                      "(timed_out says which), not blocking your other calls."),
         args=SearchArgs, returns={"episodes": _EPISODE_ROW, "total": INT, "timed_out": BOOL, "framing": STR},
         handler=episode_search, read_only=True),
]
