"""BM25 (k1 = 1.2, b = 0.75) over content plus scopes, MaxScore-pruned, then re-ranked by how much
of the query each hit holds (docs/tools.md, "Search")."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from operator import itemgetter

from memoryd.daemon.search.postings import Postings
from memoryd.daemon.search.text import query_terms

BM25_K1 = 1.2
BM25_B = 0.75
SCORE_DIGITS = 4
RANK_SLACK = 16  # a filtered search first ranks this many candidates beyond `limit`
RERANK_DEPTH = 10
COVERAGE_BASE = 0.5
Accept = Callable[[str], bool] | None


class Ranking(Postings):
    """BM25 search, its coverage re-rank and `relevance` over the postings."""

    def search(self, query: str, limit: int, accept: Accept = None) -> list[tuple[str, float]]:
        """Up to `limit` `(doc_id, score)` pairs, best first, among docs `accept` lets through: `bm25`'s
        best `max(limit, RERANK_DEPTH)`, each score times `COVERAGE_BASE + coverage`. Equal rounded
        scores put the newer recency first, then the larger doc_id."""
        return [(doc_id, score) for doc_id, score, _ in self.ranked_hits(query, limit, accept)]

    def ranked_hits(self, query: str, limit: int, accept: Accept = None) -> list[tuple[str, float, float]]:
        """`search`'s hits as `(doc_id, score, relevance)`."""
        hits = self.bm25(query, max(limit, RERANK_DEPTH), accept)
        share = self._coverage(query_terms(query), [doc_id for doc_id, _ in hits])
        final = sorted(((round(score * (COVERAGE_BASE + share[d]), SCORE_DIGITS), self._recency[d], d)
                        for d, score in hits), reverse=True)
        return [(d, score, round(share[d], 2)) for score, _, d in final[:limit]]

    def bm25(self, query: str, limit: int, accept: Accept = None) -> list[tuple[str, float]]:
        """Up to `limit` `(doc_id, BM25 score)` pairs, best first, among docs `accept` lets through,
        tied as `search`'s. `accept` is called lazily in rank order: about `limit` calls."""
        terms = [(t, w) for t, w, _ in query_terms(query) if t in self._df]
        if limit <= 0 or not terms:
            return []
        ranked = self._ranked(terms, limit + RANK_SLACK)
        if accept is not None:
            ranked = (hit for hit in ranked if accept(hit[0]))
        return list(islice(ranked, limit))

    def _ranked(self, terms: list[tuple[str, float]], depth: int) -> Iterator[tuple[str, float]]:
        """Yield `(doc_id, rounded score)` in final order, computing only as much as is consumed:
        each round emits the certain part of the order, then ranks deeper."""
        fetch, emitted = depth, 0
        while True:
            scores, bound = self._score(terms, depth)
            floor = round(bound, SCORE_DIGITS) if bound else None
            while True:
                rows, covered = self._certain_prefix(scores, fetch, floor)
                for score, _, doc_id in rows[emitted:]:
                    yield doc_id, score
                emitted = max(emitted, len(rows))
                if covered:
                    break
                fetch *= 4
            if floor is None:
                return
            depth *= 8
            fetch = max(fetch, depth)

    def _certain_prefix(self, scores: dict[str, float], fetch: int, floor: float | None
                        ) -> tuple[list[tuple[float, str, str]], bool]:
        """The `(rounded score, recency, doc_id)` rows `scores` already fixes at the start of the final
        order, and whether fetching more cannot extend them: of the `fetch` best, those above the last
        one fetched (a tie may hide beyond) and above `floor`, the rounded bound on unscored ones."""
        if fetch >= len(scores):
            batch, cut = list(scores.items()), None
        else:
            batch = heapq.nlargest(fetch, scores.items(), key=itemgetter(1))
            cut = round(batch[-1][1], SCORE_DIGITS)
        edge = max((e for e in (cut, floor) if e is not None), default=-math.inf)
        rows = [(round(s, SCORE_DIGITS), self._recency[d], d) for d, s in batch]
        rows = sorted((row for row in rows if row[0] > edge), reverse=True)
        return rows, cut is None or (floor is not None and cut <= floor)

    def _score(self, terms: list[tuple[str, float]], depth: int) -> tuple[dict[str, float], float]:
        """`(scores, bound)`: exact BM25 scores of every document that could rank in the best
        `depth`; the others score below `bound` (0.0 when none is left out). MaxScore: once the
        `depth`-th best beats what the remaining terms could add, they only update known ones."""
        n_docs = len(self._length)
        avg_length = self._total_length / n_docs or 1.0
        # tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), with the constants hoisted.
        c_fixed = BM25_K1 * (1 - BM25_B)
        c_length = BM25_K1 * BM25_B / avg_length
        length = self._length
        weighted = sorted(((w * self._idf(t, n_docs) * (BM25_K1 + 1), self._term_tf(t)) for t, w in terms),
                          key=itemgetter(0), reverse=True)
        scores: dict[str, float] = {}
        for i, (weight, tf_by_doc) in enumerate(weighted):
            rest = sum(w for w, _ in weighted[i:]) * (1 + 1e-9)  # the most an unseen doc can still get
            spent = sum(w for w, _ in weighted[:i])  # no partial score exceeds it: then skip the heap
            if i and len(scores) >= depth and spent > rest and heapq.nlargest(depth, scores.values())[-1] > rest:
                for later_weight, later_tf in weighted[i:]:
                    for d in later_tf.keys() & scores.keys():  # `&` of key views walks the smaller
                        tf = later_tf[d]
                        scores[d] += later_weight * tf / (tf + c_fixed + c_length * length[d])
                return scores, rest
            get = scores.get
            for d, tf in tf_by_doc.items():
                scores[d] = get(d, 0.0) + weight * tf / (tf + c_fixed + c_length * length[d])
        return scores, 0.0

    def relevance(self, query: str, doc_ids: Iterable[str]) -> dict[str, float]:
        """The idf-weighted share of the typed query terms each document holds, 0..1 (2 decimals); an
        equivalent earns `EXPANSION_WEIGHT` of its term, a term no document holds counts as the rarest."""
        share = self._coverage(query_terms(query), list(doc_ids))
        return {doc_id: round(value, 2) for doc_id, value in share.items()}

    def _coverage(self, rows: tuple[tuple[str, float, str], ...], doc_ids: list[str]) -> dict[str, float]:
        n_docs = max(1, len(self._length))
        rarest = math.log(1 + (n_docs + 0.5) / 0.5)
        asked = {a: (self._idf(a, n_docs) if a in self._df else rarest) for _, w, a in rows if w == 1.0}
        total = sum(asked.values())
        holders = [(self._docs_of(self._content, term) or {}, self._docs_of(self._scope, term) or {}, weight, source)
                   for term, weight, source in rows]
        out: dict[str, float] = {}
        for doc_id in doc_ids:
            credit: dict[str, float] = {}
            for content, scope, weight, source in holders:
                if weight > credit.get(source, 0.0) and (doc_id in content or doc_id in scope):
                    credit[source] = weight
            got = sum(asked.get(a, 0.0) * c for a, c in credit.items())
            out[doc_id] = got / total if total else 0.0
        return out

    def _idf(self, term: str, n_docs: int) -> float:
        df = self._df[term]
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))

    def _term_tf(self, term: str) -> dict[str, int]:
        content, scope = self._docs_of(self._content, term), self._docs_of(self._scope, term)
        if content is None or scope is None:
            return content or scope or {}
        return {**content, **{d: content.get(d, 0) + tf for d, tf in scope.items()}}
