"""Handlers that create durable memories: write, confirm, cancel, promote; a retry after a restart
is answered from the event by `replay_*` (docs/tools.md). Import contract: core, clock, validate,
episodes.episode, and the tier's args, chain, projects, records and tier."""

from __future__ import annotations

from typing import Any

from memoryd import names
from memoryd.daemon.calls.validate import require_text
from memoryd.daemon.core import Call, Core
from memoryd.daemon.episodes.episode import Episode
from memoryd.daemon.memories.args import check_id, check_links, check_pending_id, check_write_scopes
from memoryd.daemon.memories.chain import FLAGS, Draft, related, run_gates
from memoryd.daemon.memories.projects import check_project_scopes
from memoryd.daemon.memories.records import PREVIEW_CHARS, Memory, PendingWrite, render_memory
from memoryd.daemon.memories.tier import MemoryTier
from memoryd.daemon.storage.clock import iso
from memoryd.errors import InvalidParams, ResourceState

USER_INFERENCE = "user-inference"
PENDING_HINT = ("A claim about the user needs the user's yes: ask them, then call memory_write_confirm "
                "(or memory_write_cancel) with pending_id before expires_at.")


def tier_of(core: Core) -> MemoryTier:
    return core.memories  # type: ignore[no-any-return]


def draft_from_args(core: Core, args: dict[str, Any]) -> Draft:
    cfg = core.config
    content = require_text("content", args["content"], cfg.max_content_bytes).strip()
    transcript = args.get("source_transcript")
    if transcript is not None:
        require_text("source_transcript", transcript, cfg.max_content_bytes)
    if args.get("groundedness_check") and transcript is None:
        raise InvalidParams("source_transcript", "is required when groundedness_check is true")
    return Draft(content=content, scopes=check_write_scopes(args["scopes"], cfg.max_scopes_per_write),
                 category=args["category"], confidence=args["confidence"], source=args["source"],
                 links=check_links(tier_of(core).live, args.get("links")),
                 flags={f: bool(args.get(f)) for f in FLAGS}, transcript=transcript,
                 duplicate_at=cfg.dedup_duplicate, related_at=cfg.dedup_related, pinned=bool(args.get("pinned")))


def committed_view(tier: MemoryTier, memory: Memory, draft: Draft | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "committed", "id": memory.id, "scopes": list(memory.scopes),
                              "category": memory.category, "confidence": memory.confidence,
                              "source": memory.source, "created": memory.created}
    if draft is not None and (near := related(tier, draft)):
        result.update(related=near, framing="data")
    if memory.tainted:
        result.update(tainted=True, taint=list(memory.taint))
    if memory.pinned:
        result["pinned"] = True
    return result


def needs_confirmation(core: Core, category: str) -> str | None:
    """Why gate 7 holds this write, or None: user-inference always, else the config's switch."""
    if category == USER_INFERENCE:
        return "user-inference: a claim about the user needs the user's confirmation"
    if core.config.require_write_confirmation:
        return "require_write_confirmation is set in the config"
    return None


def stage_pending(call: Call, draft: Draft, reason: str, episode_id: str | None) -> PendingWrite:
    tier = tier_of(call.core)
    probe = Memory(id="0" * 26, content=draft.content, scopes=tuple(draft.scopes), category=draft.category,
                   confidence=draft.confidence, source=draft.source, created="", updated="",
                   session_id=call.session.id, origin={}, links=tuple(draft.links))
    render_memory(probe)  # refuse an oversized frontmatter now, not at confirm time
    pending = PendingWrite(id=tier.next_pending_id(), session_id=call.session.id, created=call.core.now(),
                           preview=draft.content[:PREVIEW_CHARS], source_episode_id=episode_id, reason=reason,
                           expires_at=call.core.clock() + call.core.config.pending_ttl_seconds, draft=draft.to_dict(),
                           origin=tier.origin_of(call.identity, call.session))
    tier.stage(pending)
    return pending


def pending_view(pending: PendingWrite) -> dict[str, Any]:
    return {"status": "pending", "pending_id": pending.id, "pending_reason": pending.reason,
            "preview": pending.preview, "expires_at": iso(pending.expires_at), "hint": PENDING_HINT}


def submit(call: Call, draft: Draft, req: str | None, episode_id: str | None = None) -> dict[str, Any]:
    """Run gates 1–7 and commit, stage or refuse; records one `write` event either way."""
    core, tier = call.core, tier_of(call.core)
    overrides = draft.overrides() or None
    if (fired := run_gates(tier, draft)) is not None:
        gate, result = fired
        core.record("write", call.session, status=gate.status, gate=gate.kind, overrides=overrides, req=req)
        return result
    reason = needs_confirmation(core, draft.category)
    if reason is not None:
        pending = stage_pending(call, draft, reason, episode_id)
        core.record("write", call.session, status="pending", gate="pending", pending_id=pending.id,
                    overrides=overrides, req=req)
        return pending_view(pending)
    memory = tier.new_memory(draft, tier.origin_of(call.identity, call.session), call.session.id)
    sha = tier.commit(memory, draft.terms)
    core.record("write", call.session, status="committed", memory_id=memory.id, sha=sha,
                overrides=overrides, tainted=memory.tainted or None, req=req)
    return committed_view(tier, memory, draft)


