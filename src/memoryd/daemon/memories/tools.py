"""The durable tier's catalogue entries: 15 memory_* tools, and episode_promote, listed here because
it writes through this tier's gates (the episode tier, below this one, cannot import them).

Import contract: tool plus the tier's handler modules. Descriptions and schemas are paid for in every
agent's context, so they stay terse; the handlers enforce what the schemas cannot say.
"""

from __future__ import annotations

from typing import Any

from memoryd import names
from memoryd.daemon.memories.edits import memory_remove, memory_restore, memory_update, memory_verify, replay_edit
from memoryd.daemon.memories.overview import (
    memory_health,
    memory_scope_disable,
    memory_scope_enable,
    memory_scope_overview,
)
from memoryd.daemon.memories.reads import memory_list, memory_list_tombstones, memory_search, memory_show
from memoryd.daemon.memories.records import CATEGORIES, CONFIDENCES, SOURCES
from memoryd.daemon.memories.writes import (
    episode_promote,
    memory_write,
    memory_write_cancel,
    memory_write_confirm,
    replay_episode_promote,
    replay_memory_write,
    replay_write_confirm,
)
from memoryd.daemon.tool import ANY_LIST, INT, STR, Tool, scope


def _flag(default: bool | None = None) -> dict[str, Any]:
    # A false default goes unsaid: it is what an absent boolean means, and every char costs context.
    return {"type": "boolean", "default": True} if default else {"type": "boolean"}


def _choice(values: tuple[str, ...], default: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"type": "string", "enum": list(values)}
    if default is not None:
        rule["default"] = default
    return rule


def _int(default: int, lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "default": default, "minimum": lo, "maximum": hi}


# Id and scope patterns are checked in the handlers (args.check_*), not spelled out here.
_STR: dict[str, Any] = {"type": "string"}
_SCOPES: dict[str, Any] = {"type": "array", "items": _STR}
_LINKS: dict[str, Any] = {"type": "array", "items": {"type": "object"},
                          "description": "[{type: supersedes|contradicts|extends|depends_on, target_id}]"}
_LIMIT = _int(50, 1, 500)
_ID_ONLY: dict[str, Any] = {"id": _STR}
_STATUS = {"status": STR}
_PENDING: dict[str, Any] = {"pending_id": _STR}

_WRITE_PARAMS: dict[str, Any] = {
    "content": _STR, "scopes": _SCOPES, "category": _choice(CATEGORIES, "fact"),
    "confidence": _choice(CONFIDENCES, "medium"), "source": _choice(SOURCES, "explicit-statement"),
    "force": _flag(), "acknowledge_credential": _flag(), "acknowledge_transient": _flag(),
    "acknowledge_scope_mismatch": _flag(), "acknowledge_ungrounded": _flag(), "groundedness_check": _flag(),
    "source_transcript": _STR, "links": _LINKS, "pinned": _flag(),
}

