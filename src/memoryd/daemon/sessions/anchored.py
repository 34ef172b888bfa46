"""The `anchored` hook action: the memories a tool call is about to touch (the `pre-tool` hook;
README "Automatic recall"). Anchors are exact keys (memories/anchors.py): no score floor to tune.
"""

from __future__ import annotations

from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity.scopes import is_hidden
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.memories.anchors import Hit, best
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.memories.staleness import FRESH
from memoryd.daemon.sessions.hooks import take_unseen

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
        session.tool_calls += 1  # the TOOL_WINDOW clock (sessions/hooks.py)
    anchors = tier.index.anchors
    if not anchors.built:  # idle turns build it after a start; a call early on helps, boundedly
        anchors.build_some(tier.live, BUILD_SLICE)
    paths = args.get("paths")
    hits: list[Hit] = []
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


def _row(core: Core, memory: Memory, hit: Hit) -> dict[str, Any]:
    """The hook's row; `note` is the staleness verdict in a word: `moved` when a path it cites is
    gone from its worktree, `stale` when a spot check is due."""
    from memoryd.daemon.memories.reads import staleness_fields

    content = memory.content if len(memory.content) <= CONTENT_CHARS else memory.content[:CONTENT_CHARS - 1] + "…"
    row = {"id": memory.id, "category": memory.category, "content": content, "why": hit.why}
    fields = staleness_fields(core, memory)
    if (fields.get("path_drift") or {}).get("missing"):
        row["note"] = "moved"
    elif fields.get("staleness_verdict") != FRESH:
        row["note"] = "stale"
    return row
