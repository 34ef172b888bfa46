"""Start-up of the memory tier after the log replay (docs/storage.md, "Recovery at start", step 4): load the
record files and reconcile them with the log; bad files are listed, never fatal. Import contract: store,
frontmatter, idents, nofollow, prefetch, text, search, core's PROGRESS_EVERY, the tier's parse_cache, records, state."""

from __future__ import annotations

import hashlib
import logging
import operator
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from memoryd.daemon.core import PROGRESS_EVERY
from memoryd.daemon.identity import idents
from memoryd.daemon.memories import parse_cache as memory_cache
from memoryd.daemon.memories.records import Memory, RowTables, decode_pending, from_meta, sha256_hex
from memoryd.daemon.memories.state import TierState
from memoryd.daemon.search import SearchIndex, text
from memoryd.daemon.storage import frontmatter, nofollow, store
from memoryd.daemon.storage import prefetch as forked  # the module; `prefetch` below is this tier's step

log = logging.getLogger("memoryd.daemon")

BAD_RECORD = (OSError, frontmatter.BadRecord, KeyError, TypeError, ValueError, UnicodeDecodeError)


Cached = tuple[Mapping[str, tuple[Any, ...]], RowTables, str | None]


def load(tier: TierState) -> None:
    """Read every record file and the pending snapshot into `tier` (after the log replay). With a parse
    cache the checkpoint vouches for, the folders are left for `after_start` to list."""
    helped = _helper_result(tier) if tier.helper is not None else None
    cached = memory_cache.read(helped[0] if helped else tier.cache_path)
    parsed = [0]
    if tier.trusted_gen is not None and cached[2] == tier.trusted_gen and _load_cached(tier, cached):
        tier.unlisted = ["t", "m"]
    else:
        _load_dirs(tier, cached, parsed)
    used = len(tier.unverified)
    if helped:
        tier.unverified = []  # parsed during this start: nothing to compare after it
    if parsed[0] == 0 and used == len(cached[0]) and cached[2] is not None:
        tier.cache_gen = cached[2]  # the cache lists exactly what was loaded
    else:  # rewritten (with a gen) at the next clean stop, at once when files were parsed
        tier.cache_stale = True
    tier.index_restored = load_text_indexes(tier, helped[1] if helped else None)
    if parsed[0] or not tier.index_restored:  # so the next start is fast even if this daemon never stops cleanly
        tier.save_after_start = lambda: save_cache(tier)
    elif helped:  # the helper's cache and snapshot are this start's: keep them
        tier.save_after_start = lambda: save_cache(tier, helped)
    load_pending(tier)
    tier.live.sort_by_updated()
    tier.loaded = True


def _load_cached(tier: TierState, cached: Cached) -> bool:
    """Every record from the cache alone, unlisted; False (nothing loaded) when a row does not
    decode, so the folders are listed after all. Kept lean: 100k records at a warm start."""
    rows, tables, _ = cached
    if not isinstance(rows, memory_cache.ColumnRows):  # only a cache with a gen gets here, and that is columns
        return False
    try:
        found = _from_columns(rows.columns, tables)
    except (TypeError, ValueError, IndexError):
        return False
    if found is None:
        return False
    memories, shas, stats = found
    ids = [memory.id for memory in memories]
    if len(set(ids)) != len(ids) or not idents.all_ulids(ids):
        return False  # an id twice (live and tombstone: the listing settles doubles), or not an id
    tier.unverified.extend(ids)
    tier.file_stat.update(zip(ids, stats))
    logged = tier.logged_sha
    if not all(map(operator.eq, map(logged.get, ids), shas)):  # rare: a file no event names, or edited by hand
        for memory, sha in zip(memories, shas):
            if logged.get(memory.id) != sha:
                check_against_log(tier, memory, sha)
                tier.file_sha[memory.id] = sha
    groups = rows.groups()
    live = [memory for memory in memories if memory.removed_at is None]
    if len(live) != len(memories):
        for memory in memories:
            if memory.removed_at is not None:
                tier.tombstones[memory.id] = memory
                tier.tomb_index.add(memory, text=False)
        groups = [g for g, m in zip(groups, memories) if m.removed_at is None]
    tier.live.load(live, groups)
    tier.index.load(live)
    return True