def memory_write(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    draft = draft_from_args(call.core, args)
    checked = check_project_scopes(call, draft.scopes, draft.flags.get("acknowledge_scope_mismatch", False))
    if checked.refusal is not None:
        call.core.record("write", call.session, status="scope_mismatch", gate="unknown_project",
                         overrides=draft.overrides() or None, req=call.req)
        return checked.refusal
    draft.scopes = checked.scopes
    result = submit(call, draft, call.req)
    if checked.resolved:
        result["scopes_resolved"] = checked.resolved
    return result


def replay_memory_write(core: Core, event: dict[str, Any]) -> dict[str, Any] | None:
    """A retried memory_write whose first attempt committed or staged before a restart."""
    tier = tier_of(core)
    memory = tier.live.get(event.get("memory_id", ""))
    if event.get("status") == "committed" and memory is not None:
        return committed_view(tier, memory)
    pending = tier.pending.get(event.get("pending_id", ""))
    return pending_view(pending) if pending is not None else None


def delete_episode(core: Core, episode: Episode) -> None:
    """Drop a promoted episode (the unlink is applied after the memory's file is published)."""
    core.journal.remove(episode.id)
    path = core.journal.path_of(episode)
    core.files.delete_file(path)
    core.files.delete_dir_if_empty(path.parent)


def memory_write_confirm(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """Re-run gates 1–6 on the store as it is now; commit, or return the gate (pending stays)."""
    core, tier = call.core, tier_of(call.core)
    pending = tier.owned_pending(check_pending_id(args["pending_id"]), call.session)
    draft = Draft(**pending.draft)
    if (fired := run_gates(tier, draft)) is not None:
        gate, result = fired
        core.record("write_confirm", call.session, pending_id=pending.id, status=gate.status, gate=gate.kind)
        return {**result, "pending_id": pending.id}
    memory = tier.new_memory(draft, pending.origin, pending.session_id)
    sha = tier.commit(memory)
    tier.drop_pending(pending.id)
    episode = core.journal.by_id.get(pending.source_episode_id or "")
    if episode is not None:
        delete_episode(core, episode)
    core.record("write_confirm", call.session, pending_id=pending.id, status="committed", memory_id=memory.id,
                sha=sha, episode_id=episode.id if episode else None,
                owner=episode.session_id if episode else None, deleted=True if episode else None, req=call.req)
    return _confirm_view(tier, memory, pending.id, pending.source_episode_id, draft)


def _confirm_view(tier: MemoryTier, memory: Memory, pending_id: Any, episode_id: Any,
                  draft: Draft | None = None) -> dict[str, Any]:
    result = {**committed_view(tier, memory, draft), "pending_id": pending_id}
    if episode_id:
        result["promoted_from_episode_id"] = episode_id
    return result


def replay_write_confirm(core: Core, event: dict[str, Any]) -> dict[str, Any] | None:
    tier = tier_of(core)
    memory = tier.live.get(event.get("memory_id", ""))
    return None if memory is None else _confirm_view(tier, memory, event.get("pending_id"), event.get("episode_id"))


def memory_write_cancel(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    tier = tier_of(call.core)
    pending = tier.owned_pending(check_pending_id(args["pending_id"]), call.session)
    tier.drop_pending(pending.id)
    call.core.record("write_cancel", call.session, pending_id=pending.id, episode_id=pending.source_episode_id)
    return {"status": "cancelled", "pending_id": pending.id}


def episode_promote(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """The whole gate chain on an episode's takeaway (or body); committed deletes the episode."""
    core, episode_id = call.core, check_id("episode_id", args["episode_id"])
    if (episode := core.journal.by_id.get(episode_id)) is None:
        raise ResourceState("unknown_episode", episode_id)
    if core.provenance(episode.id, episode.created) == "unaccounted":
        raise ResourceState("unaccounted_episode", episode_id,
                            f"episode {episode_id} is unaccounted (no log event names it); it is never promoted")
    if args["use_body"]:
        content = core.journal.read_body(episode)
    elif episode.takeaway:
        content = episode.takeaway
    else:
        raise InvalidParams("use_body", "the episode has no takeaway; pass use_body=true to promote its body")
    draft = draft_from_args(core, {**args, "content": content})  # its other arguments are no write's
    result = submit(call, draft, None, episode.id)
    deleted = result["status"] == "committed"
    if deleted:
        delete_episode(core, episode)
    core.record(names.EPISODE_PROMOTE, call.session, episode_id=episode.id, owner=episode.session_id,
                outcome=result["status"], memory_id=result.get("id"), pending_id=result.get("pending_id"),
                deleted=deleted or None, req=call.req)
    return {**result, "promoted_from_episode_id": episode.id}


def replay_episode_promote(core: Core, event: dict[str, Any]) -> dict[str, Any] | None:
    result = replay_memory_write(core, {**event, "status": event.get("outcome")})
    return {**result, "promoted_from_episode_id": event.get("episode_id")} if result is not None else None
