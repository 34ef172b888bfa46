"""Start-up of the memory tier (storage.md §4): load the record files, then reconcile them with
the event log — hand-edited, unaccounted and missing files, half-finished moves, the pending
snapshot. Runs after the log replay, so the tier's log-derived maps are complete.

Import contract: store, memory_records. Bad files are listed, never fatal: a planted file with
YAML aliases or a broken frontmatter is skipped and reported by memory_health.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.daemon import store
from memoryd.daemon.memory_records import Memory, decode_pending, from_meta, sha256_hex

if TYPE_CHECKING:
    from memoryd.daemon.memories import MemoryTier

_BAD_RECORD = (OSError, store.BadRecord, KeyError, TypeError, ValueError, UnicodeDecodeError)


def load(tier: MemoryTier) -> None:
    """Read every memory and tombstone file and the pending snapshot into `tier`."""
    for memory, data in read_dir(tier, tier.live_dir, tomb=False):
        check_against_log(tier, memory, data)
        tier.live[memory.id] = memory
        tier.index.add(memory)
    for memory, data in read_dir(tier, tier.tomb_dir, tomb=True):
        if memory.id in tier.live:
            settle_double(tier, memory)
            continue
        check_against_log(tier, memory, data)
        tier.tombstones[memory.id] = memory
        tier.tomb_index.add(memory)
    load_pending(tier)
    finish_episode_deletions(tier)


def read_dir(tier: MemoryTier, directory: Path, tomb: bool) -> Iterator[tuple[Memory, bytes]]:
    """(memory, file bytes) for each good `<ulid>.md` in `directory`; the rest go to bad_files."""
    if not directory.is_dir():
        return
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if not e.name.startswith(store.TMP_PREFIX))
    for name in names:
        path = directory / name
        try:
            if not name.endswith(".md"):
                raise ValueError("not a <ulid>.md record file")
            data = path.read_bytes()
            memory = from_meta(*store.parse(data), name[:-3])
            if tomb and memory.removed_at is None:
                raise ValueError("a tombstone without removed_at")
        except _BAD_RECORD as exc:
            tier.bad_files.append({"path": str(path), "reason": str(exc)[:200]})
            continue
        yield (memory if tomb else replace(memory, removed_at=None, removed_reason=None)), data


def check_against_log(tier: MemoryTier, memory: Memory, data: bytes) -> None:
    """A file no event names is unaccounted (when the log covers its creation); a file whose
    bytes differ from the last logged hash was edited by hand."""
    logged = tier.logged_sha.get(memory.id)
    if logged is None:
        first = tier.core.log.first_ts
        if first is not None and memory.created >= first:
            tier.unaccounted.append(memory.id)
    elif logged != sha256_hex(data):
        tier.hand_edited.append(memory.id)


def settle_double(tier: MemoryTier, tomb: Memory) -> None:
    """Both a live file and a tombstone: a crash between the two halves of a move. The log says
    which side the move reached; the other file goes."""
    if tier.logged_state.get(tomb.id) == "tomb":
        live = tier.live.pop(tomb.id)
        tier.index.remove(live)
        tier.core.files.delete_file(tier.live_path(tomb.id))
        tier.tombstones[tomb.id] = tomb
        tier.tomb_index.add(tomb)
    else:
        tier.core.files.delete_file(tier.tomb_path(tomb.id))


def load_pending(tier: MemoryTier) -> None:
    """Pending writes from the snapshot that the log says were staged and not yet settled;
    those past their TTL are expired by the reaper's next pass (and logged there)."""
    try:
        rows = decode_pending(tier.snapshot_path.read_bytes())
    except OSError:
        return
    for pending in rows:
        staged = pending.id in tier.pending_logged and pending.id not in tier.pending_resolved
        if staged and pending.id not in tier.expired:
            tier.pending[pending.id] = pending


def finish_episode_deletions(tier: MemoryTier) -> None:
    """Episodes the log says were deleted (promoted or pruned) whose file outlived a crash."""
    journal = tier.core.journal
    for episode_id in tier.core.removed_episodes & journal.by_id.keys():
        episode = journal.remove(episode_id)
        if episode is not None:
            tier.core.files.delete_file(episode.path)


def reconcile(tier: MemoryTier) -> dict[str, Any]:
    """Find logged records whose file is gone; the counts go into the `recovery` event."""
    present = {"live": tier.live, "tomb": tier.tombstones}
    tier.missing = sorted(i for i, state in tier.logged_state.items() if i not in present[state])
    return {"memories": len(tier.live), "tombstones": len(tier.tombstones),
            "memories_bad_files": len(tier.bad_files), "memories_hand_edited": len(tier.hand_edited),
            "memories_unaccounted": len(tier.unaccounted), "memories_missing": len(tier.missing),
            "pending_reloaded": len(tier.pending)}
