"""The session tier's tools: memory_session_start, memory_session_finish, memory_digest.

Import contract: core, clock, connections, scopes, tool, validate, memories (gates, rollups'
extension sections), session records.
"""

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
from memoryd.daemon.identity.scopes import is_hidden
from memoryd.daemon.identity.session_table import Session, is_operator_client
from memoryd.daemon.memories.overview import extension_sections
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
    """The open session `session_id` if the caller may finish it: its own, or one no connection
    owns any more (docs/tools.md, 'Session tier')."""
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


def _check_summary(summary: str | None) -> str | None:
    if summary is None:
        return None
    from memoryd.daemon.memories import gates

    require_text("summary", summary, MAX_SUMMARY_BYTES)
    if gates.find_credentials(summary):
        raise InvalidParams("summary", "holds a secret (credential); remove it before finishing")
    return summary.strip()


def memory_session_finish(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """Validate everything first (fail closed), then capture the handoff and close together."""
    core = call.core
    target = _target_session(call, args["session_id"])
    summary = _check_summary(args["summary"])
    handoff = args["handoff"]
    if handoff is not None:
        handoff = require_text("handoff", handoff, MAX_HANDOFF_BYTES).strip()
    result: dict[str, Any] = {"session_id": target.id}
    handoff_id = None
    if handoff is not None:
        project = target.project or call.identity.get("project")
        scopes = [f"projects:{project}"] if project else []
        handoff_id, deduped = core.memories.capture_handoff(target, call.identity, handoff, scopes)
        result.update(handoff_capsule=handoff_id, handoff_deduped=deduped)
    summary_sha = records.write_summary(core, target, summary) if summary is not None else None
    core.end_session(target, "finished", summary_sha=summary_sha, handoff_id=handoff_id)
    target.summary = summary
    result["finished_at"] = target.ended_at
    return {**result, "summary": summary} if summary is not None else result


def _capped(name: str, items: list[Any], cap: int) -> dict[str, Any]:
    return {name: items[:cap], f"{name}_total": len(items)}


class _MemoryScan:
    """The digest's memory sections: from the live map's aggregates (O(answer)) without disabled
    scopes, else from one pass over the store."""

    def __init__(self, core: Core, disabled: AbstractSet[str], project: str | None) -> None:
        live = core.memories.live
        self.pinned = [live[i] for i in core.memories.index.pinned if not is_hidden(live[i].scopes, disabled)]
        self.short_id = core.memories.short_ids.short
        self.sessions = core.sessions
        self.live = live
        self.project = project
        self.project_of = core.memories.project_of
        self.filtered = bool(disabled)
        if not self.filtered:
            self._from_aggregates(project)
            return
        self.count = 0
        self.by_category: Counter[str] = Counter()
        self.by_project: Counter[str] = Counter()
        self.handoffs: dict[str | None, Memory] = {}   # project -> its newest handoff
        self.others: list[Any] = []
        for memory in live.values():
            owner = self.project_of(memory)
            if is_hidden(memory.scopes, disabled) or (project is not None and owner != project):
                continue
            self.count += 1
            self.by_category[memory.category] += 1
            self.by_project[owner or "(none)"] += 1
            if memory.category != "handoff":
                self.others.append(memory)
            elif owner not in self.handoffs or memory.created > self.handoffs[owner].created:
                self.handoffs[owner] = memory

    def _from_aggregates(self, project: str | None) -> None:
        live = self.live
        if project is None:
            self.count = len(live)
            self.by_category, self.by_project = Counter(live.by_category), Counter(live.by_project)
            self.handoffs = live.newest_handoffs()
            return
        self.count = live.by_project.get(project, 0)
        self.by_category = Counter({c: n for (p, c), n in live.by_project_category.items() if p == project})
        self.by_project = Counter({project: self.count}) if self.count else Counter()
        self.handoffs = {p: m for p, m in live.newest_handoffs().items() if p == project}

    def handoff_rows(self, caller_project: str | None) -> list[dict[str, Any]]:
        """The newest handoff per project, newest first (the caller's first), with its session's summary."""
        ordered = sorted(self.handoffs.items(), key=lambda kv: kv[1].created, reverse=True)
        ordered.sort(key=lambda kv: kv[0] is None or kv[0] != caller_project)  # stable: caller's first
        rows = [{"project": p, "session_id": m.session_id, "id": m.id, "text": m.content, "created": m.created}
                for p, m in ordered]
        for row in rows:
            session = self.sessions.get(row["session_id"] or "")
            if session is not None and session.summary is not None:
                row["summary"] = session.summary
        return rows

    def pinned_rows(self, project: str | None) -> dict[str, Any]:
        """Pinned rules of `project` and the user-wide ones, oldest first (docs/search.md "Pinned rules")."""
        rules = sorted((m for m in self.pinned if self.project_of(m) in (None, project)), key=lambda m: m.id)
        rows = [{"id": m.id, "short_id": self.short_id(m.id), "content": m.content, "scopes": list(m.scopes),
                 "created": m.created} for m in rules[:PINNED_ROWS]]
        return {"pinned": rows, "pinned_total": len(rules)}

    def others_total(self) -> int:
        return len(self.others) if self.filtered else self.count - self.by_category.get("handoff", 0)

    def newest_rows(self, cap: int) -> list[dict[str, Any]]:
        if self.filtered:
            newest = heapq.nlargest(cap, self.others, key=lambda m: m.updated)
        else:
            # Stop as soon as every row the project has is found (none at all: no walk).
            wanted = min(cap, self.others_total())
            newest = list(itertools.islice((m for m in self.live.newest_first() if m.category != "handoff"
                                            and (self.project is None or self.project_of(m) == self.project)),
                                           wanted)) if wanted else []
        return [{"id": m.id, "first_line": m.first_line, "scopes": list(m.scopes), "category": m.category,
                 "updated": m.updated} for m in newest]


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
    rows = []
    for owner in itertools.islice(core.sessions.walk_back(session.worktree, skip=session.id), SUMMARY_WALK):
        if owner.summary is not None:
            rows.append({"session_id": owner.id, "ended_at": owner.ended_at, "summary": owner.summary})
            if len(rows) == cap:
                break
    return rows


def memory_digest(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, cap, session = call.core, args["headlines"], call.session
    scan = _MemoryScan(core, session.disabled_scopes, args["project"])
    caller_project = args["project"] or call.identity.get("project")
    pending = [{"pending_id": p.id, "preview": p.preview, "expires_at": iso(p.expires_at)}
               for p in core.memories.pending.values() if p.session_id == session.id]
    core.record("digest", session, headlines=cap, project=args["project"])
    return {
        "current_session": {"id": session.id, "started_at": session.started_at},
        **scan.pinned_rows(caller_project),
        **_capped("handoffs", scan.handoff_rows(caller_project), cap),
        "counts": {"memories": scan.count, "by_category": dict(scan.by_category),
                   "by_project": dict(scan.by_project), "episodes": len(core.journal.by_id),
                   "tombstones": len(core.memories.tombstones)},
        "newest": scan.newest_rows(cap), "newest_total": scan.others_total(),
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
    Tool(
        name="memory_session_start",
        description=("Open a new session bracket and make it current, e.g. per loop iteration of a long-lived "
                     "agent; the previous one ends as superseded. Not needed at agent start (implicit)."),
        args=NoArgs, returns={"session_id": STR, "started_at": STR, "previous_session_id": OPT_STR},
        handler=memory_session_start,
    ),
    Tool(
        name=names.MEMORY_SESSION_FINISH, core=True,
        description=("Close an open session exactly once, optionally with a summary and a handoff: what became "
                     "true, what is open, the next physical action. The handoff is saved first, as a durable "
                     "handoff memory (handoff_capsule; same text dedups) that later session starts and "
                     "memory_digest lead with. A blank, over-cap or secret-holding handoff fails the call: "
                     "nothing saved, session stays open."),
        args=FinishArgs,
        returns={"session_id": STR, "finished_at": STR, "summary": STR, "handoff_capsule": STR,
                 "handoff_deduped": BOOL},
        handler=memory_session_finish, destructive=False,
    ),
    Tool(
        name=names.MEMORY_DIGEST, core=True,
        description=("Session-start overview led by the newest handoff per project (yours first): your session "
                     "id, counts, newest memories, open sessions, your pending writes, recent takeaways here. "
                     "headlines caps each list (<name>_total counts all)."),
        args=DigestArgs,
        returns={"current_session": ANY_OBJ, "handoffs": ANY_LIST, "counts": ANY_OBJ, "newest": ANY_LIST,
                 "open_sessions": ANY_LIST, "pending_writes": ANY_LIST, "recent_takeaways": ANY_LIST,
                 "framing": STR},
        handler=memory_digest, read_only=True,
    ),
]
