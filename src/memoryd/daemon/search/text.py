"""The one text analyzer (rules: docs/tools.md, "How text becomes terms"): indexing, queries, the
write gates' similarity and the prompt hook all turn text into terms here, so they cannot drift.
Import contract: stdlib and PyStemmer only, no I/O, no state beyond caches.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer  # type: ignore[import-not-found]  # PyStemmer ships no type hints

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how if in into is it its itself just me more most my no nor not of off on once only or other our
    ours out over own same she should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why will with would you your
    yours""".split()
)

# Bump whenever analysis changes a text's terms: a search index snapshot of another version is rebuilt.
ANALYZER_VERSION = 1
EXPANSION_WEIGHT = 0.5
MIN_TERM_CHARS = 2

# Symmetric groups: a query holding any one-term member also asks for every other member's terms.
EQUIVALENCES: tuple[tuple[str, ...], ...] = (
    ("prod", "production"), ("dev", "development"), ("stage", "staging"), ("db", "database"), ("k8s", "kubernetes"),
    ("deps", "dependencies"), ("dep", "dependency"), ("repo", "repository"), ("config", "configuration", "settings"),
    ("auth", "authentication", "login"), ("env", "environment"), ("envvar", "environment variable"),
    ("perf", "performance"), ("docs", "documentation"), ("pr", "pull request"),
    ("ci", "continuous integration", "pipeline"), ("js", "javascript"), ("ts", "typescript"), ("py", "python"),
    ("tf", "terraform"), ("msg", "message"), ("dir", "directory", "folder"), ("pkg", "package"), ("err", "error"),
    ("fn", "func", "function"), ("impl", "implementation"), ("init", "initialize"), ("app", "application"),
    ("deploy", "release", "ship"), ("creds", "credentials"), ("tmp", "temporary"), ("cfg", "config"),
    ("infra", "infrastructure"), ("req", "request"), ("resp", "response"), ("lib", "library"), ("util", "utility"),
    ("max", "maximum"), ("min", "minimum"), ("e2e", "end to end"),
)

_STEMMER = Stemmer.Stemmer("english")
# PyStemmer's own cache costs more than it saves when it churns (docs/benchmark.md); `stem` caches.
_STEMMER.maxCacheSize = 0
# Word characters and identifier joiners (`_ . / -`); a leading `-` or `--` survives for flags.
_CHUNK_RE = re.compile(r"-{0,2}[^\W_][\w./\-]*|_+[^\W_][\w./\-]*")
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_]+")
_JOINERS = "_./-"
_SCOPE_RE = re.compile(r"[a-z0-9]+(?:[-:][a-z0-9]+)*")
MAX_CACHED_CHUNKS = 200_000
_CHUNK_CACHE: dict[str, tuple[str, ...]] = {}


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a lowercase word."""
    return str(_STEMMER.stemWord(word))


def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """Terms of one chunk: a plain word gives its stem; an identifier gives itself whole, then
    the stems of its parts."""
    core = chunk.rstrip(_JOINERS)
    if not core.startswith("-"):
        core = core.lstrip(_JOINERS)
    lower = core.lower()
    if lower.isalnum() and (core.islower() or core.isupper() or core.istitle() or lower.isdigit()):
        return _word(lower)
    whole = (lower,) if len(lower) >= MIN_TERM_CHARS else ()
    return tuple(dict.fromkeys(whole + tuple(t for part in _PART_RE.findall(core) for t in _word(part.lower()))))


def _word(lower: str) -> tuple[str, ...]:
    if len(lower) < MIN_TERM_CHARS or lower in STOPWORDS:
        return ()
    return (stem(lower) if lower.isalpha() else lower,)  # numbers and ids like n42 or k8s have no English stem


def analyze(text: str) -> list[str]:
    """Index terms of `text`, in order, duplicates kept (their count is the term frequency)."""
    # A plain dict, not lru_cache: indexing 100k memories at start calls this per chunk.
    known = _CHUNK_CACHE
    out: list[str] = []
    for chunk in _CHUNK_RE.findall(text):
        terms = known.get(chunk)
        if terms is None:
            if len(known) >= MAX_CACHED_CHUNKS:
                known.clear()
            terms = known[chunk] = _chunk_terms(chunk)
        out += terms
    return out


def word_tokens(text: str) -> list[str]:
    """Plain lowercase words of `text` (length >= 2, unstemmed): for snippets and names."""
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) >= MIN_TERM_CHARS]


def _build_equivalences() -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for group in EQUIVALENCES:
        members = [tuple(analyze(phrase)) for phrase in group]
        terms = {t for member in members for t in member}
        for member in members:
            if len(member) == 1:  # only a one-term member triggers; every member is added
                table.setdefault(member[0], set()).update(terms - {member[0]})
    return {term: tuple(sorted(others)) for term, others in table.items()}


_EQUIVALENT = _build_equivalences()


def equivalents(term: str) -> tuple[str, ...]:
    """Terms the equivalence table adds for `term` (already analyzed)."""
    return _EQUIVALENT.get(term, ())


@lru_cache(maxsize=256)
def query_terms(query: str) -> tuple[tuple[str, float, str], ...]:
    """`(term, weight, asked)`: the query's analyzed terms and any scope written whole (weight 1),
    then their equivalents (`EXPANSION_WEIGHT`); `asked` is the typed term a row stands for."""
    typed = list(dict.fromkeys(analyze(query) + [m for m in _SCOPE_RE.findall(query.lower()) if ":" in m]))
    rows = [(term, 1.0, term) for term in typed]
    seen = set(typed)
    for term in typed:
        for other in equivalents(term):
            if other not in seen:
                seen.add(other)
                rows.append((other, EXPANSION_WEIGHT, term))
    return tuple(rows)