Found = tuple[list[Memory], Sequence[str], list[tuple[int, int]]]  # records, their files' shas and stats


def _from_columns(columns: tuple[tuple[Any, ...], ...], tables: RowTables) -> Found | None:
    """The records, their files' shas and stats; None unless every key is `m/<id>.md` (live) or `t/<id>.md`."""
    keys, sizes, mtimes, shas = columns[:4]
    memories = tables.from_columns(columns[4:])
    if not (idents.all_of_type(sizes, int) and idents.all_of_type(mtimes, int) and idents.all_of_type(shas, str)
            and all(key == f"{'m' if m.removed_at is None else 't'}/{m.id}.md" for key, m in zip(keys, memories))):
        return None
    return memories, shas, list(zip(sizes, mtimes))


def _load_dirs(tier: TierState, cached: Cached, parsed: list[int]) -> None:
    live = []
    for memory, sha, stat in read_dir(tier, tier.live_dir, "m", cached, parsed):
        check_against_log(tier, memory, sha)
        note_file(tier, memory.id, sha, stat)
        live.append(memory)
    tier.live.load(live)
    tier.index.load(live)
    for memory, sha, stat in read_dir(tier, tier.tomb_dir, "t", cached, parsed):
        admit(tier, "t", memory, sha, stat, text=False)


def admit(tier: TierState, kind: str, memory: Memory, sha: str, stat: tuple[int, int], text: bool = True) -> None:
    """Take in a record read from its file. A tombstone of a live record (a crash mid-move): the log says
    which one stays, and the other file goes."""
    if kind == "t" and memory.id in tier.live:
        if tier.logged_state.get(memory.id) != "tomb":
            tier.core.files.delete_file(tier.tomb_path(memory.id))
            return
        tier.index.remove(tier.live.pop(memory.id))
        tier.core.files.delete_file(tier.live_path(memory.id))
    else:
        check_against_log(tier, memory, sha)
    note_file(tier, memory.id, sha, stat)
    index, records = tier.tables(kind)
    records[memory.id] = memory
    index.add(memory, text=text)


def index_header(tier: TierState) -> dict[str, Any]:
    """What a search index snapshot must have been made from: this analyzer and these files."""
    digest = hashlib.sha256()
    for kind, records in (("m", tier.live), ("t", tier.tombstones)):
        for memory_id in sorted(records):
            digest.update(f"{kind}{memory_id}{tier.sha_on_disk(memory_id)}\n".encode())
    return {"analyzer": text.ANALYZER_VERSION, "files": digest.hexdigest()}


def load_text_indexes(tier: TierState, snapshot: bytes | None = None) -> bool:
    """Restore both text indexes from the snapshot if it describes the files just loaded, else rebuild
    them (the live one deferred); True when the snapshot was used."""
    stored = None
    if tier.unlisted and tier.cache_gen is not None:
        stored = memory_cache.read_index(tier.index_path, {"analyzer": text.ANALYZER_VERSION, "gen": tier.cache_gen})
    if stored is None:
        stored = memory_cache.read_index(snapshot or tier.index_path, index_header(tier))
        tier.cache_stale = tier.cache_stale or bool(tier.unlisted)  # re-saved with its gen at stop
    if stored is not None:
        with suppress(KeyError, IndexError, TypeError, ValueError):
            tier.index.text = SearchIndex.from_state(stored[0])
            tier.tomb_index.text = SearchIndex.from_state(stored[1])
            if len(tier.index.text) == len(tier.live) and len(tier.tomb_index.text) == len(tier.tombstones):
                return True
    total = len(tier.live)
    tier.index.defer_text(list(tier.live.values()),
                          lambda done: tier.core.progress("building the search index", done, total))
    tier.tomb_index.build_text(tier.tombstones.values())
    return False


