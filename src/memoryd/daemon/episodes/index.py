"""The journal's `by_id` view over every episode (decoded or packed) and the packing of a decoded
session (docs/storage.md, 'Packed episodes'). Import contract: the cache format and the record only."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, KeysView, Mapping

import msgpack

from memoryd.daemon.episodes.episode import Episode
from memoryd.daemon.episodes.index_cache import Packed


class EpisodeIndex(Mapping[str, Episode]):
    """`journal.by_id`: every episode by id; only a lookup decodes its session."""

    def __init__(self, owner: dict[str, str], get: Callable[[str], Episode | None]) -> None:
        self._owner, self._get = owner, get  # `owner`: every episode id -> its session, decoded or not

    def __getitem__(self, episode_id: str) -> Episode:
        found = self._get(episode_id)
        if found is None:
            raise KeyError(episode_id)
        return found

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._owner

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def keys(self) -> KeysView[str]:
        return self._owner.keys()


def pack(bucket: dict[str, Episode], stats: dict[str, tuple[int, int]],
         file_of: Callable[[Episode], str]) -> Packed | None:
    """A decoded session as the cache holds it (stats from `stats`, else an lstat); None when empty."""
    rows, listed = [], []
    for episode in bucket.values():
        stat = stats.get(episode.id)
        if stat is None:
            try:
                st = os.lstat(file_of(episode))
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
