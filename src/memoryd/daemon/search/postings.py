"""The search index's postings (`term -> {doc_id: tf}`; content and scope terms apart, as duplicates
count content overlaps only), kept current on every write, and their snapshot. Restored postings
stay packed until a term is first used (`_docs_of`): a start does not build millions of dicts.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import accumulate
from operator import le
from typing import Any, Self, cast

from memoryd.daemon.search.text import analyze, query_terms


@lru_cache(maxsize=4096)
def scope_tokens(scope: str) -> tuple[str, ...]:
    """Index terms for one scope: every `:`-prefix of two or more levels, whole
    ("projects:memoryd", "projects:memoryd:core"), then the analyzed words of its levels."""
    levels = scope.lower().split(":")
    tokens = [":".join(levels[: i + 1]) for i in range(1, len(levels))]
    tokens += [term for level in levels for term in analyze(level)]
    return tuple(dict.fromkeys(tokens))


content_terms = analyze  # a memory's indexed content terms, in order

_PAIR_TYPE = "I"
_PAIR_BYTES = 2 * array(_PAIR_TYPE).itemsize
_PACKED = (bytes, bytearray)  # a posting as restored (bytes), or restored and then added to
ContentPosting = dict[str, int] | bytearray | int  # see Postings.__init__
_END_TYPE = "Q"  # where each stored content posting ends in the snapshot's one blob of them
_TERM_SEP = "\n"  # joins the snapshot's terms; the analyzer never puts whitespace in a term
_PAIR_REMAINDER = bytes(b % _PAIR_BYTES for b in range(256))  # 256 % 8 == 0: a low byte's is the end's


def _unpack(packed: bytes | bytearray, typecode: str = _PAIR_TYPE) -> array[int]:
    """A packed posting or snapshot column (TypeError unless bytes, ValueError unless whole items)."""
    column = array(typecode)
    column.frombytes(packed)
    return column


def _counted(words: list[str], scopes: Iterable[str], df: dict[str, int]) -> tuple[Counter[str], Counter[str], int]:
    """One document's content and scope term counts and its length; counts it into `df` too."""
    content_tf, scope_tf = Counter(words), Counter(t for scope in scopes for t in scope_tokens(scope))
    for term in content_tf.keys() | scope_tf.keys():
        df[term] = df.get(term, 0) + 1
    return content_tf, scope_tf, len(words) + sum(scope_tf.values())


