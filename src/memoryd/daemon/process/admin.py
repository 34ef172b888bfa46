"""Operator reads and the operator's pending-write decision behind the `admin` and `episodes` ops
(docs/tools.md, `memory_write_confirm`). Layer: assembly; imported only by `server`."""

from __future__ import annotations

import json
from typing import Any

from memoryd.daemon.core import Call, Core
from memoryd.daemon.episodes.tools import episode_view
from memoryd.daemon.identity.session_table import Conn, Session
from memoryd.daemon.memories.args import named_memory
from memoryd.daemon.memories.shortids import is_short_id
from memoryd.daemon.memories.writes import memory_write_cancel, memory_write_confirm
from memoryd.daemon.process import reaper
from memoryd.daemon.sessions import receipts, records
from memoryd.daemon.storage import logcheck
from memoryd.daemon.storage.clock import iso
from memoryd.daemon.sync import actions as sync_actions
from memoryd.errors import BadRequest, InvalidParams, ResourceState

MAX_ROWS = 500
HANDOFF_CHARS = 4000
MAX_HISTORY = 200


def handle(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    action = args.get("action")
    if action == "resolve":
        return resolve(core, conn, args)
    if action in sync_actions.ACTIONS:  # `memoryd sync …` (daemon/sync/actions.py)
        return sync_actions.ACTIONS[action](core, conn, args)
    reader = READERS.get(action) if isinstance(action, str) else None
    if reader is None:
        raise BadRequest(f"unknown admin action {str(action)[:64]!r}; known: resolve, {', '.join(READERS)}",
                         {"param": "action"})
    return reader(core, args)


def _count(args: dict[str, Any], key: str, default: int, most: int) -> int:
    value = args.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise InvalidParams(key, f"must be an integer 1-{most}")
    return value


def _text(args: dict[str, Any], key: str, what: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(key, f"must be a {what}")
    return value


def pending(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """Every live pending write, oldest first, with the draft the user is asked to approve."""
    tier = core.memories
    rows = []
    for item in sorted(tier.pending.values(), key=lambda p: p.created):
        draft = item.draft
        owner = core.sessions.get(item.session_id)
        rows.append({"pending_id": item.id, "session_id": item.session_id, "created": item.created,
                     "expires_at": iso(item.expires_at), "expired": item.expires_at <= core.clock(),
                     "reason": item.reason, "preview": item.preview, "content": draft.get("content"),
                     "scopes": list(draft.get("scopes") or []), "category": draft.get("category"),
                     "confidence": draft.get("confidence"), "source_episode_id": item.source_episode_id,
                     "worktree": owner.worktree if owner else None, "session_ended": owner.ended if owner else None})
    return {"pending": rows, "total": len(rows), "framing": "data"}


def resolve(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    """Confirm or cancel any session's pending write as its owner, then log `operator_resolve`."""
    if conn is None:
        raise BadRequest("say hello before resolving a pending write", kind="unknown_connection")
    decision = args.get("decision")
    if decision not in ("confirm", "cancel"):
        raise InvalidParams("decision", "must be confirm or cancel")
    pending_id = args.get("pending_id")
    if not isinstance(pending_id, str):
        raise InvalidParams("pending_id", "must be a string")
    tier = core.memories
    item = tier.pending.get(pending_id)
    owner_id = item.session_id if item is not None else tier.expired.get(pending_id)
    owner = core.sessions.get(owner_id) if owner_id else None
    if owner is None:
        raise ResourceState("unknown_pending", pending_id)
    handler = memory_write_confirm if decision == "confirm" else memory_write_cancel
    result = handler(Call(core, conn, owner, f"{conn.id}:admin:{args.get('_req_id')}"), {"pending_id": pending_id})
    # After the handler, so a refused decision (expired, …) writes nothing, as tool errors do.
    core.record("operator_resolve", core.sessions.get(conn.session_id), pending_id=pending_id,
                decision=decision, owner=owner.id, status=result.get("status"))
    return {**result, "owner_session_id": owner.id}


def session_row(core: Core, session: Session) -> dict[str, Any]:
    """One session as the operator sees it: where, who, how it ended, its handoff and episodes, and the
    last message the session-end hook kept when it wrote no handoff."""
    handoff = None
    found = records.of(core)
    note = found.notes.get(session.id) if found is not None else None
    if session.handoff_id:
        text = core.handoff_text(session.handoff_id)
        handoff = {"id": session.handoff_id, "text": (text or "")[:HANDOFF_CHARS],
                   "truncated": bool(text and len(text) > HANDOFF_CHARS), "missing": text is None}
    return {"session_id": session.id, "worktree": session.worktree, "project": session.project,
            "client": session.client, "started_at": session.started_at, "last_active": session.last_active,
            "ended": session.ended, "ended_at": session.ended_at, "calls": session.calls,
            "episodes": len(core.journal.of_session(session.id)), "summary": session.summary,
            "handoff": handoff, "last_message": None if note is None else {
                "text": note.text, "captured_by": records.NOTE_BY, "captured_at": note.captured_at}}


def sessions(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """Recent sessions, most recently active first; `worktree` narrows to one (exact string, as
    the handoff walk compares); operator sessions only with `include_operator`."""
    limit = _count(args, "limit", 50, MAX_ROWS)
    table = core.sessions
    if (worktree := args.get("worktree")) is None:
        ids = [s.id for s in sorted(table.every().values(), key=lambda s: s.last_active, reverse=True)]
    elif isinstance(worktree, str):
        ids = list(reversed(table.by_worktree.get(worktree, {})))
    else:
        raise InvalidParams("worktree", "must be a path string")
    rows = [s for sid in ids if (s := table.get(sid)) is not None]
    if not args.get("include_operator"):
        rows = [s for s in rows if not s.is_operator]
    return {"sessions": [session_row(core, s) for s in rows[:limit]], "total": len(rows), "framing": "data"}


def session(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    found = core.sessions.get(args.get("session_id")) if isinstance(args.get("session_id"), str) else None
    if found is None:
        raise ResourceState("unknown_session", str(args.get("session_id"))[:64])
    return {**session_row(core, found), "framing": "data"}


def worktrees(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """Each worktree that has agent sessions: how many, and the newest activity; newest first."""
    rows: list[dict[str, Any]] = []
    for worktree, ids in core.sessions.by_worktree.items():
        agents = [s for sid in ids if (s := core.sessions.get(sid)) is not None and not s.is_operator]
        if agents:
            rows.append({"worktree": worktree, "sessions": len(agents),
                         "last_active": max(s.last_active for s in agents)})
    rows.sort(key=lambda r: r["last_active"], reverse=True)
    return {"worktrees": rows, "total": len(rows)}


def episodes(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """The `episodes` op: `prune` (with `dry_run`) runs the TTL pass; with `session`, that session's
    episodes; else each session's count and newest, newest first."""
    if args.get("action") == "prune":
        due = reaper.episode_ttl_pass(core, core.clock(), dry_run=bool(args.get("dry_run")))
        return {"dry_run": bool(args.get("dry_run")), "sessions": due,
                "episodes": sum(entry["episodes"] for entry in due)}
    if isinstance(session := args.get("session"), str):
        return {"session": session, "episodes": [
            {**episode_view(core, e), "swarm_id": e.swarm_id}
            for e in core.journal.of_session(session)]}
    rows = [{"session": sid, "episodes": count, "newest": newest,
             "ended": getattr(core.sessions.get(sid), "ended", "unknown")}
            for sid, count, newest in core.journal.summaries()]
    return {"sessions": sorted(rows, key=lambda r: r["newest"], reverse=True)}


def history(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """The events that name memory `id`, oldest first, newest MAX_HISTORY kept (read from the log's files)."""
    memory_id = _text(args, "id", "memory id")
    found: list[dict[str, Any]] = []
    for segment in logcheck.segments(core.root / "events"):
        with open(segment, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if memory_id not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and (event.get("memory_id") == memory_id or (
                        isinstance(ids := event.get("ids"), list) and memory_id in ids)):
                    found.append({k: v for k, v in event.items() if k not in ("prev", "hash")})
    return {"id": memory_id, "events": found[-MAX_HISTORY:], "total": len(found)}


def conflicts(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """Live memories that say they contradict another live memory."""
    tier = core.memories
    rows = []
    for memory in tier.live.values():
        for link in memory.links:
            if link.get("type") == "contradicts" and (target := tier.live.get(link.get("target_id", ""))) is not None:
                rows.append({"id": memory.id, "first_line": memory.first_line, "target_id": target.id,
                             "target_first_line": target.first_line})
    return {"conflicts": rows[:MAX_ROWS], "total": len(rows), "framing": "data"}


MIN_PREFIX = 6
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")  # the characters of a ULID
MAX_CANDIDATES = 10


def resolve_id(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    """The memory (live or removed) a short id names or whose id starts with `prefix` (≥ MIN_PREFIX chars, any
    case); a whole id as it is. Ambiguous → InvalidParams listing candidates; none → `unknown_memory`."""
    prefix = args.get("prefix")
    if not isinstance(prefix, str) or not prefix.strip():
        raise InvalidParams("id", "must be a memory id or a prefix of one")
    wanted = prefix.strip().upper()
    if len(wanted) >= 26:
        return {"id": wanted, "prefix": prefix}
    if is_short_id(prefix):
        return {"id": named_memory(core.memories.short_ids, "id", prefix), "prefix": prefix}
    if not _CROCKFORD.issuperset(wanted):
        raise InvalidParams("id", f"{prefix!r} is not a memory id: ids use 0-9 and A-Z without I, L, O, U")
    if len(wanted) < MIN_PREFIX:
        raise InvalidParams("id", f"{prefix!r} is too short: give at least {MIN_PREFIX} characters of the id")
    tier = core.memories
    found = sorted(i for ids in (tier.live, tier.tombstones) for i in ids if i.startswith(wanted))
    if not found:
        raise ResourceState("unknown_memory", prefix, f"no memory id starts with {prefix!r}")
    if len(found) > 1:
        shown = [{"id": i, "status": "live" if i in tier.live else "removed",
                  "first_line": (tier.live.get(i) or tier.tombstones[i]).first_line} for i in found[:MAX_CANDIDATES]]
        error = InvalidParams("id", f"{prefix!r} is ambiguous: {len(found)} memories start with it; "
                              f"give more characters: " + ", ".join(i for i in found[:MAX_CANDIDATES]))
        error.data["candidates"] = shown
        raise error
    return {"id": found[0], "prefix": prefix}


def _injections(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    return receipts.session_injections(core, _text(args, "session_id", "session id"))


def _delivery(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    memory_id = _text(args, "id", "memory id")
    return {"id": memory_id, **receipts.delivery(core, memory_id)}


def _stats(core: Core, args: dict[str, Any]) -> dict[str, Any]:
    return receipts.stats(core, _count(args, "days", receipts.STATS_DAYS, 365))


READERS = {"resolve_id": resolve_id, "injections": _injections, "delivery": _delivery, "stats": _stats,
           "pending": pending, "sessions": sessions, "session": session, "worktrees": worktrees,
           "history": history, "conflicts": conflicts}