TOOLS = [
    Tool(name="memory_scope_disable",
         description="Hide a scope and all below it from this session's reads (searches, lists, digest, "
                     "handoff). Not persisted.",
         params={"scope": scope("")}, required=("scope",), returns={"disabled_scopes": ANY_LIST},
         handler=memory_scope_disable, idempotent=True),
    Tool(name="memory_scope_enable", description="Undo memory_scope_disable for a scope in this session.",
         params={"scope": scope("")}, required=("scope",), returns={"disabled_scopes": ANY_LIST},
         handler=memory_scope_enable, idempotent=True),
    Tool(name=names.MEMORY_WRITE, core=True, replay=replay_memory_write,
         description=(
             "Store a durable fact, preference or decision (run state: episode_write). A gate may answer "
             "instead, with evidence and a hint naming its override flag: credential_warning, "
             "transient_warning, scope_mismatch, ungrounded (with groundedness_check), duplicate, "
             "previously_removed. user-inference is always pending until the user says yes. "
             "Injection-like text is stored flagged tainted. pinned: a rule listed first at every session start."),
         params=_WRITE_PARAMS, required=("content", "scopes"), returns=_STATUS, handler=memory_write),
    Tool(name=names.MEMORY_WRITE_CONFIRM, core=True, replay=replay_write_confirm,
         description=(
             "Commit your pending write after the user's yes. Gates re-run; if one fires, its status "
             "returns and the write stays pending. A promoted episode is deleted on commit."),
         params=_PENDING, required=("pending_id",), returns=_STATUS, handler=memory_write_confirm),
    Tool(name=names.MEMORY_WRITE_CANCEL, core=True,
         description="Drop your pending write (the user said no); a promoted episode is kept.",
         params=_PENDING, required=("pending_id",), returns=_STATUS, handler=memory_write_cancel, destructive=True),
    Tool(name=names.MEMORY_SEARCH, core=True,
         description=(
             "Ranked search of durable memories (not episodes) for tasks referring to shared or past "
             "context. auto_scope: your repo plus repo-less memories; since_prior_session: only changes "
             "since the prior session here began. staleness_verdict not fresh: check before relying."),
         params={"query": _STR, "scopes": _SCOPES, "category": _choice((*CATEGORIES, "handoff")),
                 "max_results": _int(5, 1, 50), "auto_scope": _flag(True), "since_prior_session": _flag()},
         required=("query",), returns={"results": ANY_LIST, "total": INT}, handler=memory_search, read_only=True),
    Tool(name=names.MEMORY_SHOW, core=True,
         description="One memory by id, live or removed: every field, links both ways, staleness.",
         params=_ID_ONLY, required=("id",), returns={"id": STR}, handler=memory_show, read_only=True),
    Tool(name=names.MEMORY_LIST,
         description=(
             "Browse memories, newest first, as compact rows; pass next_cursor back as cursor. "
             "To find by topic use memory_search. pinned=true: only pinned rules."),
         params={"scopes": _SCOPES, "category": _choice((*CATEGORIES, "handoff")), "limit": _LIMIT,
                 "cursor": _STR, "with_bodies": _flag(), "pinned": _flag()},
         required=(), returns={"memories": ANY_LIST, "total": INT}, handler=memory_list, read_only=True),
    Tool(name=names.MEMORY_UPDATE, replay=replay_edit,
         description=(
             "Edit a memory in place instead of writing a near-duplicate; scopes and links replace. New "
             "content re-runs the credential and transient gates and resets verification. "
             "expected_updated: compare-and-set (status stale on a mismatch, nothing changed). pinned: pin or unpin."),
         params={"id": _STR, "content": _STR, "scopes": _SCOPES, "confidence": _choice(CONFIDENCES),
                 "category": _choice(CATEGORIES), "links": _LINKS, "pinned": _flag(), "expected_updated": _STR,
                 "acknowledge_transient": _flag(), "acknowledge_credential": _flag()},
         required=("id",), returns=_STATUS, handler=memory_update),
    Tool(name=names.MEMORY_REMOVE, replay=replay_edit,
         description="Move a wrong or obsolete memory to a tombstone with a reason (memory_restore undoes).",
         params={"id": _STR, "reason": _STR}, required=("id", "reason"), returns=_STATUS,
         handler=memory_remove, destructive=True, idempotent=True),
    Tool(name=names.MEMORY_RESTORE, replay=replay_edit,
         description="Bring a removed memory back, unless a live one now says the same (status duplicate).",
         params=_ID_ONLY, required=("id",), returns=_STATUS, handler=memory_restore),
    Tool(name=names.MEMORY_LIST_TOMBSTONES, description="Removed memories with reasons, latest first; paged by cursor.",
         params={"limit": _LIMIT, "cursor": _STR}, required=(),
         returns={"tombstones": ANY_LIST, "total": INT}, handler=memory_list_tombstones, read_only=True),
    Tool(name=names.MEMORY_VERIFY, replay=replay_edit,
         description="Record that a memory still holds (optionally the paths or commits checked); "
                     "its staleness clock restarts.",
         params={"id": _STR, "note": _STR, "verified_paths": _SCOPES, "verified_commits": _SCOPES},
         required=("id",), returns=_STATUS, handler=memory_verify),
    Tool(name="memory_scope_overview",
         description="Counts of what is stored for you: by scope, by category, tombstones, pending "
                     "writes, episodes here.",
         params={"auto_scope": _flag(True)}, required=(), returns={"total": INT},
         handler=memory_scope_overview, read_only=True),
    Tool(name=names.MEMORY_HEALTH,
         description="Curation rollup: stale, tainted, never-retrieved memories; log chain; reaper; "
                     "bad, hand-edited, unaccounted, missing files.",
         params={}, required=(), returns={"memories": INT}, handler=memory_health, read_only=True),
    Tool(name=names.EPISODE_PROMOTE, core=True, replay=replay_episode_promote,
         description=(
             "Promote an episode whose takeaway became a lasting fact to a durable memory, through "
             "memory_write's gates. committed deletes the episode; pending holds it (memory_write_confirm "
             "deletes, memory_write_cancel keeps it); other statuses leave it to fix and retry. "
             "use_body=true stores the body (required without a takeaway). Returns memory_write's result "
             "plus promoted_from_episode_id."),
         params={"episode_id": _STR, "scopes": _SCOPES, "category": _choice(CATEGORIES, "fact"),
                 "confidence": _choice(CONFIDENCES, "medium"), "source": _choice(SOURCES, "explicit-statement"),
                 "use_body": _flag()},
         required=("episode_id", "scopes"), returns=_STATUS, handler=episode_promote),
]