def read_dir(tier: TierState, directory: Path, kind: str, cached: Cached,
             parsed: list[int]) -> Iterator[tuple[Memory, str, tuple[int, int]]]:
    """(memory, sha256, (size, mtime_ns)) for each good `<ulid>.md` in `directory` (`kind` m or t), in
    id order, from the cache when it lists the file; the rest go to bad_files."""
    if not nofollow.is_plain_dir(directory):
        return
    with os.scandir(directory) as listing:
        entries = sorted((e for e in listing if not e.name.startswith(store.TMP_PREFIX)), key=lambda e: e.name)
    progress, phase = tier.core.progress, f"loading {'memories' if kind == 'm' else 'tombstones'}"
    for number, entry in enumerate(entries):
        if not number % PROGRESS_EVERY:
            progress(phase, number, len(entries))
        try:
            check_entry(directory, entry)
            found = _from_cache(cached[0].get(f"{kind}/{entry.name}"), cached[1], entry.name[:-3], kind)
            if found is not None:
                tier.unverified.append(found[0].id)
            else:
                found = read_record(entry.path, kind)
                parsed[0] += 1
        except BAD_RECORD as exc:
            tier.bad_files.append({"path": str(directory / entry.name), "reason": str(exc)[:200]})
            continue
        yield found


def _from_cache(row: tuple[Any, ...] | None, tables: RowTables, file_id: str,
                kind: str) -> tuple[Memory, str, tuple[int, int]] | None:
    if row is None:
        return None
    try:
        memory, (size, mtime_ns, sha) = tables.from_row(row[4:]), row[1:4]
    except (TypeError, ValueError, IndexError):
        return None
    if (memory.id != file_id or (kind == "t") != (memory.removed_at is not None)
            or type(size) is not int or type(mtime_ns) is not int or type(sha) is not str):
        return None
    return memory, sha, (size, mtime_ns)


def check_entry(directory: Path, entry: os.DirEntry[str]) -> None:
    """Raise (one of BAD_RECORD) unless `entry` is a regular `*.md` file: a link is never read."""
    if not entry.is_file(follow_symlinks=False):
        raise nofollow.LinkRefused(directory / entry.name)
    if not entry.name.endswith(".md"):
        raise ValueError("not a <ulid>.md record file")


def read_record(path: Path | str, kind: str) -> tuple[Memory, str, tuple[int, int]]:
    """Parse one record file: (memory, sha256, (size, mtime_ns) from before the read); a bad one
    raises one of BAD_RECORD. A plain string `path` spares a cold start a `Path` per file."""
    data, st = nofollow.read_with_stat(path)
    (meta, body), sha = frontmatter.parse(data), sha256_hex(data)
    memory = from_meta(meta, body, os.path.basename(path)[:-3])
    if kind == "t" and memory.removed_at is None:
        raise ValueError("a tombstone without removed_at")
    if kind == "m" and memory.removed_at is not None:  # a hand-moved tombstone is live here
        memory = replace(memory, removed_at=None, removed_reason=None)
    return memory, sha, (st.st_size, st.st_mtime_ns)


def note_file(tier: TierState, memory_id: str, sha: str, stat: tuple[int, int]) -> None:
    """Remember the record's file stat, and its sha only where the log's differs."""
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


def save_cache(tier: TierState, caches: tuple[bytes, bytes] | None = None) -> None:
    """Stage the parse cache and index snapshot: `caches`, else those of every record file on disk now."""
    cache, snapshot = caches or encode_caches(tier)
    tier.core.files.write_file(tier.cache_path, cache)
    tier.core.files.write_file(tier.index_path, snapshot)


