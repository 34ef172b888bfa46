"""The session tier's tools: memory_session_start, memory_session_finish, memory_digest. Import contract:
core, clock, identity, credentials, tool, validate, memories (extension sections), session records."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Set as AbstractSet
from typing import Annotated, Any, Required, TypedDict

from memoryd import names
from memoryd.daemon.calls.signature import Rule
from memoryd.daemon.calls.validate import require_text
from memoryd.daemon.core import Call, Core
from memoryd.daemon.credentials.detector import find_credentials
from memoryd.daemon.identity.scopes import is_hidden
from memoryd.daemon.identity.session_table import Session, is_operator_client
from memoryd.daemon.memories.reads import extension_sections
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.sessions import records
from memoryd.daemon.storage.clock import iso
from memoryd.daemon.tool import ANY_LIST, ANY_OBJ, BOOL, OPT_STR, STR, NoArgs, SessionId, Tool
from memoryd.errors import InvalidParams, ResourceState

MAX_HANDOFF_BYTES = 65_536
MAX_SUMMARY_BYTES = 65_536
SUMMARY_WALK = 200  # sessions memory_digest looks back through for summaries
PINNED_ROWS = 50    # pinned rules a digest carries whole; `pinned_total` counts them all


def memory_session_start(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, previous = call.core, call.session
    core.end_session(previous, "superseded")
    session = core.start_session(call.identity, call.conn.id)
    call.conn.session_id = session.id
    return {"session_id": session.id, "started_at": session.started_at, "previous_session_id": previous.id}


def _target_session(call: Call, session_id: str) -> Session:
    """The open `session_id` if the caller may finish it: its own or an ownerless one (docs/tools.md)."""
    target = call.core.sessions.get(session_id)
    if target is None:
        raise ResourceState("unknown_session", session_id)
    if not target.is_open:
        raise ResourceState("finished_session", session_id,
                            f"session {session_id} already ended ({target.ended}); it accepts nothing more")
    if target.conn not in (None, call.conn.id):
        raise ResourceState("foreign_session", session_id,
                            f"session {session_id} belongs to another connected agent; only its owner may "
                            "finish it (finish your own session, or leave a handoff with episode_write)")
    return target


def memory_session_finish(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """Validate everything first (fail closed), then capture the handoff and close together."""
    core = call.core
    target = _target_session(call, args["session_id"])
    summary = args["summary"]
    if summary is not None:
        require_text("summary", summary, MAX_SUMMARY_BYTES)
        if find_credentials(summary):
            raise InvalidParams("summary", "holds a secret (credential); remove it before finishing")
        summary = summary.strip()
    result: dict[str, Any] = {"session_id": target.id}
    handoff_id = None
    if args["handoff"] is not None:
        handoff = require_text("handoff", args["handoff"], MAX_HANDOFF_BYTES).strip()
        project = target.project or call.identity.get("project")
        scopes = [f"projects:{project}"] if project else []
        handoff_id, deduped = core.memories.capture_handoff(target, call.identity, handoff, scopes)
        result.update(handoff_capsule=handoff_id, handoff_deduped=deduped)
    summary_sha = records.write(core, target.id, summary, "summary") if summary is not None else None
    core.end_session(target, "finished", summary_sha=summary_sha, handoff_id=handoff_id)
    target.summary = summary
    result["finished_at"] = target.ended_at
    return {**result, "summary": summary} if summary is not None else result


def _capped(name: str, items: list[Any], cap: int) -> dict[str, Any]:
    return {name: items[:cap], f"{name}_total": len(items)}


def _memory_counts(core: Core, disabled: AbstractSet[str], project: str | None, cap: int) -> tuple[
        Counter[str], Counter[str], dict[str | None, Memory], list[Memory]]:
    """(memories by category, by project, the newest handoff per project, the `cap` newest others): from
    the live map's aggregates (O(answer)) without disabled scopes, else from one pass over the store."""
    live, project_of = core.memories.live, core.memories.project_of
    if not disabled:
        if project is None:
            by_category, by_project = Counter(live.by_category), Counter(live.by_project)
        else:
            by_category = Counter({c: n for (p, c), n in live.by_project_category.items() if p == project})
            by_project = Counter({project: by_category.total()}) if by_category else Counter()
        handoffs = {p: m for p, m in live.newest_handoffs().items() if project is None or p == project}
        # Stop as soon as every row the project has is found (none at all: no walk).
        newest = (m for m in live.newest_first()
                  if m.category != "handoff" and (project is None or project_of(m) == project))
        wanted = min(cap, by_category.total() - by_category["handoff"])
        return by_category, by_project, handoffs, list(itertools.islice(newest, wanted))
    others: list[Memory] = []
    by_category, by_project, handoffs = Counter(), Counter(), {}
    for memory in live.values():
        owner = project_of(memory)
        if is_hidden(memory.scopes, disabled) or (project is not None and owner != project):
            continue
        by_category[memory.category] += 1
        by_project[owner or "(none)"] += 1
        if memory.category != "handoff":
            others.append(memory)
        elif owner not in handoffs or memory.created > handoffs[owner].created:
            handoffs[owner] = memory
    return by_category, by_project, handoffs, heapq.nlargest(cap, others, key=lambda m: m.updated)


