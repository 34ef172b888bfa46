"""The operator's sync verbs, the `admin` op's `sync_*` actions (`memoryd sync …`). None runs git:
init and sync request a job that `service.run_due` starts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.session_table import Conn
from memoryd.daemon.memories.records import render_memory
from memoryd.daemon.memories.tier import MemoryTier
from memoryd.daemon.storage import frontmatter, nofollow
from memoryd.daemon.sync import service
from memoryd.daemon.sync.layout import CONFLICTS, FOLDER_OF, LIVE, TOMB, branch_of
from memoryd.errors import InvalidParams, ResourceState

MAX_REMOTE_CHARS = 4096


def _running(core: Core) -> tuple[int, str, str] | None:
    """(job number, kind, phase) of the job that runs, is being admitted, or is about to start."""
    worker = service.WORKERS.get(core.root)
    if worker is not None and (result := worker.admitting) is not None:
        return result.number, result.kind, f"admitting {result.position} of {len(result.incoming)} pulled records"
    if worker is not None and worker.running is not None:
        return worker.running.number, worker.running.kind, worker.phase
    job = service.state_of(core).requested
    return None if job is None else (job.number, job.kind, "starting")


def action_init(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    remote = args.get("remote")
    if not isinstance(remote, str) or not remote.strip() or len(remote) > MAX_REMOTE_CHARS:
        raise InvalidParams("remote", "must be a git remote: a path, ssh or https URL")
    remote = remote.strip()
    if remote.startswith("-") or any(c in remote for c in "\n\r\0"):
        raise InvalidParams("remote", "must not start with '-' or hold control characters")
    if "://" not in remote and ":" not in remote.split("/", 1)[0]:
        remote = str(Path(remote).expanduser().absolute())  # a path: absolute, as git remotes want
    if _running(core) is not None:
        raise ResourceState("sync_running", "sync", "a sync is running; set up sync when it has finished")
    state = service.state_of(core)
    job = state.requested = state.new_job("init", remote=remote)
    return {"job": job.number, "started": True}


def action_sync(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    """Start a sync now, or join the one running: the answer names the job to wait for."""
    if (running := _running(core)) is not None:
        return {"job": running[0], "started": False, "joined": True}
    state = service.state_of(core)
    if not state.layout.is_set_up():
        raise ResourceState("sync_not_set_up", "sync", "sync is not set up: run `memoryd sync init REMOTE` first")
    job = state.requested = state.new_job("sync")
    return {"job": job.number, "started": True}


def action_status(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    state = service.state_of(core)
    config = state.layout.read_config()
    running = _running(core)
    return {"set_up": state.layout.is_set_up(), "remote": config.get("remote"),
            "branch": branch_of(config) if config else None, "device": config.get("device_id"),
            "device_name": config.get("device_name"),
            "running": None if running is None else {"job": running[0], "kind": running[1], "phase": running[2]},
            "last": state.last, "conflicts": state.conflict_rows(), "quarantined": state.quarantined_total,
            "interval_seconds": core.config.sync_interval_seconds, "clone": str(state.layout.repo)}


def action_resolve(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    """Settle a kept conflict: `other` makes the newest kept loser current, stamped now."""
    memory_id, keep = args.get("id"), args.get("keep", "current")
    if not isinstance(memory_id, str) or not idents.is_ulid(memory_id):
        raise InvalidParams("id", "must be a memory id")
    if keep not in ("current", "other"):
        raise InvalidParams("keep", "must be current or other")
    if _running(core) is not None:
        raise ResourceState("sync_running", memory_id, "a sync is running; resolve when it has finished")
    state = service.state_of(core)
    if not (shas := state.open_conflicts().get(memory_id)):
        raise ResourceState("no_conflict", memory_id, f"memory {memory_id} has no kept conflict")
    fields = _restore_loser(state, memory_id, shas) if keep == "other" else {}
    core.record("sync_resolve", core.sessions.get(conn.session_id) if conn else None,
                memory_id=memory_id, keep=keep, shas=shas, **fields)
    state.publish_conflicts()  # applied live by `record`: doctor stops warning now
    return {"id": memory_id, "kept": keep, "settled": shas, **fields}


def action_show(core: Core, conn: Conn | None, args: dict[str, Any]) -> dict[str, Any]:
    """Both sides of a kept conflict, each with state, stamp and text (settled ones marked)."""
    memory_id = args.get("id")
    if not isinstance(memory_id, str) or not idents.is_ulid(memory_id):
        raise InvalidParams("id", "must be a memory id")
    state = service.state_of(core)
    if not (shas := state.conflicts.get(memory_id)):
        raise ResourceState("no_conflict", memory_id, f"memory {memory_id} has no kept conflict")
    tier: MemoryTier = core.memories
    current = service.current_version(tier, memory_id)
    path = (tier.live_path if current and current[0] == LIVE else tier.tomb_path)(memory_id)
    settled = state.resolved.get(memory_id, set())
    kept = [{**_version_of(state.layout.repo / CONFLICTS / memory_id / f"{sha}.md", state.layout.repo),
             "sha": sha, "settled": sha in settled} for sha in shas]
    return {"id": memory_id, "current": {**_version_of(path, core.root), "sha": current[1]} if current else None,
            "kept": kept, "resolve": "memoryd sync resolve ID --keep current|other"}


def _version_of(path: Path, root: Path) -> dict[str, Any]:
    """One version's state, stamp and text, read with no link followed at any depth."""
    try:
        nofollow.check_no_links(root, path)
        meta, body = frontmatter.parse(nofollow.read_nofollow(path))
    except (OSError, frontmatter.BadRecord, UnicodeDecodeError) as exc:
        return {"state": None, "stamp": None, "text": None, "unreadable": str(exc)[:200]}
    removed = meta.get("removed_at")
    return {"state": TOMB if removed else LIVE, "stamp": str(removed or meta.get("updated") or ""), "text": body}