class Postings:
    """Content and scope postings, and the per-document numbers ranking needs."""

    def __init__(self) -> None:
        # A content posting is a dict once used; until then its number in `_stored` (restored,
        # untouched) or its packed bytes (restored, then added to).
        self._content: dict[str, ContentPosting] = {}
        self._scope: dict[str, dict[str, int] | bytes | bytearray] = {}
        self._stored, self._stored_ends = b"", array(_END_TYPE)
        self._df: dict[str, int] = {}
        self._set_size: dict[str, int] = {}   # doc -> distinct content terms
        self._length: dict[str, int] = {}
        self._recency: dict[str, str] = {}
        self._total_length = 0
        self._ids: list[str] = []             # what a packed posting's doc numbers refer to

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

    def add(self, doc_id: str, content: str, scopes: Iterable[str] = (), recency_ts: str = "",
            terms: list[str] | None = None) -> None:
        """Index `content` and `scopes` under a new `doc_id`; `recency_ts` (ISO-8601) breaks score
        ties, newer first; `terms`: `content_terms(content)` if the caller has them already."""
        if doc_id in self._length:
            raise ValueError(f"{doc_id} is already indexed: remove it (with its old text) first")
        content_tf, scope_tf, length = _counted(analyze(content) if terms is None else terms, scopes, self._df)
        number = len(self._ids)
        self._ids.append(doc_id)
        self._post(self._content, doc_id, number, content_tf)
        self._post(self._scope, doc_id, number, scope_tf)
        self._set_size[doc_id], self._length[doc_id], self._recency[doc_id] = len(content_tf), length, recency_ts
        self._total_length += length

    def remove(self, doc_id: str, content: str, scopes: Iterable[str] = ()) -> None:
        """Drop `doc_id`, given the text `add` indexed (it names the same postings); unknown ids are ignored."""
        if doc_id not in self._length:
            return
        content_keys = set(analyze(content))
        scope_keys = {t for scope in scopes for t in scope_tokens(scope)}
        self._unpost(self._content, doc_id, content_keys)
        self._unpost(self._scope, doc_id, scope_keys)
        for term in content_keys | scope_keys:
            self._df[term] -= 1
            if not self._df[term]:
                del self._df[term]
        self._total_length -= self._length.pop(doc_id)
        del self._recency[doc_id], self._set_size[doc_id]

    def matching(self, query: str) -> set[str]:
        """Every document holding at least one query term (a search's pre-cap total)."""
        found: set[str] = set()
        for term, _, _ in query_terms(query):
            for postings in (self._content, self._scope):
                found.update(self._docs_of(postings, term) or ())
        return found

    def _post(self, postings: dict[str, Any], doc_id: str, number: int, tf: Counter[str]) -> None:
        for term, count in tf.items():
            docs = postings.get(term)
            if docs is None:
                postings[term] = {doc_id: count}
            elif type(docs) is dict:
                docs[doc_id] = count
            else:  # still packed: append the pair rather than inflate a long posting
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

    def export_state(self) -> dict[str, Any]:
        """Everything the index holds as lists and packed columns: postings are `[doc number, tf, …]`
        (uint32, native order: the file never leaves this machine) against `ids`; the content ones
        one blob ending at `stored_ends`, in `terms` order; `df` follows `terms`."""
        ids = list(self._length)
        position = {doc_id: i for i, doc_id in enumerate(ids)}
        old_ids = self._ids
        same_numbers = ids == old_ids  # nothing removed: packed pairs stay valid

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
        """A snapshot's postings and dfs as a few large objects, quick to decode (docs/benchmark.md)."""
        terms = [*content, *(t for t in scope if t not in content)]
        return {"terms": _TERM_SEP.join(terms), "stored": b"".join(content.values()),
                "stored_ends": array(_END_TYPE, accumulate(map(len, content.values()))).tobytes(),
                "df": array(_PAIR_TYPE, [df[t] for t in terms]).tobytes(), "scope": scope}

    @classmethod
    def build(cls, docs: Iterable[tuple[str, str, Iterable[str], str]],
              progress: Callable[[int], None] | None = None) -> Self:
        """What `add` would give for `docs` ((doc_id, content, scopes, recency_ts), ids distinct),
        built straight into the packed form a snapshot restores (docs/benchmark.md)."""
        content: defaultdict[str, list[int]] = defaultdict(list)
        scope: defaultdict[str, list[int]] = defaultdict(list)
        df: dict[str, int] = {}
        ids: list[str] = []
        set_size: list[int] = []
        length: list[int] = []
        recency: list[str] = []
        for number, (doc_id, words_of, scopes, recency_ts) in enumerate(docs):
            if progress is not None and not number % 10_000:
                progress(number)
            content_tf, scope_tf, doc_length = _counted(analyze(words_of), scopes, df)
            for postings, tf in ((content, content_tf), (scope, scope_tf)):
                for term, count in tf.items():
                    postings[term] += (number, count)
            ids.append(doc_id)
            set_size.append(len(content_tf))
            length.append(doc_length)
            recency.append(recency_ts)
        return cls.from_state({"ids": ids, "set_size": set_size, "length": length, "recency": recency,
                               **cls._columns({t: array(_PAIR_TYPE, v).tobytes() for t, v in content.items()},
                                              {t: array(_PAIR_TYPE, v).tobytes() for t, v in scope.items()}, df)})

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Self:
        """The index `export_state` described; ValueError/TypeError/KeyError/IndexError if the state
        is malformed (the caller then rebuilds from the records)."""
        ids, joined, stored, scope = state["ids"], state["terms"], state["stored"], state["scope"]
        if not (isinstance(ids, list) and all(type(d) is str for d in ids)):
            raise TypeError("ids is not a list of strings")
        columns = [state[name] for name in ("set_size", "length", "recency")]
        if not all(isinstance(column, list) for column in columns):
            raise TypeError("a per-document column is not a list")
        if type(joined) is not str or type(stored) is not bytes:
            raise TypeError("the terms or the postings are not packed")
        terms = joined.split(_TERM_SEP) if joined else []
        ends, df = _unpack(state["stored_ends"], _END_TYPE), _unpack(state["df"])
        if len(df) != len(terms) or len(ends) > len(terms) or (ends[-1] if ends else 0) != len(stored):
            raise ValueError("the term columns do not match")
        # Every end whole pairs (read off each end's low byte, at C speed), and none before the last.
        low_bytes = state["stored_ends"][0 if sys.byteorder == "little" else ends.itemsize - 1::ends.itemsize]
        if low_bytes.translate(_PAIR_REMAINDER).strip(b"\0") or not all(map(le, ends, ends[1:])):
            raise ValueError("a stored posting is not whole pairs")
        if not (isinstance(scope, dict)
                and all(type(v) is bytes and len(v) % _PAIR_BYTES == 0 for v in scope.values())):
            raise TypeError("a scope posting is not packed pairs")
        index = cls()
        # A content term starts as its number among the stored postings.
        index._content = cast(dict[str, ContentPosting], dict(zip(terms, range(len(ends)))))
        index._df = dict(zip(terms, df))
        if len(index._content) != len(ends) or len(index._df) != len(terms):
            raise ValueError("a term is listed twice")
        index._stored, index._stored_ends, index._scope = stored, ends, scope
        index._ids = ids = list(map(sys.intern, ids))  # shared with the records' ids (100k strings)
        index._set_size, index._length, index._recency = (dict(zip(ids, c, strict=True)) for c in columns)
        index._total_length = sum(index._length.values())
        return index
