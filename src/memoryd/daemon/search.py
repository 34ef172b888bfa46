"""Incremental BM25 index over memories, kept in the daemon and updated on every write.

Import contract: stdlib plus `text` (the shared analyzer); no I/O. The index holds terms and
counts only, never the text, and knows nothing of scopes' meaning: scope, category and auto-scope
filtering is the caller's `accept` predicate.
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from itertools import accumulate
from operator import itemgetter, le
from typing import Any, cast

from memoryd.daemon import text

__all__ = ["SearchIndex", "content_terms", "query_tokens", "scope_tokens"]

BM25_K1 = 1.2
BM25_B = 0.75
SCORE_DIGITS = 4
SIMILARITY_DIGITS = 4
# A filtered search first ranks this many candidates beyond `limit`, then widens 4x at a time.
RANK_SLACK = 16
# BM25's best this many are re-ranked by how much of the query each holds (`search`).
RERANK_DEPTH = 10
COVERAGE_BASE = 0.5
# `similar`: exact at or above this Jaccard; below it, candidates share one of the rarest few.
EXACT_SIMILARITY = 0.7
RELATED_PREFIX = 5
PRUNE_FROM = 100  # fewer candidates than this are cheaper to count than to prune (`_count_overlaps`)

@lru_cache(maxsize=4096)
def scope_tokens(scope: str) -> tuple[str, ...]:
    """Index terms for one scope: every `:`-prefix of two or more levels, whole
    ("projects:memoryd", "projects:memoryd:core"), then the analyzed words of its levels, so a
    query for `projects:memoryd` or for `memoryd` finds it. Cached: a store has few distinct
    scopes and every indexed memory repeats them."""
    levels = scope.lower().split(":")
    tokens = [":".join(levels[: i + 1]) for i in range(1, len(levels))]
    tokens += [term for level in levels for term in text.analyze(level)]
    return tuple(dict.fromkeys(tokens))


def content_terms(content: str) -> list[str]:
    """Indexed terms of `content`, in order (`text.analyze`: stems, identifiers whole and split)."""
    return text.analyze(content)


def query_tokens(query: str) -> list[str]:
    """Distinct terms the caller typed (no equivalents): what a snippet looks for."""
    return [term for term, weight, _ in text.query_terms(query) if weight == 1.0]


_PAIR_TYPE = "I"
_PAIR_BYTES = 2 * array(_PAIR_TYPE).itemsize


_PACKED = (bytes, bytearray)  # a posting as restored (bytes), or restored and then added to
ContentPosting = dict[str, int] | bytearray | int  # see SearchIndex.__init__
_END_TYPE = "Q"  # where each stored content posting ends in the snapshot's one blob of them
_TERM_SEP = "\n"  # joins the snapshot's terms; the analyzer never puts whitespace in a term
_PAIR_REMAINDER = bytes(b % _PAIR_BYTES for b in range(256))  # 256 % 8 == 0: a low byte's is the end's


def _unpack(packed: bytes | bytearray) -> array[int]:
    pairs = array(_PAIR_TYPE)
    pairs.frombytes(packed)
    return pairs


def _array(typecode: str, packed: Any) -> array[int]:
    if type(packed) is not bytes:
        raise TypeError("a snapshot column is not packed")
    column = array(typecode)
    column.frombytes(packed)  # ValueError unless whole items
    return column


class SearchIndex:
    """BM25 (k1=1.2, b=0.75) over content plus scopes, with Jaccard near-duplicate lookup.

    Content and scope terms keep separate postings (`term -> {doc_id: tf}`) so `similar` can count
    content-only overlaps, while BM25 scores their summed tf against the document length (its
    indexed content terms plus its scope terms).
    Every operation touches only the postings of the terms involved; nothing scans all documents.
    The index keeps no per-document term lists (removal analyzes the text again), and postings
    restored from a snapshot stay packed (slices of one blob) until the term is first used, so a
    start does not rebuild millions of small dicts it may never read (`_docs_of`).
    """

    def __init__(self) -> None:
        # A content posting is a dict once used; until then its number in `_stored` (restored,
        # untouched) or its packed bytes (restored, then added to). Scope postings are few: bytes.
        self._content: dict[str, ContentPosting] = {}
        self._scope: dict[str, dict[str, int] | bytes | bytearray] = {}
        self._stored, self._stored_ends = b"", array(_END_TYPE)
        self._df: dict[str, int] = {}
        self._set_size: dict[str, int] = {}   # doc -> distinct content terms (== len(text.token_set))
        self._length: dict[str, int] = {}
        self._recency: dict[str, str] = {}
        self._total_length = 0
        self._ids: list[str] = []             # what a flat posting's doc numbers refer to

    def __len__(self) -> int:
        return len(self._length)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._length

    def _docs_of(self, postings: dict[str, Any], term: str) -> dict[str, int] | None:
        """`{doc_id: tf}` of `term`, inflating a posting still in its stored packed form."""
        docs = postings.get(term)
        if type(docs) is int:
            docs = self._stored_posting(docs)
        if isinstance(docs, _PACKED):
            ids = self._ids
            pairs = iter(_unpack(docs))
            docs = postings[term] = {ids[i]: tf for i, tf in zip(pairs, pairs)}
        return docs

    def _stored_posting(self, number: int) -> bytes:
        ends = self._stored_ends
        return self._stored[ends[number - 1] if number else 0:ends[number]]

    def _doc_count(self, postings: dict[str, Any], term: str) -> int:
        docs = postings[term]
        if type(docs) is int:
            ends = self._stored_ends
            return (ends[docs] - (ends[docs - 1] if docs else 0)) // _PAIR_BYTES
        return len(docs) // _PAIR_BYTES if type(docs) in _PACKED else len(docs)

    # -- maintenance ---------------------------------------------------------------------------

    def add(
        self, doc_id: str, content: str, scopes: Iterable[str] = (), recency_ts: str = "",
        terms: list[str] | None = None,
    ) -> None:
        """Index `content` and `scopes` under `doc_id` (which must not be indexed already).

        `recency_ts` (ISO-8601, compared as a string) breaks score ties, newer first. `terms`:
        `content_terms(content)`, when the caller analyzed the content already.
        """
        if doc_id in self._length:
            raise ValueError(f"{doc_id} is already indexed: remove it (with its old text) first")
        words = content_terms(content) if terms is None else terms
        content_tf = Counter(words)
        scope_tf = Counter(t for scope in scopes for t in scope_tokens(scope))
        number = len(self._ids)
        self._ids.append(doc_id)
        self._post(self._content, doc_id, number, content_tf)
        self._post(self._scope, doc_id, number, scope_tf)
        for term in content_tf.keys() | scope_tf.keys():
            self._df[term] = self._df.get(term, 0) + 1
        length = len(words) + sum(scope_tf.values())
        self._set_size[doc_id] = len(content_tf)
        self._length[doc_id] = length
        self._total_length += length
        self._recency[doc_id] = recency_ts

    def remove(self, doc_id: str, content: str, scopes: Iterable[str] = ()) -> None:
        """Drop `doc_id`, indexed from `content` and `scopes` (the same text `add` was given: the
        analyzer is deterministic, so it names the same postings); unknown ids are ignored."""
        if doc_id not in self._length:
            return
        content_keys = set(content_terms(content))
        scope_keys = {t for scope in scopes for t in scope_tokens(scope)}
        self._unpost(self._content, doc_id, content_keys)
        self._unpost(self._scope, doc_id, scope_keys)
        for term in content_keys | scope_keys:
            left = self._df[term] - 1
            if left:
                self._df[term] = left
            else:
                del self._df[term]
        self._total_length -= self._length.pop(doc_id)
        del self._recency[doc_id], self._set_size[doc_id]

    def matching(self, query: str) -> set[str]:
        """Every document holding at least one query term (a search's pre-cap total)."""
        found: set[str] = set()
        for term, _, _ in text.query_terms(query):
            for postings in (self._content, self._scope):
                found.update(self._docs_of(postings, term) or ())
        return found

    def set_recency(self, doc_id: str, ts: str) -> None:
        """Update the tie-break timestamp of an indexed document (e.g. after an update)."""
        if doc_id in self._recency:
            self._recency[doc_id] = ts

    def _post(self, postings: dict[str, Any], doc_id: str, number: int, tf: Counter[str]) -> None:
        for term, count in tf.items():
            docs = postings.get(term)
            if docs is None:
                postings[term] = {doc_id: count}
            elif type(docs) is dict:
                docs[doc_id] = count
            else:  # still packed: append the pair (`number` in `_ids`), do not inflate thousands
                if type(docs) is not bytearray:
                    docs = postings[term] = bytearray(self._stored_posting(docs) if type(docs) is int else docs)
                docs += array(_PAIR_TYPE, (number, count)).tobytes()

    def _unpost(self, postings: dict[str, Any], doc_id: str, terms: set[str]) -> None:
        for term in terms:
            docs = self._docs_of(postings, term)
            assert docs is not None, "removal named a term the document was never indexed under"
            del docs[doc_id]
            if not docs:
                del postings[term]

    # -- snapshot (a derived cache; docs/storage.md, "state/") ---------------------------------

    def export_state(self) -> dict[str, Any]:
        """Everything the index holds, as plain lists, dicts and packed columns (the caller encodes
        and stores it).

        Postings are packed as `[doc number, tf, …]` (unsigned 32-bit, native order: the file never
        leaves this machine) against one `ids` list, so each doc id is stored once, not once per
        term it holds. The content postings are one blob with where each ends, in the order of
        `terms`; the scope postings (a handful of terms) are a map of packed postings; `df`
        follows `terms` (content terms, then scope-only ones). Per-document values are lists in
        `ids` order.
        """
        ids = list(self._length)
        position = {doc_id: i for i, doc_id in enumerate(ids)}
        old_ids = self._ids
        same_numbers = ids == old_ids  # nothing removed since the numbering: packed pairs stay valid

        def packed(docs: dict[str, int] | bytes | bytearray | int) -> bytes:
            if type(docs) is int:
                docs = self._stored_posting(docs)
            if type(docs) in _PACKED and same_numbers:
                return bytes(docs)  # type: ignore[arg-type]
            if type(docs) in _PACKED:  # still packed: renumber against the new id list
                pairs = _unpack(docs)  # type: ignore[arg-type]
                pairs[0::2] = array(_PAIR_TYPE, (position[old_ids[x]] for x in pairs[0::2]))
                return pairs.tobytes()
            return array(_PAIR_TYPE, [x for d, tf in docs.items() for x in (position[d], tf)]).tobytes()  # type: ignore[union-attr]

        return {"ids": ids, **self._columns({t: packed(d) for t, d in self._content.items()},
                                            {t: packed(d) for t, d in self._scope.items()}, self._df),
                "set_size": [self._set_size[d] for d in ids], "length": [self._length[d] for d in ids],
                "recency": [self._recency[d] for d in ids]}

    @staticmethod
    def _columns(content: dict[str, bytes], scope: dict[str, bytes], df: dict[str, int]) -> dict[str, Any]:
        """The postings and document frequencies of a snapshot: a start decodes a few large
        objects, not a bytes object and a key per term (110k terms: ~0.2 s)."""
        terms = [*content, *(t for t in scope if t not in content)]
        return {"terms": _TERM_SEP.join(terms), "stored": b"".join(content.values()),
                "stored_ends": array(_END_TYPE, accumulate(map(len, content.values()))).tobytes(),
                "df": array(_PAIR_TYPE, [df[t] for t in terms]).tobytes(), "scope": scope}

    @classmethod
    def build(cls, docs: Iterable[tuple[str, str, Iterable[str], str]],
              progress: Callable[[int], None] | None = None) -> SearchIndex:
        """The index of `docs` ((doc_id, content, scopes, recency_ts) each, ids distinct), built
        straight into the packed form a snapshot restores: what `add` would give, in ~2/3 of the
        time, with no per-term dicts, and a snapshot of it is a copy of its postings (a cold start
        at 100k memories: add 5.9 s + export 1.2 s against build 4.6 s + export ~0.1 s)."""
        content: dict[str, list[int]] = {}
        scope: dict[str, list[int]] = {}
        df: dict[str, int] = {}
        ids: list[str] = []
        set_size: list[int] = []
        length: list[int] = []
        recency: list[str] = []
        for number, (doc_id, words_of, scopes, recency_ts) in enumerate(docs):
            if progress is not None and not number % 10_000:
                progress(number)
            words = content_terms(words_of)
            content_tf = Counter(words)
            scope_tf = Counter(t for s in scopes for t in scope_tokens(s))
            for postings, tf in ((content, content_tf), (scope, scope_tf)):
                for term, count in tf.items():
                    pairs = postings.get(term)
                    if pairs is None:
                        postings[term] = [number, count]
                    else:
                        pairs += (number, count)
            for term in content_tf.keys() | scope_tf.keys():
                df[term] = df.get(term, 0) + 1
            ids.append(doc_id)
            set_size.append(len(content_tf))
            length.append(len(words) + sum(scope_tf.values()))
            recency.append(recency_ts)
        return cls.from_state({
            "ids": ids, "set_size": set_size, "length": length, "recency": recency,
            **cls._columns({t: array(_PAIR_TYPE, v).tobytes() for t, v in content.items()},
                           {t: array(_PAIR_TYPE, v).tobytes() for t, v in scope.items()}, df)})

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SearchIndex:
        """The index `export_state` described; ValueError/TypeError/KeyError/IndexError if the state
        is malformed (the caller then rebuilds from the records). Postings stay packed until used."""
        index = cls()
        ids = state["ids"]
        if not (isinstance(ids, list) and all(type(d) is str for d in ids)):
            raise TypeError("ids is not a list of strings")
        n = len(ids)
        for name in ("set_size", "length", "recency"):
            if not isinstance(state[name], list) or len(state[name]) != n:
                raise ValueError(f"{name} does not match ids")
        index._content, index._df = cls._restore_terms(state)
        index._stored, index._stored_ends = state["stored"], _array(_END_TYPE, state["stored_ends"])
        scope = state["scope"]
        if not (isinstance(scope, dict) and all(type(v) is bytes and len(v) % _PAIR_BYTES == 0 for v in scope.values())):
            raise TypeError("a scope posting is not packed pairs")
        index._scope = scope
        index._ids = ids = list(map(sys.intern, ids))  # shared with the records' ids (100k strings)
        index._set_size = dict(zip(ids, state["set_size"], strict=True))
        index._length = dict(zip(ids, state["length"], strict=True))
        index._recency = dict(zip(ids, state["recency"], strict=True))
        index._total_length = sum(index._length.values())
        return index

    @staticmethod
    def _restore_terms(state: dict[str, Any]) -> tuple[dict[str, ContentPosting], dict[str, int]]:
        """(content term -> its number among the stored postings, term -> df), after checking
        that the columns agree: every posting whole pairs, in order, inside the blob."""
        joined, stored = state["terms"], state["stored"]
        if type(joined) is not str or type(stored) is not bytes:
            raise TypeError("the terms or the postings are not packed")
        terms = joined.split(_TERM_SEP) if joined else []
        ends, df = _array(_END_TYPE, state["stored_ends"]), _array(_PAIR_TYPE, state["df"])
        if len(df) != len(terms) or len(ends) > len(terms) or (ends[-1] if ends else 0) != len(stored):
            raise ValueError("the term columns do not match")
        # Every end whole pairs — read off each end's low byte, at C speed — and none before the
        # one it follows.
        low_bytes = state["stored_ends"][0 if sys.byteorder == "little" else ends.itemsize - 1::ends.itemsize]
        if low_bytes.translate(_PAIR_REMAINDER).strip(b"\0") or not all(map(le, ends, ends[1:])):
            raise ValueError("a stored posting is not whole pairs")
        content = cast(dict[str, ContentPosting], dict(zip(terms, range(len(ends)))))
        df_of = dict(zip(terms, df))
        if len(content) != len(ends) or len(df_of) != len(terms):
            raise ValueError("a term is listed twice")
        return content, df_of

    # -- BM25 search ---------------------------------------------------------------------------

    def search(
        self, query: str, limit: int, accept: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float]]:
        """Up to `limit` `(doc_id, score)` pairs, best first, among docs `accept` lets through.

        `bm25` picks the best `RERANK_DEPTH` (or `limit`, if more) candidates; each score is then
        multiplied by `COVERAGE_BASE + coverage`, so of two documents BM25 rates alike the one
        holding more of what was asked comes first (a coordination factor: a memory repeating one
        query word should not beat one holding all of them). Equal rounded scores put the newer
        recency first, then the larger doc_id.
        """
        return [(doc_id, score) for doc_id, score, _ in self.ranked_hits(query, limit, accept)]

    def ranked_hits(
        self, query: str, limit: int, accept: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, float]]:
        """`search`'s hits as `(doc_id, score, relevance)`: the coverage the reranking computed is
        each hit's `relevance` too, so a caller that shows both does not compute it twice."""
        rows = text.query_terms(query)
        hits = self.bm25(query, max(limit, RERANK_DEPTH), accept)
        share = self._coverage(rows, [doc_id for doc_id, _ in hits])
        final = [(round(score * (COVERAGE_BASE + share[d]), SCORE_DIGITS), self._recency[d], d)
                 for d, score in hits]
        final.sort(reverse=True)
        return [(d, score, round(share[d], 2)) for score, _, d in final[:limit]]

    def bm25(
        self, query: str, limit: int, accept: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float]]:
        """Up to `limit` `(doc_id, BM25 score)` pairs, best first, among docs `accept` lets through.

        Scores are rounded to 4 decimals; equal rounded scores put the newer recency first, then
        the larger doc_id. `accept` is called lazily in rank order, so a permissive filter costs
        about `limit` calls rather than one per matching document.
        """
        terms = [(t, w) for t, w, _ in text.query_terms(query) if t in self._df]
        if limit <= 0 or not terms:
            return []
        hits: list[tuple[str, float]] = []
        for doc_id, score in self._ranked(terms, limit + RANK_SLACK):
            if accept is None or accept(doc_id):
                hits.append((doc_id, score))
                if len(hits) >= limit:
                    break
        return hits

    def _ranked(self, terms: list[tuple[str, float]], depth: int) -> Iterator[tuple[str, float]]:
        """Yield `(doc_id, rounded score)` in final order, computing only as much as is consumed.

        Scoring is pruned for the best `depth` documents; each round emits the part of the order
        that is already certain, then ranks deeper (more candidates, then a less pruned scoring).
        """
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

    def _certain_prefix(
        self, scores: dict[str, float], fetch: int, floor: float | None
    ) -> tuple[list[tuple[float, str, str]], bool]:
        """The start of the final order that `scores` already fixes, and whether it is all of it.

        Rows are `(rounded score, recency, doc_id)`. Of the `fetch` best raw scores, a row is
        certain only if its rounded score beats the last one fetched (a tie might hide outside the
        batch) and beats `floor`, the rounded bound on every unscored document. `covered` says
        that fetching more from `scores` cannot extend the prefix.
        """
        if fetch >= len(scores):
            batch, cut = list(scores.items()), None
        else:
            batch = heapq.nlargest(fetch, scores.items(), key=itemgetter(1))
            cut = round(batch[-1][1], SCORE_DIGITS)
        edges = [e for e in (cut, floor) if e is not None]
        rows = [(round(s, SCORE_DIGITS), self._recency[d], d) for d, s in batch]
        if edges:
            edge = max(edges)
            rows = [row for row in rows if row[0] > edge]
        rows.sort(reverse=True)
        return rows, cut is None or (floor is not None and cut <= floor)

    def _score(self, terms: list[tuple[str, float]], depth: int) -> tuple[dict[str, float], float]:
        """Exact BM25 scores of every document that could rank in the best `depth`.

        Returns `(scores, bound)`: documents absent from `scores` score below `bound` (0.0 when
        none is absent). Terms go rarest first; once the `depth`-th best partial score beats what
        all remaining terms could add (each adds less than its idf * (k1 + 1)), no unseen document
        can catch up, so the remaining — common, long — posting lists only update known
        candidates instead of being walked (MaxScore pruning).
        """
        n_docs = len(self._length)
        avg_length = self._total_length / n_docs or 1.0
        # tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), with the constants hoisted.
        c_fixed = BM25_K1 * (1 - BM25_B)
        c_length = BM25_K1 * BM25_B / avg_length
        length = self._length
        weighted = sorted(
            ((w * self._idf(t, n_docs) * (BM25_K1 + 1), self._term_tf(t)) for t, w in terms),
            key=itemgetter(0),
            reverse=True,
        )
        scores: dict[str, float] = {}
        for i, (weight, tf_by_doc) in enumerate(weighted):
            rest = sum(w for w, _ in weighted[i:]) * (1 + 1e-9)
            if i and len(scores) >= depth and self._beats(scores, depth, rest, weighted[:i]):
                for later_weight, later_tf in weighted[i:]:
                    self._update_known(scores, later_weight, later_tf, c_fixed, c_length)
                return scores, rest
            get = scores.get
            for d, tf in tf_by_doc.items():
                scores[d] = get(d, 0.0) + weight * tf / (tf + c_fixed + c_length * length[d])
        return scores, 0.0

    @staticmethod
    def _beats(
        scores: dict[str, float], depth: int, rest: float, done: list[tuple[float, dict[str, int]]]
    ) -> bool:
        """Whether the `depth`-th best score so far beats `rest`, the most an unseen doc can get."""
        if sum(w for w, _ in done) <= rest:
            return False  # no partial score can exceed the weights already spent; skip the heap
        return heapq.nlargest(depth, scores.values())[-1] > rest

    def _update_known(
        self, scores: dict[str, float], weight: float, tf_by_doc: dict[str, int],
        c_fixed: float, c_length: float,
    ) -> None:
        """Add one term's BM25 contribution to the documents already in `scores` only."""
        length = self._length
        if len(tf_by_doc) < len(scores):
            pairs = [(d, tf) for d, tf in tf_by_doc.items() if d in scores]
        else:
            pairs = [(d, tf_by_doc[d]) for d in scores if d in tf_by_doc]
        for d, tf in pairs:
            scores[d] += weight * tf / (tf + c_fixed + c_length * length[d])

    def relevance(self, query: str, doc_ids: Iterable[str]) -> dict[str, float]:
        """How much of what the query asks each document holds, 0..1 (2 decimals).

        Each term the caller typed counts with its idf (a term no document holds counts as the
        rarest); a document gets full credit for a term it holds and `EXPANSION_WEIGHT` for an
        equivalent instead. Unlike a BM25 score this is comparable across queries and store
        sizes, so a caller (the prompt hook) can keep only hits above a fixed threshold.
        """
        share = self._coverage(text.query_terms(query), list(doc_ids))
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
        """BM25 idf in its non-negative form: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self._df[term]
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))

    def _term_tf(self, term: str) -> dict[str, int]:
        """`{doc_id: tf}` for `term` counting content and scopes together."""
        content = self._docs_of(self._content, term)
        scope = self._docs_of(self._scope, term)
        if scope is None:
            return content or {}
        if content is None:
            return scope
        merged = dict(content)
        for d, tf in scope.items():
            merged[d] = merged.get(d, 0) + tf
        return merged

    # -- near duplicates -----------------------------------------------------------------------

    def similar(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        """Docs whose content token set has Jaccard >= `threshold` with `tokens`, best first.

        `tokens` must come from `text.token_set`. Similarities are rounded to 4 decimals; ties
        put newer recency first. Candidates are the docs holding one of the rarest tokens, then
        checked exactly. At or above `EXACT_SIMILARITY` (the duplicate band, by default) this is
        exact prefix filtering: a doc reaching it must share one of the
        `|tokens| - ceil(EXACT_SIMILARITY * |tokens|) + 1` rarest tokens. Below it (the
        `related` band) an exact prefix would admit nearly every doc sharing a common word —
        most of the write path's time in a large store — so the prefix is capped at
        `RELATED_PREFIX` tokens: a doc sharing 40 % of a memory's words but none of its rarest
        few is missed, in exchange for a cost that does not grow with the store.
        """
        size = len(tokens)
        if size == 0:
            return []
        postings, floor = self._content, threshold - 1e-12
        present = sorted((t for t in tokens if t in postings), key=lambda t: self._doc_count(postings, t))
        exact_at = max(threshold, EXACT_SIMILARITY)
        exact_prefix = size - max(1, math.ceil(exact_at * size - 1e-9)) + 1 - (size - len(present))
        capped = size - max(1, math.ceil(threshold * size - 1e-9)) + 1 - (size - len(present))
        prefix = max(exact_prefix, min(capped, RELATED_PREFIX))
        if prefix <= 0:
            return []
        overlap = self._count_overlaps(present, prefix, lambda other: _least_shared(size, other, floor))
        found = []
        for doc_id, shared in overlap.items():
            jaccard = shared / (size + self._set_size[doc_id] - shared)
            if jaccard >= floor:
                found.append((round(jaccard, SIMILARITY_DIGITS), self._recency[doc_id], doc_id))
        found.sort(reverse=True)
        return [(doc_id, sim) for sim, _, doc_id in found]

    def _count_overlaps(self, present: list[str], prefix: int, least: Callable[[int], int]) -> dict[str, int]:
        """Shared-token counts of the docs holding one of the first `prefix` terms of `present`
        that can still reach the threshold. `least(n)`: the fewest tokens a doc of `n` distinct
        tokens must share. Before each later term, a doc that would fall short even if it held
        every term left is dropped: most candidates share one rare word and little else, so the
        walk soon covers tens of docs, not thousands (the `related` band's cost at 100k)."""
        overlap: dict[str, int] = {}
        for term in present[:prefix]:
            for d in self._docs_of(self._content, term) or ():
                overlap[d] = overlap.get(d, 0) + 1
        rest = present[prefix:]
        sizes, need = self._set_size, _ByTokens(least)
        # The largest shortfall: while more terms than that are left, nobody can be dropped.
        short = max(need[sizes[d]] - n for d, n in overlap.items()) if len(overlap) >= PRUNE_FROM else 0
        for left, term in zip(range(len(rest), 0, -1), rest):
            if short > left:
                overlap = {d: n for d, n in overlap.items() if n + left >= need[sizes[d]]}
                short = max((need[sizes[d]] - n for d, n in overlap.items()), default=0)
            if not overlap:
                break
            docs = self._docs_of(self._content, term) or {}
            # Walk whichever side is smaller: a common term's postings can dwarf the candidates.
            if len(docs) < len(overlap):
                for d in docs:
                    if d in overlap:
                        overlap[d] += 1
            else:
                for d in overlap:
                    if d in docs:
                        overlap[d] += 1
        return overlap


class _ByTokens(dict[int, int]):
    """`least(n)` by `n`, each worked out once per call of `similar` (sets have few sizes)."""

    def __init__(self, least: Callable[[int], int]) -> None:
        super().__init__()
        self.least = least

    def __missing__(self, tokens: int) -> int:
        self[tokens] = found = self.least(tokens)
        return found


def _least_shared(size: int, other: int, floor: float) -> int:
    """The fewest shared tokens that give two sets of `size` and `other` tokens a Jaccard
    similarity of at least `floor` (more than either holds when none can)."""
    shared = max(1, math.ceil(floor * (size + other) / (1 + floor)) - 1)
    while shared / (size + other - shared) < floor:  # the same test `similar` applies at the end
        shared += 1
    return shared
