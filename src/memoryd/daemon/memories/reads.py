"""Handlers that read durable memories: search, show, list, list_tombstones. Stored text comes with `framing:
"data"` and taint flags; events name ids only (a query as a hash and a length). Import contract: clock, core,
episodes.tools, search, scopes, session_table, validate and the tier's args, records, staleness, tier and writes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from typing import Any

from memoryd.daemon.calls.validate import require_text
from memoryd.daemon.core import Call, Core
from memoryd.daemon.episodes.tools import resolve_prior
from memoryd.daemon.identity.scopes import is_hidden, matches_any
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.memories.args import check_scope_list, named_memory
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.memories.staleness import assess
from memoryd.daemon.memories.tier import MemoryTier
from memoryd.daemon.memories.writes import tier_of
from memoryd.daemon.search.fusion import FUSE_DEPTH, fuse, fused_order
from memoryd.daemon.search.text import word_tokens
from memoryd.daemon.storage.clock import parse_stamp
from memoryd.errors import InvalidParams, ResourceState

MAX_QUERY_BYTES = 4096
MAX_CURSOR_CHARS = 512
HIT_CONTENT_CHARS = 1000
SNIPPET_LEAD_CHARS = 200
MAX_PAGE_BODY_BYTES = 2_000_000  # keeps a with_bodies page well inside the 4 MiB frame

def taint_fields(memory: Memory) -> dict[str, Any]:
    return {"tainted": True, "taint": list(memory.taint)} if memory.tainted else {}


def staleness_fields(core: Core, memory: Memory) -> dict[str, Any]:
    tier = tier_of(core)
    found = assess(memory, core.clock(), tier.probe, core.config.verification_stale_days, parse_stamp)
    fields: dict[str, Any] = {"staleness_verdict": found.verdict, "age_days": found.age_days}
    if found.path_drift is not None:
        fields["path_drift"] = found.path_drift
    if found.commits_since:
        fields["commits_since_verified"] = found.commits_since
    return fields


def memory_filter(session: Session, scopes: list[str] | None, category: str | None,
                  repos: tuple[str | None, ...] | None = None, since: str | None = None) -> Callable[[Memory], bool]:
    """The reads' common predicate; disabled scopes are always hidden."""
    disabled = session.disabled_scopes

    def accept(m: Memory) -> bool:
        return ((repos is None or m.repo in repos)
                and (category is None or m.category == category)
                and (since is None or m.updated >= since)
                and (not scopes or matches_any(m.scopes, scopes))
                and not is_hidden(m.scopes, disabled))
    return accept


def session_repos(session: Session, identity: Mapping[str, Any]) -> tuple[str | None, ...]:
    """What auto_scope keeps a session's reads to: its repo (any worktree of it) and None (no repo)."""
    repo = session.repo or identity.get("repo")
    return (repo, None) if repo else (None,)


def shown_by_default_search(session: Session, identity: Mapping[str, Any]) -> Callable[[Memory], bool]:
    """Whether a `memory_search` with its defaults (auto_scope, no filter) may show a memory to this
    session (live news keeps to it)."""
    return memory_filter(session, None, None, session_repos(session, identity))


def hit_content(content: str, terms: list[str]) -> tuple[str, bool]:
    """The content, or a ~1000-char window starting a little before the first query term."""
    if len(content) <= HIT_CONTENT_CHARS:
        return content, False
    lower = content.lower()
    places = [p for p in (lower.find(t) for t in terms) if p >= 0]
    start = max(0, min(places, default=0) - SNIPPET_LEAD_CHARS)
    end = start + HIT_CONTENT_CHARS
    return ("…" if start else "") + content[start:end] + ("…" if end < len(content) else ""), True


def hit_view(core: Core, memory: Memory, score: float, relevance: float, terms: list[str],
             similarity: float | None = None) -> dict[str, Any]:
    content, cut = hit_content(memory.content, terms)
    view: dict[str, Any] = {"id": memory.id, "short_id": tier_of(core).short_ids.short(memory.id), "content": content,
                            "scopes": list(memory.scopes), "category": memory.category,
                            "confidence": memory.confidence, "created": memory.created, "updated": memory.updated,
                            "score": score, "relevance": relevance}
    if similarity is not None:
        view["similarity"] = similarity
    if cut:
        view["truncated"] = True
    return {**view, **staleness_fields(core, memory), **taint_fields(memory)}


