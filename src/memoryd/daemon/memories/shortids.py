"""Short ids: what a hook's pointer line, a list and a person type instead of a 26-character ULID.

A short id is "m" and the ULID's last 8 characters, lowercased (`m7kq2x9ab`): the ULID's random
tail, not its time head, so memories written in the same millisecond (a bulk import) still differ.
Where two memories of the store, live or removed, share those 8 characters, each shows 9 (10
characters in all) and 8 names neither: `resolve` then answers with both candidates, which is also
what happens when a sync brings in a memory whose tail matches one shown before. ULIDs begin with
0-7, so a short id can never be read as a ULID prefix. Nothing is stored: the ids are the truth.

Import contract: stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any

SHORT_RE = re.compile(r"m([0-9a-hjkmnp-tv-z]{8,9})", re.IGNORECASE)
TAIL = 8


class ShortIds:
    """Short ids over the store's two id tables (live memories and tombstones)."""

    def __init__(self, *tables: Mapping[str, Any]) -> None:
        self.tables = tables
        self.shared: set[str] = set()   # 8-character tails that two or more ids end with
        self.built_for = -1             # how many ids `shared` was built from

    def _ids(self) -> Iterable[str]:
        return chain.from_iterable(self.tables)

    def _refresh(self) -> None:
        """Rebuild `shared` when the set of ids has changed size: one pass over the ids (~10 ms at
        100k), paid by the first short id shown after a write, not by the write."""
        count = sum(len(table) for table in self.tables)
        if count != self.built_for:
            tails = [memory_id[-TAIL:] for memory_id in self._ids()]
            distinct = set(tails)
            self.shared = set() if len(distinct) == len(tails) else _repeated(tails)
            self.built_for = count

    def short(self, memory_id: str) -> str:
        self._refresh()
        tail = memory_id[-TAIL:]
        return "m" + (memory_id[-TAIL - 1 :] if tail in self.shared else tail).lower()

    def resolve(self, short: str) -> list[str]:
        """Every id the short id may mean (none, one, or the candidates of an ambiguous one)."""
        match = SHORT_RE.fullmatch(short.strip())
        if not match:
            return []
        tail = match.group(1).upper()
        return sorted(memory_id for memory_id in self._ids() if memory_id.endswith(tail))


def _repeated(tails: list[str]) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for tail in tails:
        (repeated if tail in seen else seen).add(tail)
    return repeated


def is_short_id(value: Any) -> bool:
    return isinstance(value, str) and SHORT_RE.fullmatch(value.strip()) is not None
