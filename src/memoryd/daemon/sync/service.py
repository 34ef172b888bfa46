"""The loop's side of sync: start a job (`run_due`), admit what it brought back in passes with group
commit, and keep the sync's state (`SyncState`), rebuilt from its events at replay as live."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.daemon.core import Core
from memoryd.daemon.memories.records import HANDOFF, Memory
from memoryd.daemon.memories.tier import MemoryTier
from memoryd.daemon.storage import frontmatter, nofollow
from memoryd.daemon.sync.job import Incoming, Job, Result
from memoryd.daemon.sync.layout import CONFLICTS, FOLDER_OF, LIVE, TOMB, Layout, count_quarantined, escaped

if TYPE_CHECKING:
    from memoryd.daemon.sync.worker import Worker
from memoryd.errors import ResourceState, StorageError

log = logging.getLogger("memoryd.daemon")
POLL_S = 0.05  # how often the loop looks for a finished job while one runs
ADMIT_BATCH = 200  # pulled records admitted per pass: a long pull never holds the loop
MAX_RETRY_S = 3600.0  # failed scheduled syncs back off up to this, so the log does not fill
MAX_ROWS = 20
EVENT_IDS = 100  # ids a `sync` event lists (with the total): a log line stays small
WORKERS: dict[Path, Worker] = {}  # one per store, outliving `Core.reload` (which rebuilds the state)


def worker_for(core: Core) -> Worker:
    """This store's worker, made (and its code imported) at first use."""
    worker = WORKERS.get(core.root)
    if worker is None:
        from memoryd.daemon.sync.worker import Worker

        worker = WORKERS[core.root] = Worker(core.root)
    return worker


def attach(core: Core) -> SyncState:
    state = SyncState(core)
    core.extensions.append(state)
    return state


def state_of(core: Core) -> SyncState:
    for extension in core.extensions:
        if isinstance(extension, SyncState):
            return extension
    raise ResourceState("sync_unavailable", "sync", "sync is not attached to this daemon")