def _memory_sections(core: Core, session: Session, project: str | None, caller_project: str | None,
                     cap: int) -> dict[str, Any]:
    """The digest's pinned rules, newest handoff per project (caller's first), counts and newest memories."""
    live, disabled = core.memories.live, session.disabled_scopes
    by_category, by_project, handoffs, newest = _memory_counts(core, disabled, project, cap)
    # Pinned rules of the caller's project and the user-wide ones, oldest first (docs/search.md "Pinned rules").
    pinned = sorted((live[i] for i in core.memories.index.pinned if not is_hidden(live[i].scopes, disabled)
                     and core.memories.project_of(live[i]) in (None, caller_project)), key=lambda m: m.id)
    ordered = sorted(handoffs.items(), key=lambda kv: kv[1].created, reverse=True)
    ordered.sort(key=lambda kv: kv[0] is None or kv[0] != caller_project)  # stable: caller's first
    rows = []
    for owner, memory in ordered:
        row = {"project": owner, "session_id": memory.session_id, "id": memory.id, "text": memory.content,
               "created": memory.created}
        writer = core.sessions.get(memory.session_id or "")
        if writer is not None and writer.summary is not None:
            row["summary"] = writer.summary
        rows.append(row)
    return {
        "pinned": [{"id": m.id, "short_id": core.memories.short_ids.short(m.id), "content": m.content,
                    "scopes": list(m.scopes), "created": m.created} for m in pinned[:PINNED_ROWS]],
        "pinned_total": len(pinned), **_capped("handoffs", rows, cap),
        "counts": {"memories": by_category.total(), "by_category": dict(by_category), "by_project": dict(by_project),
                   "episodes": len(core.journal.by_id), "tombstones": len(core.memories.tombstones)},
        "newest": [{"id": m.id, "first_line": m.first_line, "scopes": list(m.scopes), "category": m.category,
                    "updated": m.updated} for m in newest],
        "newest_total": by_category.total() - by_category["handoff"],
    }


def _open_sessions(core: Core) -> list[dict[str, Any]]:
    """Agents' open sessions (the operator's own, always open, is not one)."""
    rows = [{"id": s.id, "worktree": s.worktree, "client": s.client, "started_at": s.started_at,
             "last_seen": s.last_active} for s in core.sessions.open_sessions() if not is_operator_client(s.client)]
    return sorted(rows, key=lambda r: r["last_seen"], reverse=True)


