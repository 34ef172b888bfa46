"""The live memories by id, keeping the digest's aggregates current as records come and go.

`memory_digest` is called at every session start and must stay ~O(answer), not O(store): counts
by category and project, each project's handoffs and the write order are updated on every
insert and delete instead of being recomputed from 10k+ records per call. Records are
replaced, never mutated in place (dataclasses.replace), so forgetting the old object on
overwrite is exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from itertools import compress
from operator import attrgetter
from typing import Any

from memoryd.daemon.memories.records import HANDOFF, Memory

_ID, _CATEGORY, _SCOPES, _ORIGIN = (attrgetter(name) for name in ("id", "category", "scopes", "origin"))


class LiveMemories(dict[str, Memory]):
    def __init__(self, project_of: Callable[[Memory], str | None]) -> None:
        super().__init__()
        self.project_of = project_of
        self.by_category: Counter[str] = Counter()
        self.by_project: Counter[str] = Counter()
        self.by_project_category: Counter[tuple[str, str]] = Counter()  # (project, category)
        self.handoffs: dict[str | None, set[str]] = {}
        self._order: list[str] = []  # ids in write order, newest last; stale entries are skipped

    def __setitem__(self, key: str, memory: Memory) -> None:
        if key in self:
            self._forget(self[key])
        super().__setitem__(key, memory)
        self._count(memory)
        self._order.append(key)

    def __delitem__(self, key: str) -> None:
        self._forget(self[key])
        super().__delitem__(key)

    def pop(self, key: str, *default: Memory) -> Memory:  # type: ignore[override]
        if key in self:
            memory = self[key]
            del self[key]
            return memory
        if default:
            return default[0]
        raise KeyError(key)

    def load(self, memories: list[Memory], groups: list[Any] | None = None) -> None:
        """Insert the memories a start read (none present yet), counted column by column at C
        speed, faster than one Python loop per record (docs/benchmark.md). `groups`: per
        memory, a key shared by exactly the memories that share its scopes and origin objects
        (a start's memories share those, see records.RowTables), so each group's project is
        worked out once; the objects' identities when not given."""
        ids = list(map(_ID, memories))
        dict.update(self, zip(ids, memories))
        if groups is None:
            groups = list(zip(map(id, map(_SCOPES, memories)), map(id, map(_ORIGIN, memories))))
        projects = {group: self.project_of(memory) for group, memory in dict(zip(groups, memories)).items()}
        categories = list(map(_CATEGORY, memories))
        for (project, category), count in Counter(zip(map(projects.__getitem__, groups), categories)).items():
            name = project or "(none)"
            self.by_project_category[(name, category)] += count
            self.by_project[name] += count
            self.by_category[category] += count
        for memory in compress(memories, map(HANDOFF.__eq__, categories)):
            self.handoffs.setdefault(self.project_of(memory), set()).add(memory.id)
        self._order.extend(ids)

    def _count(self, memory: Memory) -> None:
        project = self.project_of(memory)
        self.by_category[memory.category] += 1
        self.by_project[project or "(none)"] += 1
        self.by_project_category[(project or "(none)", memory.category)] += 1
        if memory.category == HANDOFF:
            self.handoffs.setdefault(project, set()).add(memory.id)

    def _forget(self, memory: Memory) -> None:
        project = self.project_of(memory)
        self.by_category[memory.category] -= 1
        self.by_project[project or "(none)"] -= 1
        pair = (project or "(none)", memory.category)
        self.by_project_category[pair] -= 1
        counters: tuple[tuple[Counter[Any], Any], ...] = (
            (self.by_category, memory.category), (self.by_project, project or "(none)"),
            (self.by_project_category, pair))
        for counter, key in counters:
            if counter[key] <= 0:
                del counter[key]
        if memory.category == HANDOFF:
            self.handoffs.get(project, set()).discard(memory.id)

    def sort_by_updated(self) -> None:
        """After a bulk load, order writes by their `updated` stamps (ties: in insertion order).
        Sorted by position with C-level keys, faster than a lambda per record (docs/benchmark.md)."""
        ids, stamps = list(self), list(map(attrgetter("updated"), self.values()))
        self._order = list(map(ids.__getitem__, sorted(range(len(ids)), key=stamps.__getitem__)))

    def newest_first(self) -> Iterator[Memory]:
        """Live memories, most recently written first (each once)."""
        if len(self._order) > 2 * len(self) + 1024:
            self._order = [i for i in dict.fromkeys(reversed(self._order)) if i in self][::-1]
        seen: set[str] = set()
        for memory_id in reversed(self._order):
            if memory_id not in seen and memory_id in self:
                seen.add(memory_id)
                yield self[memory_id]

    def newest_handoffs(self) -> dict[str | None, Memory]:
        return {project: max((self[i] for i in ids), key=lambda m: m.created)
                for project, ids in self.handoffs.items() if ids}
