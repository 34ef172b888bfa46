"""Start-up of the memory tier (docs/storage.md): load the record files, then reconcile them with
the event log — hand-edited, unaccounted and missing files, half-finished moves, the pending
snapshot. Runs after the log replay, so the tier's log-derived maps are complete.

Import contract: store, memory_records. Bad files are listed, never fatal: a planted file with
YAML aliases or a broken frontmatter is skipped and reported by memory_health.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from memoryd.daemon import store, text
from memoryd.daemon.memories import cache as memory_cache
from memoryd.daemon.memories.records import (
    Memory,
    decode_pending,
    from_meta,
    sha256_hex,
)
from memoryd.daemon.memories.state import TierState
from memoryd.daemon.search import SearchIndex

_BAD_RECORD = (OSError, store.BadRecord, KeyError, TypeError, ValueError, UnicodeDecodeError)


def load(tier: TierState) -> int:
    """Read every memory and tombstone file and the pending snapshot into `tier`; returns how
    many files had to be parsed (the rest came from the cache)."""
    cache = memory_cache.CacheReader(tier.cache_path)
    parsed = [0]
    try:
        _load_dirs(tier, cache, parsed)
    finally:
        cache.close()
    tier.index_restored = load_text_indexes(tier)
    if not tier.index_restored:
        parsed[0] += 1  # so the caller saves a fresh snapshot
    load_pending(tier)
    finish_episode_deletions(tier)
    return parsed[0]


def _load_dirs(tier: TierState, cache: memory_cache.CacheReader, parsed: list[int]) -> None:
    # Live files first, then tombstones: the cache's key order (m/… < t/…), for its merge join.
    for memory, sha, stat in read_dir(tier, tier.live_dir, "m", cache, parsed):
        check_against_log(tier, memory, sha)
        tier.live[memory.id] = memory
        note_file(tier, memory.id, sha, stat)
        tier.index.add(memory, text=False)
    for memory, sha, stat in read_dir(tier, tier.tomb_dir, "t", cache, parsed):
        if memory.id in tier.live:
            settle_double(tier, memory, sha, stat)
            continue
        check_against_log(tier, memory, sha)
        tier.tombstones[memory.id] = memory
        note_file(tier, memory.id, sha, stat)
        tier.tomb_index.add(memory, text=False)


def index_header(tier: TierState) -> dict[str, Any]:
    """What a search index snapshot must have been made from: this analyzer and exactly these
    record files (each id with the sha256 of its file)."""
    digest = hashlib.sha256()
    for kind, records in (("m", tier.live), ("t", tier.tombstones)):
        for memory_id in sorted(records):
            digest.update(f"{kind}{memory_id}{tier.sha_on_disk(memory_id)}\n".encode())
    return {"analyzer": text.ANALYZER_VERSION, "files": digest.hexdigest()}


def load_text_indexes(tier: TierState) -> bool:
    """Restore both text indexes from the snapshot if it describes the files just loaded, else
    rebuild them from the records. True when the snapshot was used."""
    stored = memory_cache.read_index(tier.index_path, index_header(tier))
    if stored is not None:
        try:
            tier.index.text = SearchIndex.from_state(stored[0])
            tier.tomb_index.text = SearchIndex.from_state(stored[1])
            if len(tier.index.text) == len(tier.live) and len(tier.tomb_index.text) == len(tier.tombstones):
                return True
        except (KeyError, IndexError, TypeError, ValueError):
            pass
    tier.index.text, tier.tomb_index.text = SearchIndex(), SearchIndex()
    for memory in tier.live.values():
        tier.index.add_text(memory)
    for memory in tier.tombstones.values():
        tier.tomb_index.add_text(memory)
    return False


def read_dir(tier: TierState, directory: Path, kind: str, cache: memory_cache.CacheReader,
             parsed: list[int]) -> Iterator[tuple[Memory, str, tuple[int, int]]]:
    """(memory, sha256 of its file, (size, mtime_ns)) for each good `<ulid>.md` in `directory`
    (`kind` m or t); the rest go to bad_files."""
    if not store.is_plain_dir(directory):
        return
    with os.scandir(directory) as listing:
        entries = sorted((e for e in listing if not e.name.startswith(store.TMP_PREFIX)), key=lambda e: e.name)
    for entry in entries:
        path = directory / entry.name
        try:
            if not entry.is_file(follow_symlinks=False):  # a link is never read (nor its target served)
                raise store.LinkRefused(path)
            # stat before the read: an edit in between makes the cache miss, not lie
            stat = entry.stat(follow_symlinks=False)
            memory, sha = _read_record(entry, kind, cache, parsed, stat)
        except _BAD_RECORD as exc:
            tier.bad_files.append({"path": str(path), "reason": str(exc)[:200]})
            continue
        yield memory, sha, (stat.st_size, stat.st_mtime_ns)


def _read_record(entry: os.DirEntry[str], kind: str, cache: memory_cache.CacheReader,
                 parsed: list[int], stat: os.stat_result) -> tuple[Memory, str]:
    name = entry.name
    if not name.endswith(".md"):
        raise ValueError("not a <ulid>.md record file")
    hit = cache.lookup(f"{kind}/{name}", stat)
    if hit is not None:
        meta, body, sha = hit
    else:
        data = store.read_nofollow(Path(entry.path))
        (meta, body), sha = store.parse(data), sha256_hex(data)
        parsed[0] += 1
    memory = from_meta(meta, body, name[:-3])
    if kind == "t" and memory.removed_at is None:
        raise ValueError("a tombstone without removed_at")
    if kind == "m" and memory.removed_at is not None:  # a hand-moved tombstone is live here
        memory = replace(memory, removed_at=None, removed_reason=None)
    return memory, sha


def note_file(tier: TierState, memory_id: str, sha: str, stat: tuple[int, int]) -> None:
    """Remember what the record's file is on disk; its sha only when the log's differs (memory)."""
    tier.file_stat[memory_id] = stat
    if tier.logged_sha.get(memory_id) != sha:
        tier.file_sha[memory_id] = sha
    else:
        tier.file_sha.pop(memory_id, None)


def check_against_log(tier: TierState, memory: Memory, sha: str) -> None:
    """A file no event names is unaccounted (when the log covers its creation); a file whose
    bytes differ from the last logged hash was edited by hand."""
    logged = tier.logged_sha.get(memory.id)
    if logged is None:
        first = tier.core.log.first_ts
        if first is not None and memory.created >= first:
            tier.unaccounted.append(memory.id)
    elif logged != sha:
        tier.hand_edited.append(memory.id)


def save_cache(tier: TierState) -> None:
    """Write the parse cache for every record file on disk now (staged; durable at the sync)."""
    def entries() -> Iterator[list[Any]]:
        for kind, records in (("m", tier.live), ("t", tier.tombstones)):
            for memory_id in sorted(records):
                sha, stat = tier.sha_on_disk(memory_id), tier.file_stat.get(memory_id)
                if sha is not None and stat is not None:
                    yield memory_cache.entry_for(f"{kind}/{memory_id}.md", stat, records[memory_id], sha)
    tier.core.files.write_file(tier.cache_path, memory_cache.encode(entries()))
    snapshot = memory_cache.encode_index(index_header(tier), tier.index.text.export_state(),
                                         tier.tomb_index.text.export_state())
    tier.core.files.write_file(tier.index_path, snapshot)


def settle_double(tier: TierState, tomb: Memory, sha: str, stat: tuple[int, int]) -> None:
    """Both a live file and a tombstone: a crash between the two halves of a move. The log says
    which side the move reached; the other file goes."""
    if tier.logged_state.get(tomb.id) == "tomb":
        note_file(tier, tomb.id, sha, stat)
        live = tier.live.pop(tomb.id)
        tier.index.remove(live)
        tier.core.files.delete_file(tier.live_path(tomb.id))
        tier.tombstones[tomb.id] = tomb
        tier.tomb_index.add(tomb)
    else:
        tier.core.files.delete_file(tier.tomb_path(tomb.id))


def load_pending(tier: TierState) -> None:
    """Pending writes from the snapshot that the log says were staged and not yet settled;
    those past their TTL are expired by the reaper's next pass (and logged there)."""
    try:
        rows = decode_pending(store.read_nofollow(tier.snapshot_path))
    except (OSError, store.BadRecord):
        return
    for pending in rows:
        tier.pending_seq = max(tier.pending_seq, _pending_n(pending.id))  # never reuse a pending id
        staged = pending.id in tier.pending_logged and pending.id not in tier.pending_resolved
        if staged and pending.id not in tier.expired:
            tier.pending[pending.id] = pending


def finish_episode_deletions(tier: TierState) -> None:
    """Episodes the log says were deleted (promoted or pruned) whose file outlived a crash."""
    journal = tier.core.journal
    for episode_id in tier.core.removed_episodes & journal.by_id.keys():
        episode = journal.remove(episode_id)
        if episode is not None:
            tier.core.files.delete_file(episode.path)


def reconcile(tier: TierState) -> dict[str, Any]:
    """Find logged records whose file is gone; the counts go into the `recovery` event."""
    present = {"live": tier.live, "tomb": tier.tombstones}
    tier.missing = sorted(i for i, state in tier.logged_state.items() if i not in present[state])
    return {"memories": len(tier.live), "tombstones": len(tier.tombstones),
            "memories_bad_files": len(tier.bad_files), "memories_hand_edited": len(tier.hand_edited),
            "memories_unaccounted": len(tier.unaccounted), "memories_missing": len(tier.missing),
            "pending_reloaded": len(tier.pending), "search_index_restored": int(tier.index_restored)}


def _pending_n(pending_id: Any) -> int:
    try:
        return int(str(pending_id).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
