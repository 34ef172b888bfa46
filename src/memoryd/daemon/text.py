"""The text analyzer: how every part of the daemon that matches words turns text into tokens.

Import contract: stdlib only, no I/O, no state. Search indexing, search queries, the dedup and
`related` similarity of the write gates and the prompt-recall hook all tokenize here, so what is
indexed and what is asked can never drift apart.
"""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how if in into is it its itself just me
    more most my no nor not of off on once only or other our ours out over own same she should so
    some such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you
    your yours""".split()
)

_WORD_RE = re.compile(r"[^\W_]+")


def word_tokens(text: str) -> list[str]:
    """Lowercase alphanumeric runs of length >= 2, in order, duplicates kept."""
    return [w for w in _WORD_RE.findall(text.lower()) if len(w) >= 2]


def token_set(text: str) -> frozenset[str]:
    """The distinct word_tokens of `text` minus STOPWORDS: the unit of dedup similarity."""
    return frozenset(word_tokens(text)).difference(STOPWORDS)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard index of two token sets; 0.0 when both are empty."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0
