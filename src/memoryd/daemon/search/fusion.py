"""Fusing `memory_search`'s two rankings, by words (`ranking`) and by meaning (the encoder's), by
reciprocal rank (docs/search.md, "Meaning"). Import contract: stdlib only.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence

# Each list's best FUSE_DEPTH count, a hit's share 1 / (RRF_K + rank) weighted per list; chosen on
# the eval's tune split (docs/search.md, "Meaning").
FUSE_DEPTH = 20
RRF_K = 1
LEXICAL_WEIGHT = 1.0
MEANING_WEIGHT = 1.0
# A query naming an identifier (`backticked`, a path, dotted, snake_case, camelCase, ALL_CAPS, a --flag)
# asks for exact terms: meaning counts half.
IDENTIFIER_MEANING_WEIGHT = 0.5
_IDENTIFIER_RE = re.compile(r"`|[A-Za-z0-9][_/.][A-Za-z0-9]|[a-z][A-Z]|\b[A-Z][A-Z0-9_]{2,}\b|--?[a-z]")


def fuse(query: str, by_words: Sequence[str], by_meaning: Sequence[str]) -> dict[str, float]:
    """Each id's fused score from its rank in either list (best first)."""
    fused = {doc_id: LEXICAL_WEIGHT / (RRF_K + rank) for rank, doc_id in enumerate(by_words)}
    weight = IDENTIFIER_MEANING_WEIGHT if _IDENTIFIER_RE.search(query) else MEANING_WEIGHT
    for rank, doc_id in enumerate(by_meaning):
        fused[doc_id] = fused.get(doc_id, 0.0) + weight / (RRF_K + rank)
    return fused


def fused_order(fused: dict[str, float], limit: int) -> list[str]:
    """The best `limit` ids by fused score; a tie goes to the older memory, the smaller id (why:
    docs/tools.md, "Search")."""
    return heapq.nsmallest(limit, fused, key=lambda doc_id: (-fused[doc_id], doc_id))