class SyncState:
    """What the log says about sync, plus what the clone says now (conflicts, quarantine, last job)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.layout = Layout(core.root)
        self.agreed: dict[str, tuple[str, str]] = {}   # id → (state, sha) both sides last had
        self.synced_from: dict[str, str] = {}          # id → device that sent its current version
        self.resolved: dict[str, set[str]] = {}        # id → kept losers someone settled
        self.conflicts: dict[str, list[str]] = {}      # id → kept losers in the clone
        self.quarantined_total = 0
        self.last: dict[str, Any] | None = None
        self.requested: Job | None = None
        self.next_auto = math.inf
        self.failures = 0  # scheduled syncs that failed in a row

    def apply(self, event: dict[str, Any]) -> None:
        if (handler := _APPLIERS.get(event["kind"])) is not None:
            handler(self, event)

    def _agree(self, event: dict[str, Any]) -> None:
        if event.get("memory_id") and event.get("sha") and event.get("state") in (LIVE, TOMB):
            self.agreed[event["memory_id"]] = (event["state"], event["sha"])

    def _on_pull(self, event: dict[str, Any]) -> None:
        self._agree(event)
        memory_id, sha = event.get("memory_id"), event.get("sha")
        if memory_id and sha:
            self._account(memory_id, sha, event["state"])
        if memory_id and event.get("device"):
            self.synced_from[memory_id] = event["device"]

    def _on_init(self, event: dict[str, Any]) -> None:
        """A new clone (maybe of another remote): nothing is agreed with it yet."""
        self.agreed.clear()
        self.resolved.clear()

    def _on_local_change(self, event: dict[str, Any]) -> None:
        """A version written here (update, remove, …) is no longer the one a device sent."""
        if event.get("sha") and event.get("memory_id"):
            self.synced_from.pop(event["memory_id"], None)

    def _on_resolve(self, event: dict[str, Any]) -> None:
        if not (memory_id := event.get("memory_id")):
            return
        self.resolved.setdefault(memory_id, set()).update(event.get("shas") or [])
        if event.get("sha") and event.get("state") in (LIVE, TOMB):
            self._account(memory_id, event["sha"], event["state"])

    def _account(self, memory_id: str, sha: str, state: str) -> None:
        """The file is accounted for, like a write's; its origin may name another machine: never probed."""
        tier: MemoryTier | None = self.core.memories
        if tier is not None:
            tier.logged_sha[memory_id] = sha
            tier.logged_state[memory_id] = state
            tier.probe.pulled.add(memory_id)

    def log_state(self) -> dict[str, Any]:
        tier: MemoryTier | None = self.core.memories
        return {"agreed": {i: list(v) for i, v in self.agreed.items()}, "synced_from": dict(self.synced_from),
                "resolved": {i: sorted(v) for i, v in self.resolved.items()},
                "pulled": sorted(tier.probe.pulled) if tier is not None else []}

    def restore_log_state(self, data: dict[str, Any]) -> Callable[[], None]:
        agreed = {str(i): (str(v[0]), str(v[1])) for i, v in data["agreed"].items()}
        synced_from = {str(i): str(v) for i, v in data["synced_from"].items()}
        resolved = {str(i): {str(s) for s in v} for i, v in data["resolved"].items()}
        pulled = {str(i) for i in data["pulled"]}  # a checkpoint without it: the whole log replays

        def finish() -> None:
            self.agreed, self.synced_from, self.resolved = agreed, synced_from, resolved
            if self.core.memories is not None:
                self.core.memories.probe.pulled = pulled
        return finish

    def load(self) -> None:
        self.conflicts = conflicts_in_clone(self.layout.repo)
        self.quarantined_total = count_quarantined(self.layout)
        try:
            last = json.loads(nofollow.read_nofollow(self.layout.last))
            self.last = escaped_values(last) if isinstance(last, dict) else None
        except (OSError, ValueError, frontmatter.BadRecord):
            self.last = None
        if self.last is not None and isinstance(self.last.get("job"), int):
            # A CLI waiting for "job n" after a restart must not take an older job's result for its own.
            worker = worker_for(self.core)
            worker.jobs = max(worker.jobs, self.last["job"])
        interval = self.core.config.sync_interval_seconds
        self.next_auto = self.core.clock() + interval if interval > 0 else math.inf
        self.publish_conflicts()

    def publish_conflicts(self) -> None:
        """Write the open conflicts' ids for `memoryd doctor` (a failed write costs only its accuracy)."""
        if not self.layout.is_set_up():
            return
        open_ids = sorted(self.open_conflicts())
        try:
            self.layout.write_json(self.layout.open_conflicts, {"ids": open_ids[:MAX_ROWS], "total": len(open_ids)})
        except OSError as exc:
            log.warning("sync: could not keep the open conflicts for doctor: %s", exc)

    def reconcile(self) -> dict[str, Any]:
        return {"sync_conflicts": len(self.open_conflicts())} if self.layout.is_set_up() else {}

    def open_conflicts(self) -> dict[str, list[str]]:
        """Kept losers nobody has settled yet, by record id."""
        left = {i: sorted(s for s in shas if s not in self.resolved.get(i, ())) for i, shas in self.conflicts.items()}
        return {memory_id: shas for memory_id, shas in left.items() if shas}

    def conflict_rows(self) -> dict[str, Any]:
        tier: MemoryTier = self.core.memories
        rows = []
        for memory_id, shas in sorted(self.open_conflicts().items()):
            current = tier.live.get(memory_id) or tier.tombstones.get(memory_id)
            rows.append({"id": memory_id, "kept_versions": shas,
                         "current": None if current is None else ("removed" if current.removed_at else "live"),
                         "first_line": current.first_line if current is not None else None})
        return {"items": rows[:MAX_ROWS], "total": len(rows), "resolve": "memoryd sync resolve ID --keep current|other"}

    def provenance_of(self, memory_id: str) -> dict[str, Any]:
        """memory_show's `synced_from`, from the log's `sync_pull` event (never the file)."""
        device = self.synced_from.get(memory_id)
        return {"synced_from": device} if device else {}

    def health(self) -> dict[str, Any]:
        if not self.layout.is_set_up():
            return {}
        config = self.layout.read_config()
        return {"sync": {"remote": config.get("remote"), "device": config.get("device_id"), "last": self.last,
                         "conflicts": self.conflict_rows(), "quarantined": self.quarantined_total}}

    def digest(self) -> dict[str, Any]:
        return {"sync_conflicts": self.conflict_rows()} if self.open_conflicts() else {}

    def new_job(self, kind: str, remote: str | None = None) -> Job:
        worker = worker_for(self.core)
        worker.jobs += 1
        return Job(worker.jobs, kind, remote=remote, max_content_bytes=self.core.config.max_content_bytes)

    def snapshot(self, job: Job) -> Job:
        """Fill `job` with the live store now: what travels, what changed since agreed, what stays."""
        tier: MemoryTier = self.core.memories
        for memory_id in [*tier.live, *tier.tombstones]:
            if (version := current_version(tier, memory_id)) is None:  # a handoff, or no file
                job.local_only.add(memory_id)
                continue
            job.local[memory_id] = version
            if (agreed := self.agreed.get(memory_id)) != version:
                job.export[memory_id] = (*version, tier.path("m" if version[0] == LIVE else "t", memory_id))
                if agreed is not None:
                    job.agreed[memory_id] = agreed
        job.resolved = {i: set(s) for i, s in self.resolved.items() if i in self.conflicts}
        job.folders = {LIVE: tier.live_dir, TOMB: tier.tomb_dir}
        return job

