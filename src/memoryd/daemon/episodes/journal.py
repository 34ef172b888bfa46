"""The journal: every episode's frontmatter in memory, filled at start from the index cache or the files and
checked after (docs/storage.md, 'Recovery at start' step 5 on); symlinks are bad files, provenance is the log's.
Import contract: building blocks (store, frontmatter, idents, nofollow, prefetch), the cache format, the record."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon.episodes import index_cache
from memoryd.daemon.episodes.episode import Episode, from_meta, from_row
from memoryd.daemon.episodes.index_cache import Listing, Packed
from memoryd.daemon.identity import idents
from memoryd.daemon.storage import frontmatter, nofollow, prefetch, store

log = logging.getLogger("memoryd.daemon")

FOLDER_LISTING_COST = 10  # a folder listing, in `verify_some` budget units (one unit: an lstat)
PREFETCH_MIN_SESSIONS = 500  # fewer session folders parse in well under a second: no helper
SHARE_CHUNK = 16  # session folders per chunk of a shared parse: a small unit of work (docs/benchmark.md)


class Journal:
    """Episodes by session, a cached one packed until used (~1/5 of the memory); a `domain.TierLoader`."""

    def __init__(self, root: Path, files: store.FileStore, provenance: Callable[[str, str], str]) -> None:
        self.dir = root / "episodes"
        self.cache_path = root / "state" / "episodes.cache"
        self._prefix = str(self.dir) + os.sep
        self.files = files
        self.provenance = provenance  # local, untracked or unaccounted: the log's verdict (`core`)
        self.owner: dict[str, str] = {}  # every episode id -> its session, decoded or not
        self.by_id = index_cache.EpisodeIndex(self.owner, self.get)
        self._live: dict[str, dict[str, Episode]] = {}  # decoded sessions
        self._packed: dict[str, Packed] = {}
        self.bad_files: list[dict[str, str]] = []
        self.stats: dict[str, tuple[int, int]] = {}  # decoded episode id -> (size, mtime_ns) its file had
        self.session_dirs: list[str] = []  # every `sess-<n>` name under episodes/, links included
        self.unverified: list[str] = []  # sessions loaded from the cache, files not yet compared
        self.unlisted: list[str] = []  # session folders taken from the cache, not yet listed
        self.root_unlisted = False  # episodes/ itself not listed yet (a start after a clean stop)
        self.found_late: list[str] = []  # what the after-start check found; `Core.verify_files` logs it
        self.dropped_late = 0
        self._helper: prefetch.Helper | None = None  # the prefetch helper, while it runs
        self._prefetched: tuple[dict[str, Packed], Listing | None] | None = None  # what it found
        self._shares: tuple[list[list[os.DirEntry[str]]], prefetch.Shares] | None = None  # its work, chunked
        self.temp_files: list[str] = []  # temp files seen in session folders as they were listed

    def session(self, session_id: str) -> dict[str, Episode]:
        if session_id in self._packed:
            return self._unpack(session_id)
        return self._live.get(session_id, {})

    def get(self, episode_id: str) -> Episode | None:
        session_id = self.owner.get(episode_id)
        return None if session_id is None else self.session(session_id).get(episode_id)

    def of_session(self, session_id: str) -> list[Episode]:
        """A session's live episodes, oldest first."""
        return sorted(self.session(session_id).values(), key=lambda e: (e.created, e.id))

    def matching(self, worktree: Any = ..., swarm: str | None = None) -> Iterator[Episode]:
        """Episodes maybe in `worktree` (...: any) and `swarm` (None: any); packed sessions without stay so."""
        for session_id, packed in list(self._packed.items()):
            if ((worktree is ... or any(w == worktree for w, _ in packed.worktrees))
                    and (swarm is None or swarm in packed.swarms)):
                self._unpack(session_id)
        return (e for bucket in list(self._live.values()) for e in bucket.values())

    def summaries(self) -> Iterator[tuple[str, int, str]]:
        """(session, episodes, newest created) for each session holding episodes, none decoded."""
        for session_id, packed in self._packed.items():
            yield session_id, len(packed.ids), packed.newest
        for session_id, bucket in self._live.items():
            if bucket:
                yield session_id, len(bucket), max(e.created for e in bucket.values())

    def count_in_worktree(self, worktree: str | None) -> int:
        return (sum(n for p in self._packed.values() for w, n in p.worktrees if w == worktree)
                + sum(1 for bucket in self._live.values() for e in bucket.values() if e.worktree == worktree))

    def provenance_counts(self, logged: set[str]) -> dict[str, int]:
        """Episodes by `provenance`; a packed session the log names whole counts local, undecoded."""
        counts = Counter({"local": 0, "untracked": 0, "unaccounted": 0})
        for session_id, packed in list(self._packed.items()):
            if logged.issuperset(packed.ids):
                counts["local"] += len(packed.ids)
            else:
                self._unpack(session_id)
        counts.update(self.provenance(e.id, e.created) for bucket in self._live.values() for e in bucket.values())
        return dict(counts)

    def file_of(self, episode: Episode) -> str:
        return f"{self._prefix}{episode.session_id}/{episode.id}.md"

    def path_of(self, episode: Episode) -> Path:
        return Path(self.file_of(episode))

    def read_body(self, episode: Episode) -> str:
        try:
            return frontmatter.parse(self.files.read_bytes(self.path_of(episode)))[1]
        except (OSError, frontmatter.BadRecord, UnicodeDecodeError):
            return ""

    def path_for(self, session_id: str, episode_id: str) -> Path:
        assert idents.is_session_id(session_id) and idents.is_ulid(episode_id)  # validated before this
        return self.dir / session_id / f"{episode_id}.md"

    def add(self, episode: Episode) -> None:
        self.session(episode.session_id)  # a packed session is decoded before it changes
        self._live.setdefault(episode.session_id, {})[episode.id] = episode
        self.owner[episode.id] = episode.session_id

    def remove(self, episode_id: str) -> Episode | None:
        session_id = self.owner.get(episode_id)
        if session_id is None:
            return None
        bucket = self.session(session_id)
        episode = bucket.pop(episode_id, None)
        self.owner.pop(episode_id, None)
        self.stats.pop(episode_id, None)
        if not bucket:
            self._live.pop(session_id, None)
        return episode

    def _unpack(self, session_id: str) -> dict[str, Episode]:
        """Decode a packed session; a bad row (a damaged cache) is replaced by parsing its file."""
        packed = self._packed.pop(session_id)
        bucket = self._live.setdefault(session_id, {})
        for episode_id, row in packed.entries():
            episode = from_row(row, session_id, episode_id)
            if episode is None:
                self.owner.pop(episode_id, None)
                self._parse_file(session_id, f"{self._prefix}{session_id}/{episode_id}.md")
                continue
            bucket[episode.id] = episode
            self.stats[episode.id] = (row[0], row[1])
        return bucket

    def _adopt(self, session_id: str, packed: Packed) -> None:
        owner = self.owner
        for episode_id in packed.ids:  # a plain loop, faster than update(fromkeys) (docs/benchmark.md)
            owner[episode_id] = session_id
        self._packed[session_id] = packed

    def _bad(self, path: Path, reason: str) -> None:
        self.bad_files.append({"path": str(path), "reason": reason})

    def _parse_file(self, session_id: str, path: str, found: list[str] | None = None) -> None:
        """Index the episode file at `path` (its id added to `found`, if given); a bad one is listed."""
        try:
            data, stat = nofollow.read_with_stat(path)
            meta, body = frontmatter.parse(data)
            episode = from_meta(meta, body, session_id, path)
        except FileNotFoundError:
            return
        except (OSError, frontmatter.BadRecord, KeyError, TypeError, ValueError) as exc:
            self._bad(Path(path), str(exc)[:200])
            return
        self.add(episode)
        self.stats[episode.id] = (stat.st_size, stat.st_mtime_ns)
        if found is not None:
            found.append(episode.id)

    def save_cache(self, log_seq: int) -> None:
        """Write the index cache; packed sessions as read, stats from `stats`, not 80k lstats."""
        sessions = list(self._packed.items()) + self._packed_live()
        self.files.write_file(self.cache_path, index_cache.encode_cache(log_seq, sessions))

    def _packed_live(self) -> list[tuple[str, Packed]]:
        return [(sid, packed) for sid, bucket in self._live.items()
                if (packed := index_cache.pack(bucket, self.stats, self.file_of)) is not None]

    def load(self, progress: Callable[[str, int, int], None] | None = None, listed_at: int | None = None) -> None:
        """Index every episode file (untrustworthy ones go to `bad_files`); cached sessions are taken
        packed and checked after start (`verify_some`). `listed_at`: a resumed start's log seq; a
        cache saved at it names every file, so nothing is listed until after start."""
        if not nofollow.is_plain_dir(self.dir):
            return
        fresh = self.prefetching  # rows the helper parsed during this start: nothing to verify
        if fresh:
            if progress is not None:
                progress("indexing episodes (helper)", 0, 0)
            self.finish_prefetch()
            assert self._prefetched is not None
            (cached, seen), saved_at, self._prefetched = self._prefetched, None, None
            if seen is not None:
                self._adopt_listing(cached, seen)
                return
        else:
            cached, saved_at = index_cache.read_cache(self.cache_path)
        if listed_at is not None and saved_at == listed_at:
            names = sorted(cached)
            for name in names:
                self._adopt(name, cached[name])
            self.unverified.extend(names)
            self.unlisted.extend(names)
            self.root_unlisted = True
            return
        for number, folder in enumerate(self._session_folders(), 1):
            if progress is not None and not number % 256:
                progress("indexing episodes", len(self.owner), len(cached))
            self._load_entry(folder, cached.get(folder.name), fresh)

    def _session_folders(self) -> list[os.DirEntry[str]]:
        with os.scandir(self.dir) as listing:
            return sorted((e for e in listing if idents.is_session_id(e.name)), key=lambda e: e.name)

    def _load_entry(self, folder: os.DirEntry[str], packed: Packed | None, fresh: bool = False) -> None:
        """One entry of episodes/ named like a session: its folder loaded, or a bad file."""
        self.session_dirs.append(folder.name)
        if not folder.is_dir(follow_symlinks=False):
            self._bad(Path(folder.path), "a symbolic link or not a directory; not followed")
            return
        try:
            with os.scandir(folder.path) as listing:
                entries = list(listing)
        except OSError as exc:  # unreadable, or gone since episodes/ was listed: never a failed start
            self._bad(Path(folder.path), f"cannot be listed ({exc.strerror})")
            return
        self._load_folder(folder.name, entries, packed, fresh)

    def _load_folder(self, session_id: str, entries: list[os.DirEntry[str]], packed: Packed | None,
                     fresh: bool = False) -> None:
        """One session's folder: packed as cached when it holds exactly the cached files, else cached rows
        become episodes and the rest is parsed. `fresh`: parsed during this start, so nothing to check after."""
        names = [e.name for e in entries if e.name.endswith(".md") and not e.name.startswith(".")]
        if packed is not None and sorted(names) == sorted(f"{i}.md" for i in packed.ids) and all(
                e.is_file(follow_symlinks=False) for e in entries if e.name in names):
            self._adopt(session_id, packed)
            if not fresh:
                self.unverified.append(session_id)
            return
        rows = dict(packed.entries()) if packed is not None else {}
        bucket = self._live.setdefault(session_id, {})
        from_cache = False
        for entry in entries:
            name = entry.name
            if not name.endswith(".md") or name.startswith("."):
                if name.startswith(store.TMP_PREFIX):
                    self.temp_files.append(entry.path)
                continue
            if not entry.is_file(follow_symlinks=False):
                self._bad(Path(entry.path), "a symbolic link or not a regular file; not followed")
                continue
            row = rows.get(name[:-3])
            episode = from_row(row, session_id, name[:-3]) if row is not None else None
            if row is None or episode is None:
                self._parse_file(session_id, entry.path)
                continue
            bucket[episode.id] = episode
            self.owner[episode.id] = session_id
            self.stats[episode.id] = (row[0], row[1])
            from_cache = True
        if from_cache and not fresh:
            self.unverified.append(session_id)
        if not bucket:
            self._live.pop(session_id, None)

    def prefetch(self, minimum: int | None = None) -> None:
        """Without the index cache, in a store of at least `minimum` sessions, fork a helper that parses the
        episode folders in shared chunks while this process replays the log; `load` adopts its result."""
        if (self._helper is not None or not hasattr(os, "fork") or self.cache_path.exists()
                or not nofollow.is_plain_dir(self.dir)):
            return
        folders = self._session_folders()
        if len(folders) < (PREFETCH_MIN_SESSIONS if minimum is None else minimum):
            return
        chunks = [folders[i:i + SHARE_CHUNK] for i in range(0, len(folders), SHARE_CHUNK)]
        shares = prefetch.Shares(len(chunks))

        def work(fd: int) -> None:  # in the helper: reads files, writes only to `fd`
            parsed = self._parse_chunks(chunks, shares.take(prefetch.HELPER))
            listing = {"dirs": parsed.session_dirs, "bad": parsed.bad_files, "temp": parsed.temp_files}
            prefetch.write_all(fd, index_cache.encode_cache(-1, list(parsed._packed.items()), listing))
        self._helper = prefetch.start(work)
        if self._helper is not None:
            self._shares = (chunks, shares)

    def _parse_chunks(self, chunks: list[list[os.DirEntry[str]]], indexes: Iterator[int]) -> Journal:
        """The session folders of the chunks `indexes` yields, parsed into a journal of their own
        and packed a chunk at a time (not all at the end, which the helper did alone)."""
        parsed = Journal(self.dir.parent, self.files, self.provenance)
        for index in indexes:
            for folder in chunks[index]:
                parsed._load_entry(folder, None, fresh=True)
            parsed._packed.update(parsed._packed_live())
            parsed._live.clear()
            parsed.stats.clear()
        return parsed

    @property
    def prefetching(self) -> bool:
        """A prefetch helper runs, or has run and its result waits for `load`."""
        return self._helper is not None or self._prefetched is not None

    def finish_prefetch(self) -> tuple[str, ...] | None:
        """Parse the chunks the prefetch helper has not taken, wait for it; the temp files either saw
        (temp-file recovery need not list them again), or None when the helper failed."""
        if self._helper is not None:
            self._prefetched = self._helper_result()
        listing = self._prefetched[1] if self._prefetched is not None else None
        return listing.temp if listing is not None else None

    def _helper_result(self) -> tuple[dict[str, Packed], Listing | None]:
        """What the helper and this process parsed and found; ({}, None) when the helper failed."""
        assert self._helper is not None and self._shares is not None
        (chunks, shares), running = self._shares, self._helper
        mine = self._parse_chunks(chunks, shares.take(prefetch.DAEMON))  # what the helper has not reached
        self._helper = self._shares = None
        try:
            source, header = index_cache.read_header(prefetch.finish(running))  # closes the file if it is bad
            if not isinstance(header, dict):
                raise TypeError("its result is not a cache")
            listing = Listing.of(header.get("listing"))
        except (OSError, ValueError, TypeError, msgpack.UnpackException) as exc:
            log.warning("episode prefetch: %s; the episode files are parsed here instead", exc)
            return {}, None
        # Where the two met, a chunk may have been parsed by both: the same files, found the same.
        sessions = {**index_cache.sessions_of(header.get("sessions", ()), source), **mine._packed}
        return sessions, Listing(dirs=tuple(f.name for chunk in chunks for f in chunk),
                                 bad=tuple({b["path"]: b for b in (*listing.bad, *mine.bad_files)}.values()),
                                 temp=tuple(dict.fromkeys((*listing.temp, *mine.temp_files))))

    def _adopt_listing(self, cached: dict[str, Packed], listing: Listing) -> None:
        """Take what the prefetch helper parsed and listed, packed, without listing again; except a
        folder it saw a temp file in, which temp-file recovery may have rolled forward since."""
        changed = {os.path.basename(os.path.dirname(path)) for path in listing.temp}
        self.session_dirs.extend(listing.dirs)
        self.bad_files.extend(bad for bad in listing.bad  # a changed folder's are found again below
                              if os.path.basename(os.path.dirname(bad["path"])) not in changed)
        for name in sorted(cached.keys() - changed):
            self._adopt(name, cached[name])
        for name in sorted(changed):
            try:
                with os.scandir(self.dir / name) as entries:
                    self._load_folder(name, list(entries), cached.get(name), fresh=True)
            except OSError:
                continue

    def verify_some(self, budget: int | None) -> int:
        """Check cache-loaded sessions against their files and list the folders not listed at
        start, until about `budget` lstats (None: all) are spent; returns how many remain."""
        spent = 0
        while self.unverified and (budget is None or spent < budget):
            spent += self._verify_session(self.unverified.pop())
        if self.root_unlisted and (budget is None or spent < budget):
            spent += self._list_root()
        while self.unlisted and (budget is None or spent < budget):
            self._list_folder(self.unlisted.pop())
            spent += FOLDER_LISTING_COST
        return len(self.unverified) + len(self.unlisted) + self.root_unlisted

    def _list_root(self) -> int:
        """List episodes/ after a start that took every session from the cache, as the start would
        have: a new folder is listed next, a cached one now a link or file let go. Returns its cost."""
        self.root_unlisted = False
        try:
            with os.scandir(self.dir) as listing:
                entries = [e for e in listing if idents.is_session_id(e.name)]
        except OSError:
            return FOLDER_LISTING_COST
        for entry in entries:
            name = entry.name
            self.session_dirs.append(name)
            if not entry.is_dir(follow_symlinks=False):
                self._bad(Path(entry.path), "a symbolic link or not a directory; not followed")
                gone = [i for i, sid in self.owner.items() if sid == name]
                self.dropped_late += sum(self.remove(i) is not None for i in gone)
            elif name not in self._packed and name not in self._live:
                self.unlisted.append(name)
        return FOLDER_LISTING_COST + len(entries) // 100

    def _verify_session(self, session_id: str) -> int:
        packed = self._packed.get(session_id)
        if packed is not None:
            stats = [(episode_id, (row[0], row[1]) if type(row) is list and len(row) == 8 else None)
                     for episode_id, row in packed.entries()]
        else:
            stats = [(i, self.stats[i]) for i in self._live.get(session_id, {}) if i in self.stats]
        for episode_id, seen in stats:
            path = f"{self._prefix}{session_id}/{episode_id}.md"
            try:
                st = os.lstat(path)
            except FileNotFoundError:  # deleted while the daemon was stopped: as if never listed
                self.dropped_late += self.remove(episode_id) is not None
                continue
            except OSError:
                continue
            if (st.st_size, st.st_mtime_ns) != seen and self.remove(episode_id) is not None:
                self._parse_file(session_id, path, self.found_late)
        return max(1, len(stats))

    def _list_folder(self, session_id: str) -> None:
        """Parse what a session folder holds beyond its cached episodes (or list as bad)."""
        if not nofollow.is_plain_dir(self.dir / session_id):
            return  # pruned since start, or replaced by a link (`_list_root` lets its episodes go)
        try:
            with os.scandir(self.dir / session_id) as listing:
                entries = list(listing)
        except OSError:
            return  # pruned since start, or replaced: the next start lists it
        owner = self.owner
        for entry in entries:
            name = entry.name
            if not name.endswith(".md") or name.startswith(".") or owner.get(name[:-3]) == session_id:
                continue
            if not entry.is_file(follow_symlinks=False):
                self._bad(Path(entry.path), "a symbolic link or not a regular file; not followed")
                continue
            self._parse_file(session_id, entry.path, self.found_late)

    def late_finds(self) -> dict[str, int]:
        """What the check after start found, counted as `recovery` counts it; forgotten once told."""
        found = [e for e in map(self.by_id.get, self.found_late) if e is not None]
        counts = Counter(self.provenance(e.id, e.created) for e in found)
        told = {"episodes_parsed": len(found), "episodes_untracked": counts["untracked"],
                "episodes_unaccounted": counts["unaccounted"], "episodes_dropped": self.dropped_late}
        self.found_late, self.dropped_late = [], 0
        return told
