"""The live memories by id, keeping the digest's aggregates (counts by category and project, each project's
handoffs, the write order) current as records come and go, so `memory_digest` at every session start costs
~O(answer), not O(store). Import contract: records."""

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
            self._count(self[key], -1)
        super().__setitem__(key, memory)
        self._count(memory)
        self._order.append(key)

    def __delitem__(self, key: str) -> None:
        self._count(self[key], -1)
        super().__delitem__(key)

    def pop(self, key: str, *default: Memory) -> Memory:  # type: ignore[override]
        if key not in self and default:
            return default[0]
        memory = self[key]  # KeyError when absent
        del self[key]
        return memory

    def load(self, memories: list[Memory], groups: list[Any] | None = None) -> None:
        """Insert the memories a start read (none present yet), counted by column. `groups`: per memory, a key
        shared by those with the same scopes and origin objects (their identities if not given): one project_of each."""
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

    def _count(self, memory: Memory, step: int = 1) -> None:
        """Count `memory` in (step 1) or out (-1); a count that reaches 0 is dropped."""
        project = self.project_of(memory)
        name = project or "(none)"
        counters: tuple[tuple[Counter[Any], Any], ...] = (
            (self.by_category, memory.category), (self.by_project, name),
            (self.by_project_category, (name, memory.category)))
        for counter, key in counters:
            counter[key] += step
            if counter[key] <= 0:
                del counter[key]
        if memory.category == HANDOFF and step > 0:
            self.handoffs.setdefault(project, set()).add(memory.id)
        elif memory.category == HANDOFF:
            self.handoffs.get(project, set()).discard(memory.id)

    def sort_by_updated(self) -> None:
        """After a bulk load, order writes by their `updated` stamps (ties: in insertion order)."""
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
