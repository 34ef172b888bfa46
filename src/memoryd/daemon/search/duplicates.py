"""Near-duplicate lookup over the content postings (the write gates' dedup and `related`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from memoryd.daemon.search.postings import Postings

SIMILARITY_DIGITS = 4
EXACT_SIMILARITY = 0.7  # `similar` is exact at or above it; below, it looks at RELATED_PREFIX rarest terms
RELATED_PREFIX = 5
PRUNE_FROM = 100  # fewer candidates than this are cheaper to count than to prune


class NearDuplicates(Postings):
    """`similar`: candidates from the rarest shared terms, then checked exactly."""

    def similar(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        """Docs whose content token set (its distinct analyzed terms) has Jaccard >= `threshold` with `tokens`,
        best first, rounded to 4 decimals, ties newer first. Exact prefix filtering at or above
        `EXACT_SIMILARITY`; below it the prefix is capped (docs/tools.md, "How text becomes terms")."""
        size = len(tokens)  # none: `prefix` is 0 below
        postings, floor = self._content, threshold - 1e-12
        present = sorted((t for t in tokens if t in postings), key=lambda t: self._doc_count(postings, t))

        def prefix_at(jaccard: float) -> int:  # how many of the rarest a doc at `jaccard` must share one of
            return len(present) + 1 - max(1, math.ceil(jaccard * size - 1e-9))

        prefix = max(prefix_at(max(threshold, EXACT_SIMILARITY)), min(prefix_at(threshold), RELATED_PREFIX))
        if prefix <= 0:
            return []
        overlap = self._count_overlaps(present, prefix, lambda other: _least_shared(size, other, floor))
        scored = ((d, shared / (size + self._set_size[d] - shared)) for d, shared in overlap.items())
        found = [(round(j, SIMILARITY_DIGITS), self._recency[d], d) for d, j in scored if j >= floor]
        return [(doc_id, sim) for sim, _, doc_id in sorted(found, reverse=True)]

    def _count_overlaps(self, present: list[str], prefix: int, least: Callable[[int], int]) -> dict[str, int]:
        """Shared-token counts of the docs holding one of the first `prefix` terms of `present` that
        can still share `least(their distinct token count)`: before each later term, a doc that
        would fall short even holding every term left is dropped."""
        overlap: dict[str, int] = Counter(d for t in present[:prefix] for d in self._docs_of(self._content, t) or ())
        rest, sizes = present[prefix:], self._set_size
        # `least` of each candidate's set size (sets have few sizes; candidates only get fewer).
        need = {n: least(n) for n in {sizes[d] for d in overlap}} if len(overlap) >= PRUNE_FROM else {}
        # The largest shortfall: while more terms than that are left, nobody can be dropped.
        short = max(need[sizes[d]] - n for d, n in overlap.items()) if need else 0
        for left, term in zip(range(len(rest), 0, -1), rest):
            if short > left:
                overlap = {d: n for d, n in overlap.items() if n + left >= need[sizes[d]]}
                short = max((need[sizes[d]] - n for d, n in overlap.items()), default=0)
            if not overlap:
                break
            docs = self._docs_of(self._content, term) or {}
            # `&` of two key views walks the smaller: a common term's postings can dwarf the candidates.
            for d in docs.keys() & overlap.keys():
                overlap[d] += 1
        return overlap


def _least_shared(size: int, other: int, floor: float) -> int:
    """The fewest shared tokens that give two sets of `size` and `other` tokens a Jaccard
    similarity of at least `floor` (more than either holds when none can)."""
    shared = max(1, math.ceil(floor * (size + other) / (1 + floor)) - 1)
    while shared / (size + other - shared) < floor:  # the same test `similar` applies at the end
        shared += 1
    return shared