def ranked(tier: MemoryTier, query: str, limit: int, accept: Callable[[str], bool]
           ) -> list[tuple[str, float, float, float | None]]:
    """`(id, score, relevance, similarity)` best first: BM25 fused with the encoder's cosine (docs/search.md,
    "Fusion"), or BM25 alone (similarity None) while there is no encoder."""
    lexical = tier.index.text.ranked_hits(query, max(limit, FUSE_DEPTH), accept)
    vector = tier.semantic.embed_query(query) if tier.core.config.search_by_meaning else None
    if vector is None:
        return [(d, score, relevance, None) for d, score, relevance in lexical[:limit]]
    meaning = dict(tier.semantic.nearest(vector, max(limit, FUSE_DEPTH), accept))
    fused = fuse(query, [d for d, _, _ in lexical], list(meaning))
    order = fused_order(fused, limit)
    relevance = {d: r for d, _, r in lexical}
    unranked = [d for d in order if d not in relevance]
    relevance.update(tier.index.text.relevance(query, unranked) if unranked else {})
    similarity = {**meaning, **tier.semantic.similarity(vector, [d for d in order if d not in meaning])}
    return [(d, round(fused[d] * 1000, 4), relevance[d], similarity.get(d)) for d in order]


def memory_search(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier = call.core, tier_of(call.core)
    query = require_text("query", args["query"], MAX_QUERY_BYTES)
    scopes = check_scope_list("scopes", args["scopes"])
    repos = session_repos(call.session, call.identity) if args["auto_scope"] else None
    since = None
    if args["since_prior_session"]:  # when the prior session in this worktree began
        prior, _, _ = resolve_prior(core, call.session)
        since = prior.started_at if prior is not None else None
    keep = memory_filter(call.session, scopes, args["category"], repos, since)
    live = tier.live

    def accept(doc_id: str) -> bool:
        return keep(live[doc_id])

    hits = ranked(tier, query, args["max_results"], accept)
    total = len(hits)
    if total >= args["max_results"]:  # capped: count what the query matches under the filters
        ids = tier.index.text.matching(query)
        if repos is not None:
            ids = set().union(*(ids & tier.index.by_repo[r] for r in repos if r in tier.index.by_repo))
        # The predicate runs only when a filter other than the repos is on.
        filtered = scopes or args["category"] or since or call.session.disabled_scopes
        total = sum(1 for d in ids if accept(d)) if filtered else len(ids)
    terms = word_tokens(query)
    results = [hit_view(core, live[doc_id], score, relevance, terms, similarity)
               for doc_id, score, relevance, similarity in hits]
    # A hook's search is a candidate list, not a read: what it injects has its own receipt.
    hook = call.conn.transient
    core.record("search", call.session, query_hash=hashlib.sha256(query.encode()).hexdigest()[:16],
                query_len=len(query), hits=len(results), total=total,
                ids=None if hook else [r["id"] for r in results], via="hook" if hook else None)
    return {"results": results, "total": total, "framing": "data"}


def record_view(memory: Memory) -> dict[str, Any]:
    """Every field of the record (the file's frontmatter and its content)."""
    view = {"id": memory.id, "content": memory.content, "scopes": list(memory.scopes),
            "category": memory.category, "confidence": memory.confidence, "source": memory.source,
            "created": memory.created, "updated": memory.updated, "session_id": memory.session_id,
            "origin": dict(memory.origin), "last_verified_at": memory.last_verified_at,
            "verified_paths": list(memory.verified_paths), "verified_commits": list(memory.verified_commits),
            "verification_note": memory.verification_note, "tainted": memory.tainted,
            "taint": list(memory.taint), "pinned": memory.pinned}
    if memory.anchor_session_id:
        view["anchor_session_id"] = memory.anchor_session_id
    return view


def links_view(tier: MemoryTier, memory: Memory) -> dict[str, list[dict[str, str]]]:
    def state(target: str) -> str:
        return "live" if target in tier.live else "removed" if target in tier.tombstones else "missing"
    outgoing = [{**link, "target_state": state(link["target_id"])} for link in memory.links]
    incoming = [{"type": kind, "source_id": source}
                for source, kind in sorted(tier.index.backlinks.get(memory.id, {}).items())]
    return {"outgoing": outgoing, "incoming": incoming}


def memory_show(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier = call.core, tier_of(call.core)
    memory_id = named_memory(tier.short_ids, "id", args["id"])
    memory = tier.live.get(memory_id) or tier.tombstones.get(memory_id)
    if memory is None:
        raise ResourceState("unknown_memory", args["id"])
    view = {"status": "live" if memory.id in tier.live else "removed", **record_view(memory),
            "short_id": tier.short_ids.short(memory.id)}
    if memory.removed_at is not None:
        view.update(removed_at=memory.removed_at, removed_reason=memory.removed_reason)
    else:
        view.update(staleness_fields(core, memory))
    view["links"] = links_view(tier, memory)
    view.update(extension_sections(core, "provenance_of", memory.id))  # e.g. sync: `synced_from`
    core.record("show", call.session, memory_id=memory.id, pointed=True if memory.id in call.session.pointed else None)
    return {**view, "framing": "data"}


def extension_sections(core: Core, name: str, *args: Any) -> dict[str, Any]:
    """Sections the core's extensions add to a reply through an optional method `name`."""
    sections: dict[str, Any] = {}
    for extension in core.extensions:
        method = getattr(extension, name, None)
        if callable(method):
            sections.update(method(*args))
    return sections


def encode_cursor(kind: str, key: list[str]) -> str:
    raw = json.dumps([kind, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> list[str] | None:
    """The key a cursor resumes after; -32602 for a cursor this list did not hand out."""
    if cursor is None:
        return None
    raw = None
    if len(cursor) <= MAX_CURSOR_CHARS:
        with suppress(ValueError):  # binascii.Error is one
            raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    if not (isinstance(raw, list) and raw and raw[0] == kind and all(isinstance(x, str) for x in raw[1:])):
        raise InvalidParams("cursor", "is not a cursor this list returned")
    return raw[1:]


def page(name: str, kind: str, keys: Iterable[Any], limit: int, row: Callable[[Any], dict[str, Any] | None],
         total: int) -> dict[str, Any]:
    """`{name: rows, "total": total}`: up to `limit` rows from `keys` (None rows skipped), ending early
    past MAX_PAGE_BODY_BYTES of text; when more remain, `next_cursor` resumes after the last row's key."""
    rows: list[dict[str, Any]] = []
    last: Any = None
    size = 0
    for key in keys:
        if len(rows) >= limit or size > MAX_PAGE_BODY_BYTES:
            return {name: rows, "total": total, "framing": "data",
                    "next_cursor": encode_cursor(kind, list(last) if isinstance(last, tuple) else [last])}
        made = row(key)
        if made is not None:
            rows.append(made)
            size += len(made.get("content", ""))
            last = key
    return {name: rows, "total": total, "framing": "data"}


def memory_list(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    tier = tier_of(call.core)
    after = decode_cursor("m", args["cursor"])
    scopes = check_scope_list("scopes", args["scopes"])
    keep = memory_filter(call.session, scopes, args["category"])

    def row(memory_id: str) -> dict[str, Any] | None:
        m = tier.live[memory_id]
        if not keep(m):
            return None
        view = {"id": m.id, "short_id": tier.short_ids.short(m.id), "first_line": m.first_line,
                "scopes": list(m.scopes), "category": m.category, "updated": m.updated, **taint_fields(m)}
        if m.pinned:
            view["pinned"] = True
        if args["with_bodies"]:
            view["content"] = m.content
        return view

    start = after[0] if after else None
    if args["pinned"]:
        ids: Iterable[str] = sorted((i for i in tier.index.pinned if start is None or i < start), reverse=True)
        total = sum(1 for i in tier.index.pinned if keep(tier.live[i]))
    else:
        ids = tier.index.ids_descending(start)
        filtered = scopes or args["category"] or call.session.disabled_scopes
        total = sum(1 for m in tier.live.values() if keep(m)) if filtered else len(tier.live)
    return page("memories", "m", ids, args["limit"], row, total)


def memory_list_tombstones(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    tier = tier_of(call.core)
    after = decode_cursor("t", args["cursor"])
    if after is not None and len(after) != 2:
        raise InvalidParams("cursor", "is not a cursor this list returned")

    def row(key: tuple[str, str]) -> dict[str, Any]:
        t = tier.tombstones[key[1]]
        return {"id": t.id, "short_id": tier.short_ids.short(t.id), "removed_at": t.removed_at,
                "reason": t.removed_reason, "first_line": t.first_line, **taint_fields(t)}

    keys = tier.tomb_index.keys_descending((after[0], after[1]) if after else None)
    return page("tombstones", "t", keys, args["limit"], row, len(tier.tombstones))
