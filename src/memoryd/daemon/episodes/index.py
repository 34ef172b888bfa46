"""The episode index: every episode file's frontmatter in memory, sessions packed until first used
(docs/storage.md, 'Packed episodes'), bodies read on demand, and the index cache a clean stop writes.

Import contract: building blocks (store, frontmatter, idents, nofollow), the cache format and the
record. Provenance comes from the event log's index in `core`, never from an episode file.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, KeysView, Mapping
from pathlib import Path
from typing import Any

import msgpack

from memoryd.daemon.episodes.episode import Episode, from_meta, from_row
from memoryd.daemon.episodes.index_cache import Packed, encode_cache
from memoryd.daemon.identity import idents
from memoryd.daemon.storage import frontmatter, nofollow, store


class EpisodeIndex(Mapping[str, Episode]):
    """`journal.by_id`: every episode by id; only a lookup decodes its session."""

    def __init__(self, journal: JournalIndex) -> None:
        self._journal = journal

    def __getitem__(self, episode_id: str) -> Episode:
        found = self._journal.get(episode_id)
        if found is None:
            raise KeyError(episode_id)
        return found

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._journal.owner

    def __iter__(self) -> Iterator[str]:
        return iter(self._journal.owner)

    def __len__(self) -> int:
        return len(self._journal.owner)

    def keys(self) -> KeysView[str]:
        return self._journal.owner.keys()


class JournalIndex:
    """Episodes by session; a session taken from the cache stays packed (its cache rows, ~1/5 of
    the objects' memory) until first used."""

    def __init__(self, root: Path, files: store.FileStore, provenance: Callable[[str, str], str]) -> None:
        self.dir = root / "episodes"
        self._prefix = str(self.dir) + os.sep
        self.files = files
        self.provenance = provenance  # local, untracked or unaccounted: the log's verdict (`core`)
        self.owner: dict[str, str] = {}  # every episode id -> its session, decoded or not
        self.by_id = EpisodeIndex(self)
        self._live: dict[str, dict[str, Episode]] = {}  # decoded sessions
        self._packed: dict[str, Packed] = {}
        self.bad_files: list[dict[str, str]] = []
        self.stats: dict[str, tuple[int, int]] = {}  # decoded episode id -> (size, mtime_ns) its file had

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
        """Every episode that may be in `worktree` (... : any) and `swarm` (None: any), decoding only
        the packed sessions whose summary says they hold one."""
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
        counts = {"local": 0, "untracked": 0, "unaccounted": 0}
        for session_id, packed in list(self._packed.items()):
            if logged.issuperset(packed.ids):
                counts["local"] += len(packed.ids)
            else:
                self._unpack(session_id)
        for bucket in self._live.values():
            for episode in bucket.values():
                counts[self.provenance(episode.id, episode.created)] += 1
        return counts

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

    @property
    def cache_path(self) -> Path:
        return self.dir.parent / "state" / "episodes.cache"

    def save_cache(self, log_seq: int) -> None:
        """Write the index cache; packed sessions as read, stats from `stats`, not 80k lstats."""
        sessions = list(self._packed.items()) + self._packed_live()
        self.files.write_file(self.cache_path, encode_cache(log_seq, sessions))

    def _packed_live(self) -> list[tuple[str, Packed]]:
        return [(sid, packed) for sid, bucket in self._live.items() if (packed := self._pack(bucket)) is not None]

    def _pack(self, bucket: dict[str, Episode]) -> Packed | None:
        rows, listed = [], []
        for episode in bucket.values():
            stat = self.stats.get(episode.id)
            if stat is None:
                try:
                    st = os.lstat(self.file_of(episode))
                except OSError:
                    continue
                stat = (st.st_size, st.st_mtime_ns)
            listed.append(episode)
            rows.append([stat[0], stat[1], episode.created, episode.takeaway, episode.first_line,
                         list(episode.scopes), episode.swarm_id, episode.worktree])
        if not listed:
            return None
        return Packed(ids=tuple(e.id for e in listed), newest=max(e.created for e in listed),
                      worktrees=tuple(Counter(e.worktree for e in listed).items()),
                      swarms=tuple({e.swarm_id for e in listed if e.swarm_id is not None}),
                      rows=msgpack.packb(rows, use_bin_type=True))
