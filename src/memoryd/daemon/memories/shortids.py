"""Short ids (`m` + the ULID's last 8 or 9 characters, docs/search.md) in place of 26-character ULIDs;
computed from the ids, never stored. Import contract: stdlib only."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
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

    def _refresh(self) -> None:
        """Rebuild `shared` when the number of ids changed (~10 ms at 100k, paid by the next short id)."""
        count = sum(len(table) for table in self.tables)
        if count != self.built_for:
            tails = [memory_id[-TAIL:] for memory_id in chain.from_iterable(self.tables)]
            self.shared = set() if len(set(tails)) == len(tails) else {t for t, n in Counter(tails).items() if n > 1}
            self.built_for = count

    def short(self, memory_id: str) -> str:
        self._refresh()
        tail = memory_id[-TAIL:]
        return "m" + (memory_id[-TAIL - 1 :] if tail in self.shared else tail).lower()

    def resolve(self, short: str) -> list[str]:
        """Every id the short id may mean (none, one, or the candidates of an ambiguous one)."""
        if not (match := SHORT_RE.fullmatch(short.strip())):
            return []
        tail = match.group(1).upper()
        return sorted(memory_id for memory_id in chain.from_iterable(self.tables) if memory_id.endswith(tail))


def is_short_id(value: Any) -> bool:
    return isinstance(value, str) and SHORT_RE.fullmatch(value.strip()) is not None
