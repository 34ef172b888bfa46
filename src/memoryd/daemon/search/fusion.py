"""Fusing the two rankings of `memory_search` — words (BM25, `ranking`) and meaning (the encoder's
cosine) — into one order by reciprocal rank (docs/search.md, "Meaning").

Import contract: stdlib only; the ids and the two ranked lists come from the caller.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence

# Each list's best FUSE_DEPTH count, a hit's share 1 / (RRF_K + rank) weighted per list. Chosen by
# the eval set's tune-split MRR only (docs/search.md, "Meaning"): the grid was flat, K=1 and equal
# weights led.
FUSE_DEPTH = 20
RRF_K = 1
LEXICAL_WEIGHT = 1.0
MEANING_WEIGHT = 1.0
# A query naming an identifier (a `backticked` term, a path, dotted or snake_case name, camelCase,
# an ALL_CAPS variable, a --flag) is about exact terms: meaning counts half (tune split: identifier
# hit@1 0.923 -> 1.000, all 0.797 -> 0.819).
IDENTIFIER_MEANING_WEIGHT = 0.5
_IDENTIFIER_RE = re.compile(r"`|[A-Za-z0-9][_/.][A-Za-z0-9]|[a-z][A-Z]|\b[A-Z][A-Z0-9_]{2,}\b|--?[a-z]")


def fuse(query: str, by_words: Sequence[str], by_meaning: Sequence[str]) -> dict[str, float]:
    """Each id's fused score from its rank in either list (best first)."""
    fused: dict[str, float] = {}
    for rank, doc_id in enumerate(by_words):
        fused[doc_id] = LEXICAL_WEIGHT / (RRF_K + rank)
    weight = IDENTIFIER_MEANING_WEIGHT if _IDENTIFIER_RE.search(query) else MEANING_WEIGHT
    for rank, doc_id in enumerate(by_meaning):
        fused[doc_id] = fused.get(doc_id, 0.0) + weight / (RRF_K + rank)
    return fused


def fused_order(fused: dict[str, float], limit: int) -> list[str]:
    """The best `limit` ids by fused score. With equal weights a fused tie is common (ranked 1st
    by words and 2nd by meaning ties 2nd and 1st); it goes to the older memory (the smaller id):
    on the eval's tune split that beat the newer first (hit@1 0.819 against 0.797) and the one
    closer in meaning or ranked higher by words (0.808). docs/tools.md, "Search"."""
    return heapq.nsmallest(limit, fused, key=lambda doc_id: (-fused[doc_id], doc_id))