def run_due(core: Core, now: float) -> None:
    """Admit a finished job's result (ADMIT_BATCH records a pass), or start a due job."""
    state, worker = state_of(core), WORKERS.get(core.root)
    if worker is not None and worker.admitting is None and worker.running is not None:
        if (result := worker.take()) is None:
            return
        worker.admitting = result
        _safely(state, result, begin)
    if worker is not None and worker.admitting is not None:
        _safely(state, worker.admitting, admit_batch)
        return
    interval = core.config.sync_interval_seconds
    job = state.requested
    if job is None and now >= state.next_auto:  # only ever due with an interval set
        state.next_auto = now + interval
        if state.layout.is_set_up():
            job = state.new_job("sync")
    if job is None:
        return
    state.requested = None
    if job.kind == "sync":
        state.snapshot(job)
    state.next_auto = now + interval if interval > 0 else math.inf
    worker_for(core).start(job)


def _safely(state: SyncState, result: Result, step: Callable[[SyncState, Result], None]) -> None:
    """Run one step of taking `result` in; a bug is undone and reported, a storage error goes up."""
    try:
        step(state, result)
    except (StorageError, OSError):
        raise
    except Exception as exc:
        log.exception("sync: could not admit job %d; undone", result.number)
        core = state.core
        core.abort()  # rebuilds the state with a fresh SyncState: report through that one
        worker_for(core).admitting = None
        state_of(core).last = {**result.summary(), "status": "error", "finished_at": core.now(),
                               "error": {"kind": "internal_error", "message": f"not admitted: {exc!r}"[:300]}}


def next_due_in(core: Core, now: float) -> float:
    """Seconds until `run_due` has something to do (the loop's poll timeout)."""
    state, worker = state_of(core), WORKERS.get(core.root)
    if worker is not None and worker.admitting is not None:
        return 0.0
    if worker is not None and worker.running is not None:
        return POLL_S
    # Without an interval next_auto is inf: nothing read on the loop's hot path.
    return 0.0 if state.requested is not None else state.next_auto - now


def begin(state: SyncState, result: Result) -> None:
    """What this job pushed is what the clone and the store now agree on (events, no files)."""
    for memory_id, record_state, sha in result.pushed:
        state.core.record("sync_push", None, memory_id=memory_id, state=record_state, sha=sha)


def admit_batch(state: SyncState, result: Result) -> None:
    """Admit the next ADMIT_BATCH pulled records, then finish the job after the last."""
    from memoryd.daemon.sync.admission import buries

    core, tier = state.core, state.core.memories
    batch = result.incoming[result.position:result.position + ADMIT_BATCH]
    for item in batch:
        if current_version(tier, item.memory_id) != item.expected:
            result.deferred += 1  # changed here while the job ran: the next sync decides
            continue
        live_sha = item.expected[1] if item.expected is not None else None  # the file now, as just checked
        if not buries(item.state, item.memory, tier.live.get(item.memory_id), live_sha,
                      result.conflicts.get(item.memory_id, ())):
            refuse(state, result, item, "a tombstone whose text is not this machine's version of it")
            continue
        put_record(tier, item.memory, item.data, item.state)
        core.record("sync_pull", None, memory_id=item.memory_id, state=item.state, sha=item.sha, device=item.device)
        result.admitted.append(item.memory_id)
    result.position += len(batch)
    if result.position >= len(result.incoming):
        worker_for(core).admitting = None
        finish(state, result)