def _recent_takeaways(core: Core, session: Session, cap: int) -> dict[str, Any]:
    """This worktree's newest takeaways, walking its sessions from the most recently active."""
    rows: list[Any] = []
    total = 0
    disabled = session.disabled_scopes
    for owner in core.sessions.walk_back(session.worktree, skip=""):
        episodes = [e for e in core.journal.session(owner.id).values() if not is_hidden(e.scopes, disabled)]
        total += len(episodes)
        if len(rows) < cap:
            rows.extend(episodes)
    rows = heapq.nlargest(cap, rows, key=lambda e: (e.created, e.id))
    return {"recent_takeaways": [{"id": e.id, "session_id": e.session_id, "created": e.created,
                                  "takeaway": e.headline, "provenance": core.provenance(e.id, e.created)}
                                 for e in rows], "recent_takeaways_total": total}


def _recent_summaries(core: Core, session: Session, cap: int) -> list[dict[str, Any]]:
    """Summaries of this worktree's last SUMMARY_WALK sessions, most recently active first."""
    walk = itertools.islice(core.sessions.walk_back(session.worktree, skip=session.id), SUMMARY_WALK)
    summarised = itertools.islice((owner for owner in walk if owner.summary is not None), cap)
    return [{"session_id": o.id, "ended_at": o.ended_at, "summary": o.summary} for o in summarised]


def memory_digest(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, cap, session = call.core, args["headlines"], call.session
    caller_project = args["project"] or call.identity.get("project")
    pending = [{"pending_id": p.id, "preview": p.preview, "expires_at": iso(p.expires_at)}
               for p in core.memories.pending.values() if p.session_id == session.id]
    core.record("digest", session, headlines=cap, project=args["project"])
    return {
        "current_session": {"id": session.id, "started_at": session.started_at},
        **_memory_sections(core, session, args["project"], caller_project, cap),
        **_capped("open_sessions", _open_sessions(core), cap),
        **_capped("pending_writes", pending, cap),
        **_recent_takeaways(core, session, cap),
        "recent_summaries": _recent_summaries(core, session, cap),
        **extension_sections(core, "digest"),  # sync's unsettled conflicts, when there are any
        "framing": "data",
    }


class FinishArgs(TypedDict, total=False):
    session_id: Required[SessionId]
    summary: Annotated[str, Rule("At most 64 KB.")]
    handoff: Annotated[str, Rule("At most 64 KB.")]


class DigestArgs(TypedDict, total=False):
    headlines: Annotated[int, Rule(default=10, minimum=1, maximum=50)]
    project: Annotated[str, Rule(maxLength=128)]


TOOLS = [
    Tool(name="memory_session_start",
         description=("Open a new session bracket and make it current, e.g. per loop iteration of a long-lived "
                      "agent; the previous one ends as superseded. Not needed at agent start (implicit)."),
         args=NoArgs, returns={"session_id": STR, "started_at": STR, "previous_session_id": OPT_STR},
         handler=memory_session_start),
    Tool(name=names.MEMORY_SESSION_FINISH, core=True,
         description=("Close an open session exactly once, optionally with a summary and a handoff: what became "
                      "true, what is open, the next physical action. The handoff is saved first, as a durable "
                      "handoff memory (handoff_capsule; same text dedups) that later session starts and "
                      "memory_digest lead with. A blank, over-cap or secret-holding handoff fails the call: "
                      "nothing saved, session stays open."),
         args=FinishArgs, returns={"session_id": STR, "finished_at": STR, "summary": STR, "handoff_capsule": STR,
                                   "handoff_deduped": BOOL},
         handler=memory_session_finish, destructive=False),
    Tool(name=names.MEMORY_DIGEST, core=True,
         description=("Session-start overview led by the newest handoff per project (yours first): your session "
                      "id, counts, newest memories, open sessions, your pending writes, recent takeaways here. "
                      "headlines caps each list (<name>_total counts all)."),
         args=DigestArgs,
         returns={"current_session": ANY_OBJ, "handoffs": ANY_LIST, "counts": ANY_OBJ, "newest": ANY_LIST,
                  "open_sessions": ANY_LIST, "pending_writes": ANY_LIST, "recent_takeaways": ANY_LIST,
                  "framing": STR},
         handler=memory_digest, read_only=True),
]
