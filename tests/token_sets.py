"""The dedup gate's similarity written the naive way, as the tests' oracle: a text's distinct
analyzed terms, and the Jaccard index of two such sets."""

from __future__ import annotations

from memoryd.daemon.search.text import analyze


def token_set(text: str) -> frozenset[str]:
    return frozenset(analyze(text))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """0.0 when both are empty."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0
