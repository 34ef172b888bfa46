"""What a session sees of the tier: memory_scope_overview, memory_scope_disable/enable (what this
session's reads hide, in both tiers) and memory_health. The overview and health walk every memory.

Import contract: core, clock, logcheck, and the tier's reads, records, staleness and writes.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from memoryd.daemon.core import Call, Core
from memoryd.daemon.memories.reads import extension_sections, memory_filter, session_repos
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.memories.staleness import DAY_S, REQUIRED, assess
from memoryd.daemon.memories.writes import tier_of
from memoryd.daemon.storage import logcheck
from memoryd.daemon.storage.clock import parse_stamp

HEALTH_ITEMS = 20
NEVER_RETRIEVED_DAYS = 30
CHAIN_TAIL_BYTES = 64 * 1024


def memory_scope_overview(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier, session = call.core, tier_of(call.core), call.session
    keep = memory_filter(session, None, None, session_repos(session, call.identity) if args["auto_scope"] else None)
    visible = [m for m in tier.live.values() if keep(m)]
    by_scope = Counter(s for m in visible for s in m.scopes)
    return {"total": len(visible), "by_scope": dict(by_scope.most_common()),
            "by_category": dict(Counter(m.category for m in visible).most_common()),
            "tombstones": sum(1 for t in tier.tombstones.values() if keep(t)),
            "pending_writes": sum(1 for p in tier.pending.values() if p.session_id == session.id),
            "disabled_scopes": sorted(session.disabled_scopes),
            "episodes_in_worktree": core.journal.count_in_worktree(session.worktree)}


def memory_scope_disable(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    call.session.disabled_scopes = {*call.session.disabled_scopes, args["scope"]}
    call.core.record("scope_disable", call.session, scope=args["scope"])
    return {"disabled_scopes": sorted(call.session.disabled_scopes)}


def memory_scope_enable(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    call.session.disabled_scopes = call.session.disabled_scopes - {args["scope"]}
    call.core.record("scope_enable", call.session, scope=args["scope"])
    return {"disabled_scopes": sorted(call.session.disabled_scopes)}


def _capped(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"items": rows[:HEALTH_ITEMS], "total": len(rows)}


def _brief(memory: Memory, **extra: Any) -> dict[str, Any]:
    return {"id": memory.id, "first_line": memory.first_line, **extra}


def chain_tail_ok(core: Core) -> bool:
    """Verify the last ~64 KiB of the log against the running chain (cheap; `log verify` is full)."""
    core.sync()  # appends are buffered: flush so the file's tail is what the chain says
    files = logcheck.segments(core.log.dir)
    if not files:
        return core.log.seq == 0
    with open(files[-1], "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - CHAIN_TAIL_BYTES))
        lines = handle.read().split(b"\n")
    if size > CHAIN_TAIL_BYTES:
        lines = lines[1:]  # the first line was cut by the seek
    prev = None
    try:
        for line in filter(None, lines):
            event = json.loads(line)
            if (prev is not None and event["prev"] != prev) or logcheck.hash_problem(event):
                return False
            prev = event["hash"]
    except (ValueError, KeyError, TypeError):
        return False
    return prev == core.log.last_hash


def _curation(core: Core) -> dict[str, Any]:
    tier, now = tier_of(core), core.clock()
    live = list(tier.live.values())
    judged = [(m, assess(m, now, tier.probe, core.config.verification_stale_days, parse_stamp)) for m in live]
    unread = [m for m in live if now - parse_stamp(m.created) > NEVER_RETRIEVED_DAYS * DAY_S
              and not tier.retrievals.get(m.id)]
    return {"stale": _capped([_brief(m, age_days=found.age_days) for m, found in judged if found.verdict == REQUIRED]),
            "tainted": _capped([_brief(m, taint=list(m.taint)) for m in live if m.tainted]),
            "never_retrieved": _capped([_brief(m, created=m.created) for m in unread])}


def memory_health(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier = call.core, tier_of(call.core)
    core.verify_files(None)  # the after-start check finished now, so the report is exact
    missing = sorted(set(tier.missing) | set(getattr(core, "missing_episodes", [])))
    return {"memories": len(tier.live), **_curation(core), "pending_expired": tier.pending_expired_total,
            "episode_sessions": sum(1 for _ in core.journal.summaries()),
            "log": {"events": core.log.seq, "chain_ok": chain_tail_ok(core),
                    "torn_bytes_truncated": core.torn_bytes_truncated, "quarantined": _capped(core.log.quarantined)},
            "reaper": {"last_run": tier.reaper_last_run, "episodes_pruned": tier.episodes_pruned},
            "search_by_meaning": tier.semantic.health() if core.config.search_by_meaning else {"state": "off"},
            "bad_files": _capped(tier.bad_files + core.journal.bad_files + core.bad_files),
            **{name: _capped([{"id": i} for i in ids])
               for name, ids in (("hand_edited", tier.hand_edited), ("unaccounted", tier.unaccounted),
                                 ("missing", missing))},
            **extension_sections(core, "health"), "framing": "data"}

