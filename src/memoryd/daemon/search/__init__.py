"""Incremental search index over memories, kept in the daemon and updated on every write.

Import contract: stdlib plus `text` (the shared analyzer); no I/O. The index holds terms and
counts, never text; scope, category and auto-scope filtering is the caller's `accept` predicate.
"""

from __future__ import annotations

from memoryd.daemon.search.duplicates import NearDuplicates
from memoryd.daemon.search.postings import content_terms, scope_tokens
from memoryd.daemon.search.ranking import Ranking

__all__ = ["SearchIndex", "content_terms", "scope_tokens"]


class SearchIndex(Ranking, NearDuplicates):
    """BM25 (k1=1.2, b=0.75) over content plus scopes, with Jaccard near-duplicate lookup."""
