"""The one analyzer: stems, identifiers whole and in parts, query-time equivalences."""

from __future__ import annotations

from memoryd.daemon.search import SearchIndex, text


def test_inflections_reduce_to_one_stem() -> None:
    for forms in (["deploy", "deploys", "deploying", "deployed"], ["migration", "migrations"],
                  ["retry", "retries"], ["configure", "configured", "configuring"]):
        assert len({tuple(text.analyze(f)) for f in forms}) == 1, forms


def test_stopwords_and_single_letters_are_dropped() -> None:
    assert text.analyze("a cat in the hat") == ["cat", "hat"]


def test_snake_case_is_kept_whole_and_split() -> None:
    assert text.analyze("stripe_client") == ["stripe_client", "stripe", "client"]


def test_camel_and_pascal_case_split_on_case_changes() -> None:
    assert text.analyze("StripeClient") == ["stripeclient", "stripe", "client"]
    assert text.analyze("useEffect") == ["useeffect", "use", "effect"]
    assert text.analyze("parseHTTPResponse") == ["parsehttpresponse", "pars", "http", "respons"]


def test_paths_dotted_names_and_env_vars_keep_their_whole_form() -> None:
    terms = text.analyze("billing/stripe_client.py")
    assert terms[0] == "billing/stripe_client.py"
    assert {"bill", "stripe", "client", "py"} <= set(terms)
    assert text.analyze("SENTRY_DSN")[:3] == ["sentry_dsn", "sentri", "dsn"]
    assert text.analyze("session.scalars()")[:3] == ["session.scalars", "session", "scalar"]
    assert text.analyze("flags.yaml")[0] == "flags.yaml"


def test_versions_flags_and_kebab_case_survive() -> None:
    assert text.analyze("python 3.12") == ["python", "3.12", "12"]
    assert text.analyze("use --force")[-2:] == ["--force", "forc"]
    assert text.analyze("read-only")[0] == "read-only"


def test_sentence_punctuation_is_not_part_of_an_identifier() -> None:
    assert text.analyze("Edit flags.yaml.")[1] == "flags.yaml"
    assert text.analyze("(see docs/)") == ["see", "doc"]


def test_query_adds_equivalents_below_typed_terms() -> None:
    rows = text.query_terms("ship to prod")
    typed = [(t, w) for t, w, _ in rows if w == 1.0]
    added = {t: (w, src) for t, w, src in rows if w < 1.0}
    assert typed == [("ship", 1.0), ("prod", 1.0)]
    assert added["product"] == (text.EXPANSION_WEIGHT, "prod")  # production's stem
    assert added["deploy"][1] == "ship"


def test_equivalence_table_is_symmetric_for_one_word_members() -> None:
    assert "db" in text.equivalents(text.analyze("database")[0])
    assert text.analyze("database")[0] in text.equivalents("db")
    assert {"kubernet"} <= set(text.equivalents("k8s"))


def test_an_expanded_match_ranks_below_an_exact_one() -> None:
    index = SearchIndex()
    index.add("A" * 26, "Release checklist for production hosts")
    index.add("B" * 26, "Release checklist for prod hosts")
    hits = index.search("prod checklist", 2)
    assert [d for d, _ in hits] == ["B" * 26, "A" * 26]


def test_relevance_is_the_share_of_the_asked_weight_a_memory_holds() -> None:
    index = SearchIndex()
    index.add("A" * 26, "Run make migrate before pytest in billing")
    index.add("B" * 26, "The webapp uses pnpm")
    rel = index.relevance("make migrate pytest", ["A" * 26, "B" * 26])
    assert rel["A" * 26] == 1.0 and rel["B" * 26] == 0.0
    assert 0 < index.relevance("migrate kubernetes", ["A" * 26])["A" * 26] < 0.5
