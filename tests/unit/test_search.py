"""Unit tests for the incremental BM25 index: ranking, maintenance, filters, near duplicates."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from memoryd.daemon.search import SearchIndex, content_terms, scope_tokens, text
from token_sets import similarity, token_set

# A labelled fixture: each query below has exactly one memory that must rank first.
MEMORIES: dict[str, tuple[str, list[str]]] = {
    "m01": ("The daemon listens on an ipc socket inside a 0700 runtime directory.",
            ["projects:memoryd", "topic:security"]),
    "m02": ("Episodes older than the TTL are pruned by the reaper every ten minutes.",
            ["projects:memoryd"]),
    "m03": ("Use pytest with -x and --tb=short when running the unit tests locally.",
            ["user:preferences"]),
    "m04": ("The checkout page of the webshop retries card payments twice before failing.",
            ["projects:webshop"]),
    "m05": ("Frontmatter is parsed with libyaml when available, falling back to pure Python.",
            ["projects:memoryd", "topic:storage"]),
    "m06": ("The user prefers tabs over spaces in Makefiles and Go code.", ["user:preferences"]),
    "m07": ("Postgres connection pooling goes through pgbouncer in transaction mode.",
            ["projects:webshop", "topic:database"]),
    "m08": ("Search ranks memories with BM25 and breaks ties by recency.", ["projects:memoryd"]),
    "m09": ("Release builds are signed with the team's GPG key in CI before upload.",
            ["topic:release"]),
    "m10": ("The bridge speaks stdio JSON-RPC and never imports daemon code.", ["projects:memoryd"]),
    "m11": ("Durable writes fsync the file and its directory before acknowledging.",
            ["projects:memoryd", "topic:storage"]),
    "m12": ("Kubernetes liveness probes hit /healthz every five seconds.",
            ["projects:webshop", "topic:ops"]),
}

QUERIES = [
    ("ipc socket runtime directory permissions", "m01"),
    ("when does the reaper prune old episodes", "m02"),
    ("how should I run pytest", "m03"),
    ("card payment retries on checkout", "m04"),
    ("yaml frontmatter parser", "m05"),
    ("tabs or spaces", "m06"),
    ("pgbouncer pooling mode", "m07"),
    ("fsync durability of writes", "m11"),
    ("bm25 tie recency ranking", "m08"),
    ("healthz probe interval", "m12"),
]


@pytest.fixture()
def index() -> SearchIndex:
    idx = SearchIndex()
    for n, (doc_id, (content, scopes)) in enumerate(MEMORIES.items()):
        idx.add(doc_id, content, scopes, f"2026-01-{n + 1:02d}T00:00:00Z")
    return idx


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_the_labelled_memory_ranks_first(index: SearchIndex, query: str, expected: str) -> None:
    assert index.search(query, 3)[0][0] == expected


def test_results_are_best_first_with_scores_rounded_to_four_places(index: SearchIndex) -> None:
    hits = index.search("daemon socket storage memoryd", 10)
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score == round(score, 4) and score > 0 for score in scores)


def test_scopes_are_searchable_by_word_and_whole(index: SearchIndex) -> None:
    by_word = {doc for doc, _ in index.search("webshop", 10)}
    whole = {doc for doc, _ in index.search("projects:webshop", 3)}
    assert by_word == whole == {"m04", "m07", "m12"}


def test_limit_caps_results_and_unknown_or_empty_queries_find_nothing(index: SearchIndex) -> None:
    assert len(index.search("memoryd", 2)) == 2
    assert index.search("zzzunknownzzz", 5) == []
    assert index.search("the of and", 5) == []
    assert index.search("daemon", 0) == []
    assert SearchIndex().search("daemon", 5) == []


def test_remove_drops_a_document_from_results_and_count(index: SearchIndex) -> None:
    index.remove("m07", *MEMORIES["m07"])
    assert len(index) == 11
    assert all(doc != "m07" for doc, _ in index.search("pgbouncer pooling", 5))
    index.remove("m07", *MEMORIES["m07"])  # unknown ids are ignored
    assert len(index) == 11


def test_re_adding_an_id_after_removing_its_old_text_replaces_it(index: SearchIndex) -> None:
    with pytest.raises(ValueError, match="already indexed"):
        index.add("m06", "Indent with four spaces everywhere.", ["user:preferences"], "2026-02-01")
    index.remove("m06", *MEMORIES["m06"])
    index.add("m06", "Indent with four spaces everywhere.", ["user:preferences"], "2026-02-01")
    assert len(index) == 12
    assert all(doc != "m06" for doc, _ in index.search("makefiles tabs", 5))
    assert index.search("indent four spaces", 1)[0][0] == "m06"


def test_equal_scores_put_the_newer_memory_first() -> None:
    idx = SearchIndex()
    idx.add("old", "cache invalidation rules", [], "2026-01-01T00:00:00Z")
    idx.add("new", "cache invalidation rules", [], "2026-03-01T00:00:00Z")
    assert [doc for doc, _ in idx.search("cache", 2)] == ["new", "old"]


def test_accept_filters_candidates_and_is_called_lazily(index: SearchIndex) -> None:
    calls: list[str] = []

    def only_memoryd(doc_id: str) -> bool:
        calls.append(doc_id)
        return "projects:memoryd" in MEMORIES[doc_id][1]

    hits = index.bm25("memoryd daemon webshop storage", 2, only_memoryd)
    assert len(hits) == 2
    assert all("projects:memoryd" in MEMORIES[doc][1] for doc, _ in hits)
    assert len(calls) < len(index.bm25("memoryd daemon webshop storage", 12))
    assert all("projects:memoryd" in MEMORIES[doc][1]
               for doc, _ in index.search("memoryd daemon webshop storage", 2, only_memoryd))


def test_accept_rejecting_everything_returns_nothing(index: SearchIndex) -> None:
    assert index.search("memoryd", 5, lambda _doc: False) == []


def test_similar_finds_a_near_duplicate_and_not_unrelated_docs(index: SearchIndex) -> None:
    draft = token_set("The daemon listens on an ipc socket inside the 0700 runtime dir.")
    found = dict(index.similar(draft, 0.5))
    assert list(found) == ["m01"]
    assert found["m01"] == round(similarity(draft, token_set(MEMORIES["m01"][0])), 4)
    assert index.similar(token_set("completely different words about gardening"), 0.4) == []
    assert index.similar(frozenset(), 0.4) == []


def test_similar_ignores_scopes_and_ranks_best_first() -> None:
    idx = SearchIndex()
    idx.add("a", "alpha beta gamma delta", ["projects:alpha"], "1")
    idx.add("b", "alpha beta gamma epsilon", [], "2")
    idx.add("c", "alpha zeta eta theta", [], "3")
    assert idx.similar(token_set("alpha beta gamma delta"), 0.3) == [("a", 1.0), ("b", 0.6)]
    assert idx.similar(frozenset({"projects"}), 0.1) == []


def test_tokenizers_split_scopes_and_keep_whole_scopes() -> None:
    assert scope_tokens("projects:memoryd:core-io") == (
        "projects:memoryd", "projects:memoryd:core-io", "project", "memoryd", "core-io", "core", "io"
    )
    assert query_tokens("The projects:memoryd DAEMON") == ["project", "memoryd", "daemon",
                                                          "projects:memoryd"]
    assert content_terms("A daemon, the socket_path x") == ["daemon", "socket_path", "socket", "path"]


def query_tokens(query: str) -> list[str]:
    """The distinct terms a user typed (no equivalents), as the reference ranking reads them."""
    return [term for term, weight, _ in text.query_terms(query) if weight == 1.0]


def _naive_ranking(
    docs: dict[str, tuple[str, list[str], str]], query: str, limit: int
) -> list[tuple[str, float]]:
    """BM25 written the obvious way, as the reference the pruned index must agree with."""
    terms = {d: content_terms(c) + [t for s in sc for t in scope_tokens(s)]
             for d, (c, sc, _) in docs.items()}
    avg = sum(map(len, terms.values())) / len(docs) or 1.0
    rows = []
    for d, toks in terms.items():
        score, hit = 0.0, False
        for q in query_tokens(query):
            df = sum(q in t for t in terms.values())
            if q in toks:
                tf, hit = toks.count(q), True
                idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(toks) / avg))
        if hit:
            rows.append((round(score, 4), docs[d][2], d))
    rows.sort(reverse=True)
    return [(d, s) for s, _, d in rows[:limit]]


def test_pruned_search_agrees_with_a_naive_bm25_on_random_corpora() -> None:
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(40)]
    weights = [1 / (r + 1) for r in range(40)]  # skewed, so long posting lists get pruned
    for _ in range(40):
        idx, docs = SearchIndex(), {}
        for i in range(rng.randint(1, 150)):
            content = " ".join(rng.choices(vocab, weights, k=rng.randint(1, 12)))
            scopes = rng.choice([[], ["projects:w1"], ["topic:w3-w4"]])
            ts = f"2026-01-0{rng.randint(1, 3)}"
            docs[f"d{i}"] = (content, scopes, ts)
            idx.add(f"d{i}", content, scopes, ts)
        for _ in range(10):
            query = " ".join(rng.choices(vocab, weights, k=rng.randint(1, 5)))
            limit = rng.randint(1, 8)
            assert idx.bm25(query, limit) == _naive_ranking(docs, query, limit)


def test_a_memory_holding_every_asked_word_beats_one_repeating_a_single_word() -> None:
    index = SearchIndex()
    index.add("A" * 26, "Redis redis redis: the redis cache warms redis keys at start.", recency_ts="2")
    index.add("B" * 26, "The Redis URL for the celery broker is set by REDIS_URL in settings.", recency_ts="1")
    assert index.bm25("redis celery broker url", 1)[0][0] in {"A" * 26, "B" * 26}
    assert index.search("redis celery broker url", 1)[0][0] == "B" * 26


def test_similar_is_exact_in_the_duplicate_band_on_random_corpora() -> None:
    import random


    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(60)]
    for _ in range(20):
        idx = SearchIndex()
        sets = {}
        for n in range(80):
            words = rng.sample(vocab, rng.randint(4, 12))
            doc_id = f"{n:026d}"
            idx.add(doc_id, " ".join(words))
            sets[doc_id] = token_set(" ".join(words))
        probe = token_set(" ".join(rng.sample(vocab, rng.randint(4, 12))))
        naive = sorted(d for d, s in sets.items() if similarity(probe, s) >= 0.7)
        assert sorted(d for d, _ in idx.similar(probe, 0.7)) == naive
        related = {d for d, _ in idx.similar(probe, 0.4)}
        assert set(naive) <= related  # the related call never loses a duplicate


def test_dropping_candidates_that_cannot_reach_the_threshold_changes_no_answer(monkeypatch) -> None:
    """`similar` drops a candidate once the terms left cannot lift it to the threshold; on
    corpora large enough for that to run (hundreds of candidates), every answer equals the one
    counted without dropping, and the duplicate band still equals the naive scan."""
    from memoryd.daemon.search import duplicates

    rng = random.Random(23)
    vocab = [f"w{i}" for i in range(90)]
    idx, sets = SearchIndex(), {}
    for n in range(1500):
        words = " ".join(rng.sample(vocab[: rng.choice((30, 90))], rng.randint(4, 16)))
        idx.add(f"{n:026d}", words)
        sets[f"{n:026d}"] = token_set(words)
    probes = [token_set(" ".join(rng.sample(vocab, rng.randint(4, 16)))) for _ in range(60)]
    pruned = {(i, t): idx.similar(p, t) for i, p in enumerate(probes) for t in (0.2, 0.4, 0.7)}
    monkeypatch.setattr(duplicates, "PRUNE_FROM", 10**9)
    assert pruned == {(i, t): idx.similar(p, t) for i, p in enumerate(probes) for t in (0.2, 0.4, 0.7)}
    assert any(len(found) > 1 for found in pruned.values())
    for i, probe in enumerate(probes):
        naive = sorted(d for d, s in sets.items() if similarity(probe, s) >= 0.7)
        assert sorted(d for d, _ in pruned[(i, 0.7)]) == naive


def test_an_index_restored_from_its_exported_state_answers_exactly_like_the_original(tmp_path) -> None:
    import random

    from memoryd.daemon.memories import parse_cache as cache

    rng = random.Random(5)
    vocab = [f"term{i}" for i in range(80)] + ["stripe_client.py", "SENTRY_DSN", "deploying", "k8s"]
    index = SearchIndex()
    texts = {f"{n:026d}": " ".join(rng.sample(vocab, rng.randint(3, 14))) for n in range(120)}
    for n, (doc_id, content) in enumerate(texts.items()):
        index.add(doc_id, content, ["projects:x", f"t:{n % 3}"], recency_ts=f"{n:04d}")
    index.remove(f"{7:026d}", texts[f"{7:026d}"], ["projects:x", "t:1"])
    header = {"analyzer": 1, "files": "abc"}
    path = tmp_path / "search.index"
    path.write_bytes(cache.encode_index(header, index.export_state(), SearchIndex().export_state()))
    stored = cache.read_index(path, header)
    assert stored is not None
    restored = SearchIndex.from_state(stored[0])
    for query in ["term1 term2", "stripe", "deploy k8s", "SENTRY_DSN", "projects:x term40", "t:1"]:
        assert restored.search(query, 10) == index.search(query, 10)
        assert restored.matching(query) == index.matching(query)
    probe = frozenset(["term1", "term2", "term3"])
    assert restored.similar(probe, 0.2) == index.similar(probe, 0.2)
    assert len(restored) == len(index) == 119
    # Postings restored flat are inflated on use; changes to a restored index behave the same, and
    # an export of a partly inflated index restores to the same answers again.
    for target in (index, restored):
        target.remove(f"{9:026d}", texts[f"{9:026d}"], ["projects:x", "t:0"])
        target.add(f"{9:026d}", "term1 stripe_client.py rewritten", ["projects:x"], recency_ts="9999")
    again = SearchIndex.from_state(restored.export_state())
    for query in ["term1 term2", "stripe rewritten", "term40", "t:0"]:
        assert again.search(query, 10) == restored.search(query, 10) == index.search(query, 10)
    assert again.similar(probe, 0.2) == index.similar(probe, 0.2)
    # Adds to postings still packed append pairs instead of inflating them: a fresh restore that
    # is written to before any read answers like the index that saw the same changes as dicts.
    fresh = SearchIndex.from_state(index.export_state())
    added = {f"{n:026d}": " ".join(rng.sample(vocab, rng.randint(3, 14))) for n in range(200, 230)}
    for target in (index, fresh):
        for doc_id, content in added.items():
            target.add(doc_id, content, ["projects:x"], recency_ts=doc_id[-4:])
        target.remove(f"{205:026d}", added[f"{205:026d}"], ["projects:x"])
    for query in ["term1 term2", "term5 term7 term9", "stripe", "projects:x term40", "t:2"]:
        assert fresh.search(query, 20) == index.search(query, 20)
        assert fresh.matching(query) == index.matching(query)
    assert fresh.similar(probe, 0.2) == index.similar(probe, 0.2) and len(fresh) == len(index)
    assert SearchIndex.from_state(fresh.export_state()).search("term3 term4", 20) == index.search("term3 term4", 20)
    assert cache.read_index(path, {"analyzer": 2, "files": "abc"}) is None  # another analyzer
    assert cache.read_index(path, {"analyzer": 1, "files": "abd"}) is None  # other files
    path.write_bytes(b"\x81garbage")
    assert cache.read_index(path, header) is None


def test_a_snapshot_whose_columns_disagree_is_refused_not_misread() -> None:
    """The content postings are one blob cut at stored ends, in the order of `terms`: a column
    cut short, shifted or out of step with the others must fail the restore (the caller then
    rebuilds), never hand a term another term's postings."""
    from array import array

    index = SearchIndex()
    for n, content in enumerate(["alpha beta gamma", "beta delta", "gamma epsilon alpha", "zeta"]):
        index.add(f"{n:026d}", content, ["projects:x"], recency_ts=f"{n:04d}")
    state = index.export_state()
    assert SearchIndex.from_state(state).search("alpha gamma", 5) == index.search("alpha gamma", 5)
    ends = array("Q")
    ends.frombytes(state["stored_ends"])
    terms = state["terms"].split("\n")

    def with_ends(values: list[int]) -> bytes:
        return array("Q", values).tobytes()
    broken = [
        {"stored": state["stored"][:-8]},                                # the blob cut short
        {"stored_ends": state["stored_ends"][:-8]},                      # one end missing
        {"stored_ends": state["stored_ends"][:-3]},                      # not whole ends
        {"stored_ends": with_ends([ends[1], ends[0], *ends[2:]])},       # out of order
        {"stored_ends": with_ends([ends[0] + 4, *ends[1:]])},            # a posting of half a pair
        {"df": state["df"][:-4]},                                        # df one term short
        {"terms": state["terms"] + "\nextra"},                           # a term too many
        {"terms": "\n".join([terms[1], *terms[1:]])},                    # a term twice
        {"terms": None},
        {"scope": {"projects:x": b"\x01\x02\x03"}},                      # a scope posting cut
    ]
    for change in broken:
        with pytest.raises((ValueError, TypeError)):
            SearchIndex.from_state({**state, **change})


