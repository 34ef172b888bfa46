"""The memory tier's check after start (docs/storage.md, "Files checked after start"): records a start took
from the parse cache unread are compared with their files, a slice at a time, and handled as `recovery`
would have at start. Import contract: store, nofollow, the tier's records, state and recovery."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.daemon.memories.records import Memory
from memoryd.daemon.memories.recovery import BAD_RECORD, admit, check_entry, note_file, read_record
from memoryd.daemon.memories.state import TierState
from memoryd.daemon.storage import nofollow, store


def verify_some(tier: TierState, budget: int | None) -> int:
    """Compare up to `budget` (None: all) cache-loaded records with their files, then list the folders
    a start left unlisted; returns how many remain unchecked."""
    todo = tier.unverified
    spent = len(todo) if budget is None else min(budget, len(todo))
    for _ in range(spent):
        memory_id = todo.pop()
        kind = "m" if memory_id in tier.live else "t"
        memory, expected = tier.tables(kind)[1].get(memory_id), tier.file_stat.get(memory_id)
        if expected is None or memory is None:
            continue
        path = tier.path(kind, memory_id)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if tier.unlisted or tier.listing is not None:  # an unlisted start: as if never listed
                _drop(tier, memory, kind)
            continue  # (else gone since start: the next start reports it missing)
        except OSError:
            continue
        if (st.st_size, st.st_mtime_ns) != expected:
            _recheck(tier, memory, path, kind, (st.st_size, st.st_mtime_ns))
    while tier.unlisted and (budget is None or spent < budget):
        spent += _list_some(tier, None if budget is None else budget - spent)
    return len(todo) + len(tier.unlisted)


def _drop(tier: TierState, memory: Memory, kind: str) -> None:
    """A cache-loaded record whose file was deleted while the daemon was stopped."""
    index, records = tier.tables(kind)
    index.remove(memory)
    del records[memory.id]
    tier.file_stat.pop(memory.id, None)
    if memory.id in tier.logged_state:
        tier.missing.append(memory.id)
    tier.dropped_late += 1
    tier.cache_stale = True


def _list_some(tier: TierState, budget: int | None) -> int:
    """List up to `budget` entries (None: all) of a folder the start left unlisted, parsing the
    files the cache did not hold; returns the entries looked at."""
    kind = tier.unlisted[-1]
    directory, records = (tier.live_dir, tier.live) if kind == "m" else (tier.tomb_dir, tier.tombstones)
    if tier.listing is None:
        try:
            tier.listing = os.scandir(directory) if nofollow.is_plain_dir(directory) else iter(())
        except OSError:
            tier.listing = iter(())
    seen = 0
    for seen, entry in enumerate(tier.listing, 1):
        if not (entry.name.startswith(store.TMP_PREFIX) or (entry.name.endswith(".md") and entry.name[:-3] in records)):
            _found_late(tier, directory, entry, kind)
        if budget is not None and seen >= budget:
            return seen
    if hasattr(tier.listing, "close"):
        tier.listing.close()
    tier.listing = None
    tier.unlisted.pop()
    return max(1, seen)


def _found_late(tier: TierState, directory: Path, entry: os.DirEntry[str], kind: str) -> None:
    """A file the cache did not list, handled as `recovery._load_dirs` would have."""
    try:
        check_entry(directory, entry)
        memory, sha, stat = read_record(entry.path, kind)
        if kind == "m" and memory.id in tier.tombstones:  # a copy of a removed record put back by hand
            raise ValueError("a live file for a removed memory; memory_restore brings it back")
    except BAD_RECORD as exc:
        tier.bad_files.append({"path": str(directory / entry.name), "reason": str(exc)[:200]})
        return
    tier.cache_stale = True
    tier.found_late.append(memory.id)
    admit(tier, kind, memory, sha, stat)


def _recheck(tier: TierState, old: Memory, path: Path, kind: str, stat: tuple[int, int]) -> None:
    index, records = tier.tables(kind)
    try:
        memory, sha, _ = read_record(path, kind)
    except BAD_RECORD as exc:
        index.remove(old)
        del records[old.id]
        tier.bad_files.append({"path": str(path), "reason": str(exc)[:200]})
        tier.cache_stale = True
        return
    if sha != tier.sha_on_disk(old.id):
        index.remove(old)
        admit(tier, kind, memory, sha, stat)
        tier.cache_stale = True
    else:
        note_file(tier, memory.id, sha, stat)
