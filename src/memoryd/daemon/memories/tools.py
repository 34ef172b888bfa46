"""The durable tier's catalogue entries: 15 memory_* tools, and episode_promote (it writes through this tier's
gates, which the episode tier below cannot import). Import contract: tool plus the tier's handler modules.
Descriptions and schemas cost every agent's context, so they stay terse; the handlers enforce what they cannot say.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required, TypedDict

from memoryd import names
from memoryd.daemon.calls.signature import Rule
from memoryd.daemon.memories import overview
from memoryd.daemon.memories.edits import memory_remove, memory_restore, memory_update, memory_verify, replay_edit
from memoryd.daemon.memories.reads import memory_list, memory_list_tombstones, memory_search, memory_show
from memoryd.daemon.memories.records import Category, Confidence, Source
from memoryd.daemon.memories.writes import (
    episode_promote,
    memory_write,
    memory_write_cancel,
    memory_write_confirm,
    replay_episode_promote,
    replay_memory_write,
    replay_write_confirm,
)
from memoryd.daemon.tool import ANY_LIST, INT, STR, NoArgs, On, Scope, Tool

# Ids and scopes are checked in the handlers (args.check_*), so these schemas do not spell them out.
Links = Annotated[list[dict[str, Any]], Rule("[{type: supersedes|contradicts|extends|depends_on, target_id}]")]
Limit = Annotated[int, Rule(default=50, minimum=1, maximum=500)]
AnyCategory = Category | Literal["handoff"]
# What a new memory is, with the defaults a write and a promotion share.
NewCategory = Annotated[Category, Rule(default="fact")]
NewConfidence = Annotated[Confidence, Rule(default="medium")]
NewSource = Annotated[Source, Rule(default="explicit-statement")]
_STATUS = {"status": STR}


class ScopeArgs(TypedDict):
    scope: Scope


class WriteArgs(TypedDict, total=False):
    content: Required[str]
    scopes: Required[list[str]]
    category: NewCategory
    confidence: NewConfidence
    source: NewSource
    force: bool
    acknowledge_credential: bool
    acknowledge_transient: bool
    acknowledge_scope_mismatch: bool
    acknowledge_ungrounded: bool
    groundedness_check: bool
    source_transcript: str
    links: Links
    pinned: bool


class PendingArgs(TypedDict):
    pending_id: str


class SearchArgs(TypedDict, total=False):
    query: Required[str]
    scopes: list[str]
    category: AnyCategory
    max_results: Annotated[int, Rule(default=5, minimum=1, maximum=50)]
    auto_scope: On
    since_prior_session: bool


class IdArgs(TypedDict):
    id: str


class ListArgs(TypedDict, total=False):
    scopes: list[str]
    category: AnyCategory
    limit: Limit
    cursor: str
    with_bodies: bool
    pinned: bool


class UpdateArgs(TypedDict, total=False):
    id: Required[str]
    content: str
    scopes: list[str]
    confidence: Confidence
    category: Category
    links: Links
    pinned: bool
    expected_updated: str
    acknowledge_transient: bool
    acknowledge_credential: bool


class RemoveArgs(TypedDict):
    id: str
    reason: str


class PageArgs(TypedDict, total=False):
    limit: Limit
    cursor: str


class VerifyArgs(TypedDict, total=False):
    id: Required[str]
    note: str
    verified_paths: list[str]
    verified_commits: list[str]


class OverviewArgs(TypedDict, total=False):
    auto_scope: On


class PromoteArgs(TypedDict, total=False):
    episode_id: Required[str]
    scopes: Required[list[str]]
    category: NewCategory
    confidence: NewConfidence
    source: NewSource
    use_body: bool


TOOLS = [
    Tool(name="memory_scope_disable",
         description="Hide a scope and all below it from this session's reads (searches, lists, digest, "
                     "handoff). Not persisted.",
         args=ScopeArgs, returns={"disabled_scopes": ANY_LIST}, handler=overview.memory_scope_disable, idempotent=True),
    Tool(name="memory_scope_enable", description="Undo memory_scope_disable for a scope in this session.",
         args=ScopeArgs, returns={"disabled_scopes": ANY_LIST}, handler=overview.memory_scope_enable, idempotent=True),
    Tool(name=names.MEMORY_WRITE, core=True, replay=replay_memory_write,
         description="Store a durable fact, preference or decision (run state: episode_write). A gate may answer "
                     "instead, with evidence and a hint naming its override flag: credential_warning, "
                     "transient_warning, scope_mismatch, ungrounded (with groundedness_check), duplicate, "
                     "previously_removed. user-inference is always pending until the user says yes. Injection-like "
                     "text is stored flagged tainted. pinned: a rule listed first at every session start.",
         args=WriteArgs, returns=_STATUS, handler=memory_write),
    Tool(name=names.MEMORY_WRITE_CONFIRM, core=True, replay=replay_write_confirm,
         description="Commit your pending write after the user's yes. Gates re-run; if one fires, its status returns "
                     "and the write stays pending. A promoted episode is deleted on commit.",
         args=PendingArgs, returns=_STATUS, handler=memory_write_confirm),
    Tool(name=names.MEMORY_WRITE_CANCEL, core=True,
         description="Drop your pending write (the user said no); a promoted episode is kept.",
         args=PendingArgs, returns=_STATUS, handler=memory_write_cancel, destructive=True),
    Tool(name=names.MEMORY_SEARCH, core=True,
         description="Ranked search of durable memories (not episodes) for tasks referring to shared or past context. "
                     "auto_scope: your repo plus repo-less memories; since_prior_session: only changes since the "
                     "prior session here began. staleness_verdict not fresh: check before relying.",
         args=SearchArgs, returns={"results": ANY_LIST, "total": INT}, handler=memory_search, read_only=True),
    Tool(name=names.MEMORY_SHOW, core=True,
         description="One memory by id, live or removed: every field, links both ways, staleness.",
         args=IdArgs, returns={"id": STR}, handler=memory_show, read_only=True),
    Tool(name=names.MEMORY_LIST,
         description="Browse memories, newest first, as compact rows; pass next_cursor back as cursor. To find by "
                     "topic use memory_search. pinned=true: only pinned rules.",
         args=ListArgs, returns={"memories": ANY_LIST, "total": INT}, handler=memory_list, read_only=True),
    Tool(name=names.MEMORY_UPDATE, replay=replay_edit,
         description="Edit a memory in place instead of writing a near-duplicate; scopes and links replace. New "
                     "content re-runs the credential and transient gates and resets verification. expected_updated: "
                     "compare-and-set (status stale on a mismatch, nothing changed). pinned: pin or unpin.",
         args=UpdateArgs, returns=_STATUS, handler=memory_update),
    Tool(name=names.MEMORY_REMOVE, replay=replay_edit,
         description="Move a wrong or obsolete memory to a tombstone with a reason (memory_restore undoes).",
         args=RemoveArgs, returns=_STATUS, handler=memory_remove, destructive=True, idempotent=True),
    Tool(name=names.MEMORY_RESTORE, replay=replay_edit,
         description="Bring a removed memory back, unless a live one now says the same (status duplicate).",
         args=IdArgs, returns=_STATUS, handler=memory_restore),
    Tool(name=names.MEMORY_LIST_TOMBSTONES, description="Removed memories with reasons, latest first; paged by cursor.",
         args=PageArgs, returns={"tombstones": ANY_LIST, "total": INT}, handler=memory_list_tombstones, read_only=True),
    Tool(name=names.MEMORY_VERIFY, replay=replay_edit,
         description="Record that a memory still holds (optionally the paths or commits checked); "
                     "its staleness clock restarts.",
         args=VerifyArgs, returns=_STATUS, handler=memory_verify),
    Tool(name="memory_scope_overview",
         description="Counts of what is stored for you: by scope, by category, tombstones, pending "
                     "writes, episodes here.",
         args=OverviewArgs, returns={"total": INT}, handler=overview.memory_scope_overview, read_only=True),
    Tool(name=names.MEMORY_HEALTH,
         description="Curation rollup: stale, tainted, never-retrieved memories; log chain; reaper; "
                     "bad, hand-edited, unaccounted, missing files.",
         args=NoArgs, returns={"memories": INT}, handler=overview.memory_health, read_only=True),
    Tool(name=names.EPISODE_PROMOTE, core=True, replay=replay_episode_promote,
         description="Promote an episode whose takeaway became a lasting fact to a durable memory, through "
                     "memory_write's gates. committed deletes the episode; pending holds it (memory_write_confirm "
                     "deletes, memory_write_cancel keeps it); other statuses leave it to fix and retry. use_body=true "
                     "stores the body (required without a takeaway). Returns memory_write's result plus "
                     "promoted_from_episode_id.",
         args=PromoteArgs, returns=_STATUS, handler=episode_promote),
]