def encode_caches(tier: TierState) -> tuple[bytes, bytes]:
    """The parse cache and search index snapshot of the records held now, under a new `tier.cache_gen`."""
    def entries() -> Iterator[tuple[str, tuple[int, int], Memory, str]]:
        for kind, records in (("m", tier.live), ("t", tier.tombstones)):
            for memory_id in sorted(records):
                sha, stat = tier.sha_on_disk(memory_id), tier.file_stat.get(memory_id)
                if sha is not None and stat is not None:
                    yield f"{kind}/{memory_id}.md", stat, records[memory_id], sha
    gen = os.urandom(8).hex()
    cache = memory_cache.encode(entries(), gen)
    tier.cache_gen = gen
    snapshot = memory_cache.encode_index({**index_header(tier), "gen": gen}, tier.index.text.export_state(),
                                         tier.tomb_index.text.export_state())
    return cache, snapshot


PREFETCH_MIN_RECORDS = 20_000  # below it a helper slowed a cold start (docs/storage.md, step 4)


def prefetch(tier: TierState, minimum: int | None = None) -> None:
    """Without a parse cache and with at least `minimum` memory files, fork a helper that parses them
    and builds the search index while the log replays (`load` takes them as a cache and a snapshot)."""
    if tier.helper is not None or tier.cache_path.exists() or not nofollow.is_plain_dir(tier.live_dir):
        return
    with os.scandir(tier.live_dir) as listing:
        if sum(1 for _ in listing) < (PREFETCH_MIN_RECORDS if minimum is None else minimum):
            return

    def work(fd: int) -> None:  # in the helper: its copy of `tier` is thrown away with it
        tier.core.progress = lambda phase, done, total: None  # the starting file is the daemon's
        _load_dirs(tier, ({}, RowTables(), None), [0])
        load_text_indexes(tier)
        cache, snapshot = encode_caches(tier)
        forked.write_all(fd, len(cache).to_bytes(8, "little") + cache + snapshot)
    tier.helper = forked.start(work)


def _helper_result(tier: TierState) -> tuple[bytes, bytes] | None:
    """(parse cache, index snapshot) the helper made, once it has exited; None if it failed."""
    running, tier.helper = tier.helper, None
    tier.core.progress("loading memories (helper)", 0, 0)
    try:
        fd = forked.finish(running)
        try:
            data = forked.read_all(fd)
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        log.warning("%s; the memory files are parsed here instead", exc)
        return None
    split = 8 + int.from_bytes(data[:8], "little")
    return data[8:split], data[split:]


def load_pending(tier: TierState) -> None:
    """Pending writes from the snapshot that the log says were staged and not settled (the reaper expires them)."""
    try:
        rows = decode_pending(nofollow.read_nofollow(tier.snapshot_path))
    except (OSError, frontmatter.BadRecord):
        return
    for pending in rows:
        tier.pending_seq = max(tier.pending_seq, pending_n(pending.id))  # never reuse a pending id
        staged = pending.id in tier.pending_logged and pending.id not in tier.pending_resolved
        if staged and pending.id not in tier.expired:
            tier.pending[pending.id] = pending


def reconcile(tier: TierState) -> dict[str, Any]:
    """Find logged records whose file is gone; the counts go into the `recovery` event."""
    present = {"live": tier.live, "tomb": tier.tombstones}
    tier.missing = sorted(i for i, state in tier.logged_state.items() if i not in present[state])
    return {"memories": len(tier.live), "tombstones": len(tier.tombstones), "memories_bad_files": len(tier.bad_files),
            "memories_hand_edited": len(tier.hand_edited), "memories_unaccounted": len(tier.unaccounted),
            "memories_missing": len(tier.missing), "pending_reloaded": len(tier.pending),
            "search_index_restored": int(tier.index_restored), "memory_folders_deferred": int(bool(tier.unlisted))}


def pending_n(pending_id: Any) -> int:
    """The number of a pending id (`pending-<n>`); 0 for one that is not."""
    try:
        return int(str(pending_id).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
