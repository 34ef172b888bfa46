"""Handlers that edit existing memories: update, remove, restore, verify. Import contract: core,
validate, credentials, and the tier's args, chain, gates, projects, reads, records, tier and writes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memoryd.daemon.calls.validate import require_text
from memoryd.daemon.core import Call, Core
from memoryd.daemon.credentials.detector import find_credentials
from memoryd.daemon.memories.args import check_links, check_verified, check_write_scopes, named_memory
from memoryd.daemon.memories.chain import GATES, Draft, check_duplicate, run_gates
from memoryd.daemon.memories.gates import scan_taint
from memoryd.daemon.memories.projects import check_project_scopes
from memoryd.daemon.memories.reads import staleness_fields, taint_fields
from memoryd.daemon.memories.records import HANDOFF, Memory
from memoryd.daemon.memories.tier import MemoryTier
from memoryd.daemon.memories.writes import USER_INFERENCE, tier_of
from memoryd.errors import InvalidParams, ResourceState

MAX_NOTE_BYTES = 4096
MAX_REASON_BYTES = 4096
EDITABLE = ("content", "scopes", "confidence", "category", "links", "pinned")
RESTORE_DUPLICATE_HINT = ("A live memory now says nearly the same; memory_update that one instead, or "
                          "leave this one removed.")


def live_memory(tier: MemoryTier, memory_id: str) -> Memory:
    memory_id = named_memory(tier.short_ids, "id", memory_id)
    if (memory := tier.live.get(memory_id)) is not None:
        return memory
    if memory_id in tier.tombstones:
        raise ResourceState("unknown_memory", memory_id, f"memory {memory_id} is removed; memory_restore it first")
    raise ResourceState("unknown_memory", memory_id)


def memory_update(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier = call.core, tier_of(call.core)
    memory = live_memory(tier, args["id"])
    if all(args[name] is None for name in EDITABLE):
        raise InvalidParams("content", f"give at least one of {', '.join(EDITABLE)}")
    changes: dict[str, Any] = {}  # each validated before anything else; scopes and links replace
    if args["scopes"] is not None:
        scopes = check_write_scopes(args["scopes"], core.config.max_scopes_per_write)
        checked = check_project_scopes(call, scopes, acknowledged=True)  # renames only: the memory exists
        changes["scopes"] = tuple(checked.scopes)
    if args["links"] is not None:
        changes["links"] = check_links(tier.live, args["links"], self_id=memory.id)
    if args["category"] == USER_INFERENCE and memory.category != USER_INFERENCE:
        raise InvalidParams("category", "user-inference needs the user's yes: write it with memory_write")
    changes.update((name, args[name]) for name in ("confidence", "pinned", "category") if args[name] is not None)
    content = args["content"]
    if content is not None:
        content = require_text("content", content, core.config.max_content_bytes).strip()
    if args["expected_updated"] is not None and args["expected_updated"] != memory.updated:
        core.record("update", call.session, memory_id=memory.id, status="stale")
        return {"status": "stale", "id": memory.id, "current_updated": memory.updated}
    if content is not None:
        # Gates 1–2 on the new content (a handoff skips durability: it is state by nature).
        flags = {"acknowledge_credential": args["acknowledge_credential"],
                 "acknowledge_transient": args["acknowledge_transient"] or memory.category == HANDOFF}
        if (fired := run_gates(tier, Draft(content=content, scopes=list(memory.scopes), flags=flags), GATES[:2])):
            gate, refused = fired
            core.record("update", call.session, memory_id=memory.id, status=gate.status, gate=gate.kind)
            return {**refused, "id": memory.id}
        taint = scan_taint(content)
        changes.update(content=content, tainted=bool(taint), taint=tuple(taint), last_verified_at=None,
                       verified_paths=(), verified_commits=(), verification_note=None)
    new = replace(memory, **changes, updated=tier.next_updated(memory.updated))
    sha = tier.commit(new, replaces=memory)
    core.record("update", call.session, memory_id=memory.id, status="updated", sha=sha,
                fields=sorted(changes.keys() & set(EDITABLE)), req=call.req)
    return _updated_view(new)


def _updated_view(memory: Memory) -> dict[str, Any]:
    return {"status": "updated", "id": memory.id, "updated": memory.updated, **taint_fields(memory)}


def _verified_view(core: Core, memory: Memory) -> dict[str, Any]:
    return {"status": "verified", "id": memory.id, "last_verified_at": memory.last_verified_at,
            "staleness_verdict": staleness_fields(core, memory)["staleness_verdict"]}


def memory_remove(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """Move to a tombstone with the reason. Removing a tombstoned id again is a no-op (retries)."""
    tier = tier_of(call.core)
    reason = require_text("reason", args["reason"], MAX_REASON_BYTES).strip()
    memory_id = named_memory(tier.short_ids, "id", args["id"])
    if memory_id in tier.tombstones:
        return {"status": "removed", "id": memory_id}
    memory = live_memory(tier, memory_id)
    sha = tier.bury(memory, reason)
    call.core.record("remove", call.session, memory_id=memory.id, status="removed", sha=sha, req=call.req)
    return {"status": "removed", "id": memory.id}


def memory_restore(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    core, tier = call.core, tier_of(call.core)
    memory_id = named_memory(tier.short_ids, "id", args["id"])
    if memory_id in tier.live:
        raise ResourceState("not_removed", memory_id, f"memory {memory_id} is live, not removed")
    if (tomb := tier.tombstones.get(memory_id)) is None:
        raise ResourceState("unknown_memory", memory_id)
    draft = Draft(content=tomb.content, scopes=list(tomb.scopes), duplicate_at=core.config.dedup_duplicate,
                  related_at=core.config.dedup_duplicate)
    if (duplicate := check_duplicate(tier, draft)) is not None:
        core.record("restore", call.session, memory_id=memory_id, status="duplicate", gate="duplicate")
        return {"status": "duplicate", "id": memory_id, **duplicate, "hint": RESTORE_DUPLICATE_HINT}
    memory, sha = tier.unbury(tomb)
    core.record("restore", call.session, memory_id=memory_id, status="restored", sha=sha, req=call.req)
    return {"status": "restored", "id": memory.id}


def memory_verify(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """Record that the memory still holds: the staleness clock restarts from now."""
    core, tier = call.core, tier_of(call.core)
    memory = live_memory(tier, args["id"])
    paths, commits = check_verified(args["verified_paths"], args["verified_commits"])
    note = args["note"]
    if note is not None:
        note = require_text("note", note, MAX_NOTE_BYTES).strip()
        if find_credentials(note):
            raise InvalidParams("note", "holds a secret; leave it out of the note")
    new = replace(memory, last_verified_at=core.now(), verified_paths=paths, verified_commits=commits,
                  verification_note=note)
    sha = tier.commit(new, replaces=memory)
    core.record("verify", call.session, memory_id=memory.id, status="verified", sha=sha, req=call.req)
    return _verified_view(core, new)


def replay_edit(core: Core, event: dict[str, Any]) -> dict[str, Any] | None:
    """An edit resent after a restart lost its reply: its answer again, from the record as it is now,
    not a second run; None (run it) when the record has since moved on."""
    tier = tier_of(core)
    memory_id, status = event.get("memory_id") or "", event.get("status")
    memory = tier.live.get(memory_id)
    if (status == "removed" and memory_id in tier.tombstones) or (status == "restored" and memory is not None):
        return {"status": status, "id": memory_id}
    if memory is None or status not in ("updated", "verified"):
        return None
    return _updated_view(memory) if status == "updated" else _verified_view(core, memory)
