"""What one sync job is: the loop's snapshot handed to the worker (`Job`) and what comes back
(`Result`, with the pulled records as `Incoming`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.daemon.memories.records import Memory

SUMMARY_ROWS = 100  # rows of each list a job's summary keeps (the totals are always there)


@dataclass
class Job:
    number: int
    kind: str                                   # "sync" or "init"
    remote: str | None = None                   # init only
    local: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (state, sha) of syncable records
    local_only: set[str] = field(default_factory=set)  # ids that never travel (handoffs, …)
    export: dict[str, tuple[str, str, Path]] = field(default_factory=dict)  # changed here since agreed
    agreed: dict[str, tuple[str, str]] = field(default_factory=dict)  # for the exported ids
    resolved: dict[str, set[str]] = field(default_factory=dict)  # conflict losers to drop
    folders: dict[str, Path] = field(default_factory=dict)  # state → the live store's folder of it
    max_content_bytes: int = 1_000_000


@dataclass
class Incoming:
    memory_id: str
    state: str
    sha: str
    data: bytes
    memory: Memory
    device: str | None
    expected: tuple[str, str] | None  # the live store's version when the job started


@dataclass
class Result:
    number: int
    kind: str
    status: str = "ok"                          # "ok" or "error"
    error: dict[str, str] | None = None         # {kind, message}
    pushed: list[tuple[str, str, str]] = field(default_factory=list)   # (id, state, sha)
    incoming: list[Incoming] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)    # new this job: {blob, path, reason}
    quarantined_total: int = 0
    decided: list[dict[str, str]] = field(default_factory=list)        # conflicts decided by this job
    restored: list[str] = field(default_factory=list)  # ids the remote lost without a tombstone, put back
    conflicts: dict[str, list[str]] = field(default_factory=dict)      # every kept loser in the tree
    kept_local: int = 0                         # records that hold a credential: never exported
    deferred: int = 0                           # changed while the job ran: next sync
    attempts: int = 0
    repaired: str | None = None
    rewritten: bool = False                     # the remote's history no longer holds what it held
    head: str | None = None
    remote: str | None = None
    device: str | None = None
    admitted: list[str] = field(default_factory=list)  # ids of the pulled records admitted so far
    position: int = 0                           # how far the loop's admission has got

    def summary(self) -> dict[str, Any]:
        """What the CLI prints and the status keeps (ids and counts, no content; lists capped)."""
        return {"job": self.number, "kind": self.kind, "status": self.status, "error": self.error,
                "pushed": len(self.pushed), "pulled": len(self.incoming),
                "conflicts_decided": self.decided[:SUMMARY_ROWS], "conflicts_decided_total": len(self.decided),
                "conflicts": sum(len(v) for v in self.conflicts.values()),
                "restored_to_remote": self.restored[:SUMMARY_ROWS], "restored_to_remote_total": len(self.restored),
                "quarantined": [{k: q[k] for k in ("path", "reason", "blob")} for q in self.quarantined[:SUMMARY_ROWS]],
                "quarantined_new": len(self.quarantined), "quarantined_total": self.quarantined_total,
                "kept_local": self.kept_local, "deferred": self.deferred, "attempts": self.attempts,
                "repaired": self.repaired, "rewritten": self.rewritten, "head": self.head, "remote": self.remote}