def finish(state: SyncState, result: Result) -> None:
    """The job's end: conflicts and quarantine as the clone has them, its event, its summary."""
    core, pulled = state.core, len(result.admitted)
    if result.status == "ok" and result.kind == "sync":
        state.conflicts = result.conflicts
        state.quarantined_total = result.quarantined_total = _after_release(state, result)
        state.publish_conflicts()
    summary = {**result.summary(), "pulled": pulled, "deferred": result.deferred, "finished_at": core.now()}
    if result.status == "ok" and result.kind == "init" and result.device:  # a fresh clone was made
        core.record("sync_init", None, device=result.device, head=result.head)
    core.record("sync", None, job=result.number, job_kind=result.kind, status=result.status,
                error=(result.error or {}).get("kind"), pushed=len(result.pushed), pulled=pulled,
                deferred=result.deferred, conflicts=[d["id"] for d in result.decided[:EVENT_IDS]] or None,
                conflicts_total=len(result.decided) or None,
                quarantined=[q["blob"] for q in result.quarantined[:EVENT_IDS]] or None,
                quarantined_total=len(result.quarantined) or None, head=result.head)
    state.last = summary
    try:
        state.layout.write_json(state.layout.last, summary)
    except OSError as exc:  # only the status survives a restart through it
        log.warning("sync: could not keep the last result: %s", exc)
    if result.status != "ok":
        log.warning("sync job %d failed: %s", result.number, (result.error or {}).get("message"))
    state.failures = 0 if result.status == "ok" else state.failures + 1
    interval = core.config.sync_interval_seconds
    if interval > 0 and state.failures:
        state.next_auto = core.clock() + min(MAX_RETRY_S, interval * 2 ** min(state.failures, 12))


def _after_release(state: SyncState, result: Result) -> int:
    """The quarantine's count once the rows of records this job admitted have left it."""
    quarantine = worker_for(state.core).quarantine
    try:
        if result.admitted and quarantine.release(set(result.admitted)):
            return count_quarantined(state.layout)
    except OSError as exc:  # the rows stay, counted, and go at the next admission
        log.warning("sync: could not drop admitted records from the quarantine: %s", exc)
    return result.quarantined_total


def refuse(state: SyncState, result: Result, item: Incoming, reason: str) -> None:
    """Quarantine a pulled version the loop refused, as the worker does."""
    import hashlib

    blob = hashlib.sha1(b"blob %d\0" % len(item.data) + item.data).hexdigest()  # git's blob id
    before = len(result.quarantined)
    worker_for(state.core).quarantine.keep(f"{FOLDER_OF[item.state]}/{item.memory_id}.md", blob, item.data,
                                           reason, result.quarantined)
    result.quarantined_total += len(result.quarantined) - before


def current_version(tier: MemoryTier, memory_id: str) -> tuple[str, str] | None:
    for records, state in ((tier.live, LIVE), (tier.tombstones, TOMB)):
        if (memory := records.get(memory_id)) is not None:
            sha = tier.sha_on_disk(memory_id)
            return None if memory.category == HANDOFF or sha is None else (state, sha)
    return None


def put_record(tier: MemoryTier, memory: Memory, data: bytes, state: str) -> str:
    """Make `memory` (bytes `data`) the record's version in `state`, moving it as `bury` does; its sha256."""
    kind, other = ("m", "t") if state == LIVE else ("t", "m")
    sha = tier._write(tier.path(kind, memory.id), data, memory.id)
    index, records = tier.tables(other)
    if (moved := records.get(memory.id)) is not None:
        tier.core.files.delete_file(tier.path(other, memory.id))
        index.remove(moved)
        del records[memory.id]
    index, records = tier.tables(kind)
    if (old := records.get(memory.id)) is not None:
        index.remove(old)
    records[memory.id] = memory
    index.add(memory)
    return sha


def escaped_values(value: Any) -> Any:
    """`value` (JSON) with every string valid UTF-8 (an old last.json may hold one that is not)."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, list):
        return [escaped_values(v) for v in value]
    return {escaped(k): escaped_values(v) for k, v in value.items()} if isinstance(value, dict) else value


def conflicts_in_clone(repo: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    top = repo / CONFLICTS
    if not nofollow.is_plain_dir(top):
        return found
    from memoryd.daemon.sync import admission

    for folder in sorted(top.iterdir()):
        if not nofollow.is_plain_dir(folder):
            continue
        for entry in sorted(folder.iterdir()):
            named = admission.conflict_path(f"{CONFLICTS}/{folder.name}/{entry.name}")
            if named is not None and entry.is_file() and not entry.is_symlink():
                found.setdefault(named[0], []).append(named[1])
    return found


_APPLIERS = {"sync_push": SyncState._agree, "sync_pull": SyncState._on_pull, "sync_resolve": SyncState._on_resolve,
             "sync_init": SyncState._on_init,
             **dict.fromkeys(("update", "verify", "restore", "remove"), SyncState._on_local_change)}
