"""The credential detector against the shared corpora (`tests/secret_corpus.py`).

Positives: every form of every family, with bodies from a seeded random source, must be found and
its secret fully masked; negatives (hashes, ids, paths, versions, the eval's memories, 300 lines of
engineering notes, prose about secrets) must all pass. `memoryd`'s rates on both are printed by
`pytest -s tests/unit/test_credentials.py -k rates` and quoted in docs/security.md.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from memoryd.daemon.credentials import vendor_tokens
from memoryd.daemon.credentials.detector import (
    credential_hits,
    find_credentials,
    mask_credentials,
    redact_credentials,
)
from secret_corpus import FAMILIES, POSITIVE_FORMS, negatives, positives

SEEDS = range(8)


def missed(seed: int) -> list[str]:
    """Forms whose secret survives masking (or that nothing was found in) for one seed."""
    out = []
    for form, text, secret in positives(seed):
        if not credential_hits(text) or secret in redact_credentials(text):
            out.append(f"{form.name} (seed {seed}): {text!r}")
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_every_positive_form_is_found_and_its_secret_masked(seed: int) -> None:
    assert missed(seed) == []


def test_the_corpus_covers_every_family_with_at_least_80_forms() -> None:
    assert len(POSITIVE_FORMS) >= 80
    assert set(Counter(form.family for form in POSITIVE_FORMS)) == set(FAMILIES)


def test_no_negative_is_taken_for_a_secret() -> None:
    flagged = [(category, text, find_credentials(text)) for category, text in negatives()
               if credential_hits(text)]
    assert flagged == []


def test_rates(capsys: pytest.CaptureFixture[str]) -> None:
    """Detection over every seed and false positives over the negatives, per family and category."""
    found: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        for form, text, secret in positives(seed):
            seen[form.family] += 1
            found[form.family] += bool(credential_hits(text)) and secret not in redact_credentials(text)
    false: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for category, text in negatives():
        total[category] += 1
        false[category] += bool(credential_hits(text))
    with capsys.disabled():
        print(f"\ndetection: {sum(found.values())}/{sum(seen.values())} "
              f"({len(POSITIVE_FORMS)} forms x {len(SEEDS)} seeds)")
        for family in sorted(seen):
            print(f"  {family:20} {found[family]}/{seen[family]}")
        print(f"false positives: {sum(false.values())}/{sum(total.values())}")
        for category in sorted(total):
            print(f"  {category:20} {false[category]}/{total[category]}")
    assert found == seen and sum(false.values()) == 0


# -- how hits are shown --------------------------------------------------------------------------------

def test_a_snippet_never_holds_a_secret_it_found_even_next_to_another() -> None:
    made = positives(99)
    text = " ".join(text for _, text, _ in made[:12])
    for hit in find_credentials(text):
        for _, _, secret in made[:12]:
            assert secret not in hit["snippet"]


def test_mask_names_the_kinds_and_leaves_clean_text_alone() -> None:
    clean = "Deploys go through staging-2 first; run ./deploy.sh --env staging."
    assert mask_credentials(clean) == (clean, [])
    form, text, secret = next(m for m in positives(3) if m[0].family == "vendor_token")
    masked, kinds = mask_credentials(text)
    assert secret not in masked and "[REDACTED]" in masked and kinds


# -- the vendor scan finds what each row's pattern finds over the whole text --------------------------

def _reference_vendor_starts(text: str) -> set[int]:
    """Each row's own pattern run over the whole text with its word-start rule: the slow way."""
    starts = set()
    for prefix, rows in vendor_tokens._ROWS_BY_PREFIX.items():
        for _kind, pattern, _visible in rows:
            full = re.compile(r"(?<![A-Za-z0-9_-])" + pattern.pattern)
            starts |= {m.start() for m in full.finditer(text)}
            assert full.pattern.startswith(r"(?<![A-Za-z0-9_-])" + re.escape(prefix))
    return starts


@pytest.mark.parametrize("seed", [0, 1])
def test_the_run_scan_never_hides_a_vendor_token_a_row_matches(seed: int) -> None:
    for form, text, _ in positives(seed):
        if form.family != "vendor_token":
            continue
        for wrapped in (text, f"KEY={text.split()[-1]}", f"see https://x.example/{text}", f"'{text}'"):
            found = {h.start for h in vendor_tokens.vendor_hits(wrapped)}
            assert _reference_vendor_starts(wrapped) <= found, (form.name, wrapped)


def test_hostile_text_costs_one_pass_not_one_scan_per_anchor() -> None:
    """PEM BEGIN lines with no END, runs of secret words, dashes: each family scans once, so these
    finish (a pattern that rescans to the end from every anchor took minutes on them)."""
    for text in ("-----BEGIN RSA PRIVATE KEY-----\n" * 3000, "a-" * 50_000, "token is " * 10_000,
                 "mysql " * 15_000, "password=" * 10_000, "http://a:b@" * 8_000):
        assert isinstance(credential_hits(text), list)