def test_a_built_index_equals_one_added_to_a_document_at_a_time() -> None:
    """`build` (a start with no snapshot) gives exactly what `add` would, and the built index,
    packed from the start, takes adds and removes and snapshots like any other."""
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(60)] + ["stripe_client.py", "BM25", "ipc"]
    docs = [(f"{n:026d}", " ".join(rng.choices(vocab, k=rng.randint(1, 20))),
             rng.choice([[], ["projects:x"], ["projects:x", "topic:w3-w4"]]), f"2026-01-{n % 28 + 1:02d}")
            for n in range(300)]
    added = SearchIndex()
    for doc in docs:
        added.add(*doc)
    built = SearchIndex.build(iter(docs))
    assert built.export_state() == added.export_state()
    probe = token_set(docs[7][1])
    for target in (added, built):
        target.remove(docs[3][0], docs[3][1], docs[3][2])
        target.add("9" * 26, "w1 w2 stripe_client.py", ["projects:x"], "2027-01-01")
    for query in ["w1 w2", "stripe client", "projects:x w40", "topic:w3-w4", "bm25 ipc"]:
        assert built.search(query, 20) == added.search(query, 20)
        assert built.matching(query) == added.matching(query)
    assert built.similar(probe, 0.2) == added.similar(probe, 0.2) and len(built) == len(added)
    assert SearchIndex.from_state(built.export_state()).export_state() == added.export_state()


def test_a_cache_or_snapshot_planted_as_a_link_is_ignored_not_followed(tmp_path: Path) -> None:
    from memoryd.daemon.memories import parse_cache as cache

    (tmp_path / "elsewhere").write_bytes(b"\x80")
    for name in ("memories.cache", "search.index"):
        (tmp_path / name).symlink_to(tmp_path / "elsewhere")
    rows, _, gen = cache.read(tmp_path / "memories.cache")
    assert rows == {} and gen is None
    assert cache.read_index(tmp_path / "search.index", {"analyzer": 1}) is None