def _restore_loser(state: service.SyncState, memory_id: str, shas: list[str]) -> dict[str, Any]:
    from memoryd.daemon.sync import admission
    from memoryd.daemon.sync.merge import Version

    tier: MemoryTier = state.core.memories
    versions = []
    for sha in shas:
        path = state.layout.repo / CONFLICTS / memory_id / f"{sha}.md"
        try:
            nofollow.check_no_links(state.layout.repo, path)  # no link at any depth, as in _version_of
            data = nofollow.read_nofollow(path)
            meta, _body = frontmatter.parse(data)
        except (OSError, frontmatter.BadRecord, UnicodeDecodeError):
            continue
        versions.append(Version(TOMB if meta.get("removed_at") else LIVE, data))
    if not versions:
        raise ResourceState("no_conflict", memory_id, "the kept versions cannot be read from the clone")
    chosen = max(versions, key=lambda v: v.key())
    try:
        checked = admission.check(f"{FOLDER_OF[chosen.state]}/{memory_id}.md", "100644", chosen.data,
                                  state.core.config.max_content_bytes)
    except admission.Refused as exc:
        raise ResourceState("bad_conflict", memory_id, f"the kept version is not admissible: {exc.reason}") from None
    current = tier.live.get(memory_id) or tier.tombstones.get(memory_id)
    newer = tier.next_updated(max(checked.memory.updated, current.updated if current else ""))
    stamp: dict[str, Any] = {"updated": newer} if checked.state == LIVE else {"removed_at": state.core.now()}
    memory = replace(checked.memory, **stamp)
    sha = service.put_record(tier, memory, render_memory(memory), checked.state)
    return {"sha": sha, "state": checked.state}


ACTIONS = {"sync_init": action_init, "sync": action_sync, "sync_status": action_status,
           "sync_resolve": action_resolve, "sync_show": action_show}
