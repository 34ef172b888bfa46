"""In-memory indexes over the live memories and the tombstones, kept incrementally on every change,
so no gate or read scans all memories.

Import contract: search, records, anchors, stdlib.
"""

from __future__ import annotations

import bisect
import gc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from memoryd.daemon.memories.anchors import AnchorIndex
from memoryd.daemon.memories.records import HANDOFF, Memory, sha256_hex
from memoryd.daemon.search import SearchIndex

PROJECT_PREFIX = "projects:"


def project_scope_name(scope: str) -> str | None:
    """`projects:memoryd:core` → `memoryd`; None for scopes outside `projects:`."""
    if not scope.startswith(PROJECT_PREFIX):
        return None
    name = scope[len(PROJECT_PREFIX):].split(":", 1)[0]
    return name or None


class LiveIndex:
    """Live memories: text index, by-repo sets, id order, backlinks, known projects, handoffs."""

    def __init__(self) -> None:
        self._text: SearchIndex | None = SearchIndex()
        # A cold start's memories, waiting for their text index (`defer_text`), and its progress line.
        self._text_todo: list[Memory] = []
        self._text_progress: Callable[[int], None] | None = None
        self.by_repo: dict[str | None, set[str]] = {}
        self.order: list[str] = []                            # ids ascending (ULID = creation order)
        self.backlinks: dict[str, dict[str, str]] = {}        # target -> {source: link type}
        self.projects: dict[str, str | None] = {}             # known project -> a worktree of it
        self.handoffs: dict[str, str] = {}                    # sha256(content) -> handoff id
        self.pinned: set[str] = set()                         # ids of pinned memories
        self.semantic: Any = None                             # memories.semantic.Semantic: vectors follow changes
        self.anchors = AnchorIndex()                          # paths/names/commands -> ids (built on first use)

    def add(self, memory: Memory, text: bool = True, terms: list[str] | None = None) -> None:
        """Index `memory`; `text=False` leaves the text index alone (start-up restores it whole).
        `terms`: its content's `text.analyze`, when the caller has them."""
        if text:
            self.add_text(memory, terms)
        if self.semantic is not None:
            self.semantic.changed(memory)
        self.anchors.add(memory)
        index = bisect.bisect_left(self.order, memory.id)
        if index == len(self.order) or self.order[index] != memory.id:
            self.order.insert(index, memory.id)
        self._add_maps(memory)
        self._learn_projects(memory)

    def _add_maps(self, memory: Memory) -> None:
        self.by_repo.setdefault(memory.repo, set()).add(memory.id)
        for link in memory.links:
            self.backlinks.setdefault(link["target_id"], {})[memory.id] = link["type"]
        if memory.category == HANDOFF:
            self.handoffs[sha256_hex(memory.content.encode())] = memory.id
        if memory.pinned:
            self.pinned.add(memory.id)

    def load(self, memories: list[Memory]) -> None:
        """Index the memories a start read, in ascending id order, into an empty index (not the text
        index: restored or rebuilt whole afterwards)."""
        assert not self.order, "bulk load into an empty index only"
        self.order = [m.id for m in memories]
        learned: set[tuple[int, int]] = set()
        for memory in memories:
            self._add_maps(memory)
            key = (id(memory.scopes), id(memory.origin))
            if key not in learned:
                learned.add(key)
                self._learn_projects(memory)

    def add_text(self, memory: Memory, terms: list[str] | None = None) -> None:
        self.text.add(*self._doc(memory), terms=terms)

    @property
    def text(self) -> SearchIndex:
        """The BM25 and near-duplicate index; a deferred one (`defer_text`) is built on first use."""
        return self.finish_text() if self._text is None else self._text

    @text.setter
    def text(self, index: SearchIndex) -> None:
        self._text, self._text_todo = index, []

    def build_text(self, memories: Iterable[Memory], progress: Callable[[int], None] | None = None) -> None:
        """A new text index of `memories` in one go (start-up without a snapshot)."""
        self.text = SearchIndex.build(map(self._doc, memories), progress)

    def defer_text(self, memories: list[Memory], progress: Callable[[int], None] | None = None) -> None:
        """Build the index of `memories` later: on the first idle turn, or by the first use of `text`,
        whichever comes first (docs/storage.md, "Recovery at start", step 4)."""
        self._text, self._text_todo, self._text_progress = None, memories, progress

    def finish_text(self) -> SearchIndex:
        if self._text is None:
            # As during a start: the cyclic GC would walk the growing heap again and again for nothing.
            gc.disable()
            try:
                self._text = SearchIndex.build(map(self._doc, self._text_todo), self._text_progress)
            finally:
                gc.freeze()
                gc.enable()
            self._text_todo, self._text_progress = [], None
        return self._text

    @property
    def text_pending(self) -> bool:
        return self._text is None

    @staticmethod
    def _doc(memory: Memory) -> tuple[str, str, tuple[str, ...], str]:
        return memory.id, memory.content, memory.scopes, memory.updated

    def remove(self, memory: Memory) -> None:
        self.text.remove(memory.id, memory.content, memory.scopes)
        if self.semantic is not None:
            self.semantic.removed(memory.id)
        self.anchors.remove(memory)
        self.by_repo.get(memory.repo, set()).discard(memory.id)
        _discard(self.order, memory.id)
        for link in memory.links:
            self.backlinks.get(link["target_id"], {}).pop(memory.id, None)
        self.pinned.discard(memory.id)
        if memory.category == HANDOFF:
            self.handoffs.pop(sha256_hex(memory.content.encode()), None)

    def _learn_projects(self, memory: Memory) -> None:
        # Projects are only ever learned, never forgotten: a removed memory's project stays known.
        for scope in memory.scopes:
            name = project_scope_name(scope)
            if name is None:
                continue
            if memory.origin.get("project") == name and memory.origin.get("worktree"):
                self.projects[name] = memory.origin["worktree"]
            else:
                self.projects.setdefault(name, None)

    def ids_descending(self, before: str | None = None) -> Iterator[str]:
        """Live ids newest first, starting strictly below `before` when given (a list cursor)."""
        return _descending(self.order, before)


class TombIndex:
    """Tombstones: near-duplicate index (the previously-removed gate) and removal order."""

    def __init__(self) -> None:
        self.text = SearchIndex()
        self.order: list[tuple[str, str]] = []  # (removed_at, id) ascending

    def add(self, memory: Memory, text: bool = True) -> None:
        if text:
            self.text.add(*self._doc(memory))
        bisect.insort(self.order, (memory.removed_at or "", memory.id))

    def build_text(self, memories: Iterable[Memory]) -> None:
        self.text = SearchIndex.build(map(self._doc, memories))

    @staticmethod
    def _doc(memory: Memory) -> tuple[str, str, tuple[str, ...], str]:
        return memory.id, memory.content, memory.scopes, memory.removed_at or ""

    def remove(self, memory: Memory) -> None:
        self.text.remove(memory.id, memory.content, memory.scopes)
        _discard(self.order, (memory.removed_at or "", memory.id))

    def keys_descending(self, before: tuple[str, str] | None = None) -> Iterator[tuple[str, str]]:
        return _descending(self.order, before)


def _discard(order: list[Any], key: Any) -> None:
    index = bisect.bisect_left(order, key)
    if index < len(order) and order[index] == key:
        del order[index]


def _descending(order: list[Any], before: Any) -> Iterator[Any]:
    end = bisect.bisect_left(order, before) if before is not None else len(order)
    return (order[i] for i in range(end - 1, -1, -1))
