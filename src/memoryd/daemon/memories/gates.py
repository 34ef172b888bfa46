"""Pure detectors behind memory_write's gate chain and the taint scan (docs/tools.md): text in, plain data
out; the gate order and override flags live in `chain`. Import contract: stdlib, search.text, credentials
(gate 1's detector and lazy patterns); no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterator

from memoryd.daemon.credentials.detector import find_credentials, redact_credentials
from memoryd.daemon.credentials.patterns import lazy as _re
from memoryd.daemon.search.text import STOPWORDS, word_tokens

__all__ = ["cited_paths", "find_credentials", "find_scope_mismatches", "find_transient_markers",
           "find_ungrounded_claims", "redact_credentials", "scan_taint"]

MIN_GROUNDED_OVERLAP = 0.30
MIN_CLAIM_CONTENT_WORDS = 3
MIN_PROJECT_NAME_CHARS = 3
MARKER_SNIPPET_CHARS = 60


def _window(text: str, start: int, end: int, radius: int) -> str:
    """`text[start:end]` plus up to `radius` chars each side, whitespace collapsed, cuts marked."""
    lo, hi = max(0, start - radius), min(len(text), end + radius)
    return ("…" if lo > 0 else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")


def _non_overlapping(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans by position; one overlapping an earlier (or longer, same-start) span is dropped."""
    kept: list[tuple[int, int]] = []
    for span in sorted(spans, key=lambda s: (s[0], -s[1])):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


_TRANSIENT_PHRASES = """currently|right now|for now|at the moment|at present|today|today's|tonight
|tomorrow|yesterday|this morning|this afternoon|this evening|this week|this month|this sprint
|last night|last week|next week|we just|i just|just now|the latest|in progress|in the middle of
|work in progress|wip|unpushed|uncommitted changes|commits ahead|commits behind|now uses|the new
|so far|for the time being|as things stand|recently"""
_PHRASES_RE = _re(r"(?<![\w'’])(?:" + "|".join(
    re.escape(p).replace(r"\ ", r"\s+").replace("'", "['’]")
    for p in sorted((p.strip() for p in _TRANSIENT_PHRASES.split("|")), key=len, reverse=True)) + r")(?!\w)",
    re.IGNORECASE)
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
# "as of" fires only for dates and relative days; "as of 2.7.0" is a version pin and stays silent.
_AS_OF_RE = _re(
    r"(?<!\w)as\s+of\s+(?:"
    r"\d{4}-\d{1,2}(?:-\d{1,2})?(?:[T ][\d:.]+Z?)?"
    r"|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|{_MONTH}(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    r"|(?:19|20)\d{2}(?!\.?\d)"
    rf"|now|today|tonight|yesterday|tomorrow|(?:last|this|next)\s+(?:\w+)|{_WEEKDAY}"
    r"|(?:the\s+)?(?:time\s+of\s+)?writing"
    r")(?![\w.]\d|\w)", re.IGNORECASE)
_SHA_RE = _re(r"(?<![\w./#@-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-]|\.\w)")
_SENTENCE_OPENERS = " \t\"'([{*_>#•`“‘-"


def _is_proper_noun(text: str, start: int, phrase: str) -> bool:
    """A Title Case phrase names something ("This Week in Rust") rather than a time; a one-word phrase only
    when not sentence-initial (more than list markers, quotes or spaces since the last sentence break)."""
    words = phrase.split()
    if not all(w[:1].isupper() and w[1:] == w[1:].lower() for w in words):
        return False
    before = text[:start].rstrip(_SENTENCE_OPENERS)
    return len(words) > 1 or (before != "" and before[-1] not in ".!?:;\n\r")


def _marker_spans(text: str) -> Iterator[tuple[int, int]]:
    yield from (m.span() for m in _PHRASES_RE.finditer(text) if not _is_proper_noun(text, m.start(), m.group()))
    yield from (m.span() for pattern in (_AS_OF_RE, _SHA_RE) for m in pattern.finditer(text))


def find_transient_markers(text: str) -> list[dict[str, str]]:
    """Transient phrasing as `[{marker, snippet}]` in text order; `marker` is the match, lowered."""
    return [{"marker": " ".join(text[start:end].lower().split()),
             "snippet": _window(text, start, end, max(10, (MARKER_SNIPPET_CHARS - (end - start)) // 2))}
            for start, end in _non_overlapping(list(_marker_spans(text)))]


def _owning_project(path: str, projects: dict[str, str | None]) -> str | None:
    """The project whose worktree holds `path`; the deepest worktree wins when they nest."""
    roots = {name: (worktree or "").rstrip("/") for name, worktree in projects.items()}
    inside = [name for name, root in roots.items() if root and (path == root or path.startswith(root + "/"))]
    return max(inside, key=lambda name: len(roots[name]), default=None)


def find_scope_mismatches(text: str, scopes: list[str], projects: dict[str, str | None]) -> list[dict[str, str]]:
    """Evidence that `text` belongs to a known project (name -> worktree or None) its `scopes` do not
    cover: `{kind, evidence, suggested_scope}` per project and kind (`project_name`, `worktree_path`),
    in text order; a name inside a path already reported for that project is not reported again."""
    uncovered = {n for n in projects if not any(s == f"projects:{n}" or s.startswith(f"projects:{n}:") for s in scopes)}
    if not uncovered:
        return []
    found: dict[tuple[str, str], tuple[int, str]] = {}
    path_spans: list[tuple[int, int, str]] = []
    for path, start, end in _path_tokens(text):
        owner = _owning_project(path, projects) if path.startswith("/") else None
        if owner in uncovered:
            found.setdefault((owner, "worktree_path"), (start, path))
            path_spans.append((start, end, owner))
    names = sorted((n for n in uncovered if len(n) >= MIN_PROJECT_NAME_CHARS), key=len)[::-1]
    if names:
        # Hyphens join words here, so project "api" is not named by "api-gateway".
        pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w]|-\w)", re.IGNORECASE)
        for m in pattern.finditer(text):
            name = m.group().lower()
            if not any(s <= m.start() < e and o == name for s, e, o in path_spans):
                found.setdefault((name, "project_name"), (m.start(), m.group()))
    return [{"kind": kind, "evidence": evidence, "suggested_scope": f"projects:{name}"}
            for (name, kind), (_, evidence) in sorted(found.items(), key=lambda item: item[1][0])]


_SENTENCE_SPLIT_RE = _re(r"(?<=[.!?])\s+|\n+")


def _content_words(text: str) -> set[str]:
    """Crudely de-pluralized, so "tests" in a claim matches "test" in the transcript."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in word_tokens(text) if w not in STOPWORDS}


def find_ungrounded_claims(text: str, transcript: str) -> list[dict[str, object]]:
    """Sentences of `text` (with >= 3 distinct content words) fewer than 30 % of whose content words
    occur in `transcript`: `[{sentence, overlap}]`, overlap rounded to 2 places."""
    known = _content_words(transcript)
    overlaps = ((sentence, len(words & known) / len(words)) for sentence in _SENTENCE_SPLIT_RE.split(text)
                if len(words := _content_words(sentence)) >= MIN_CLAIM_CONTENT_WORDS)
    return [{"sentence": " ".join(sentence.split()), "overlap": round(overlap, 2)}
            for sentence, overlap in overlaps if overlap < MIN_GROUNDED_OVERLAP]


# -- the taint scan (flags, never blocks) ----------------------------------------------------------

_TAINT_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("ignore-instructions", _re(
        r"\b(?:ignore|disregard|forget|override)\s+(?:(?:all|any|the|your|of|my)\s+)*"
        r"(?:previous|prior|above|earlier|preceding|former|original|system)\s+"
        r"(?:instructions?|prompts?|directions?|rules|guidelines|context|messages?)", re.I)),
    ("role-prefix", _re(
        r"^[ \t]*(?:system|assistant|user|developer|human)[ \t]*:"
        r"|<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|</?system>", re.I | re.M)),
    ("tool-call-json", _re(
        r"\{\s*\"(?:tool|tool_name|function)\"\s*:|\"(?:function_call|tool_calls|tool_use)\"\s*:"
        r"|\{\s*\"name\"\s*:\s*\"[^\"]*\"\s*,\s*\"(?:arguments|parameters|input)\"\s*:"
        r"|<(?:tool_call|function_calls?|invoke)\b", re.I)),
    ("you-must-now", _re(
        r"\byou\s+(?:must|should|will|are\s+to)\s+now\b"
        r"|\bfrom\s+now\s+on,?\s+you\s+(?:must|will|should|are)\b", re.I)),
    ("new-instructions", _re(
        r"\byour\s+new\s+(?:instructions|task|role|goal)\s+(?:is|are)\b|\bnew\s+instructions\s*:", re.I)),
    ("self-certified-trust", _re(
        r"\bthis\s+(?:memory|message|content|note|instruction|text|record)\s+(?:is|has\s+been)\s+"
        r"(?:trusted|verified|safe|authori[sz]ed|approved)\b|\btrusted\s+source\b"
        r"|\bauthori[sz]ed\s+by\s+(?:the\s+)?(?:user|admin|administrator|developer|owner|operator)\b", re.I)),
    # Zero-width and bidi controls hide text from the human reviewing a memory.
    ("hidden-unicode", _re("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")),
]


# Words a pattern cannot match without (as `_folded` writes them): a text with none skips its regex, a
# measurable share of a write. tests/unit/test_gates.py checks the scan against the bare regexes.
_TAINT_NEEDS: dict[str, tuple[str, ...]] = {
    "ignore-instructions": ("ignore", "disregard", "forget", "override"),
    "role-prefix": (":", "<|", "inst]", "sys>>", "system>"), "you-must-now": ("now",), "new-instructions": ("new",),
    "self-certified-trust": ("trusted", "verified", "safe", "authori", "approved")}


def _folded(text: str) -> str:
    """`text` as `re.IGNORECASE` sees an ASCII letter: case-folded (`ſ` is `s`), dotless and dotted `i` as `i`."""
    return text.casefold().replace("\u0131", "i").replace("\u0307", "")


def scan_taint(text: str) -> list[str]:
    """Prompt-injection reasons found in `text`, each once, in a fixed order; [] when clean."""
    folded = _folded(text)
    return [reason for reason, pattern in _TAINT_PATTERNS
            if (reason not in _TAINT_NEEDS or any(word in folded for word in _TAINT_NEEDS[reason]))
            and pattern.search(text)]


_TOKEN_SPLIT_RE = _re(r"[^\s()\[\]<>\"'`,;=|{}]+")
# `\Z`, not `$`: Python's `$` also matches before a final newline.
_SEGMENT_RE = _re(r"^[\w.+@~-]+\Z")
_DOMAIN_RE = _re(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\Z", re.IGNORECASE)
_EXTENSION_RE = _re(r".\.[A-Za-z0-9]{1,8}\Z")
_LINE_SUFFIX_RE = _re(r"(?::\d+)+\Z|#L\d+(?:-L?\d+)?\Z")


def _as_path(token: str) -> str | None:
    """`token` cleaned up if it reads as a file path, else None (URLs, "and/or", dates…)."""
    token = _LINE_SUFFIX_RE.sub("", token.rstrip(".:!?"))
    if "//" in token or token.lower().startswith("www.") or not any(c.isalpha() for c in token):  # URLs too
        return None
    if token.startswith(("./", "../")):
        return token if len(token.rstrip("/")) > token.index("/") else None
    segments = token.strip("/").split("/")
    if not all(_SEGMENT_RE.match(s) for s in segments):
        return None
    has_ext = bool(_EXTENSION_RE.search(segments[-1]))
    if token.startswith("/"):
        return token if len(segments) >= 2 or has_ext else None
    if len(segments) < 2 or _DOMAIN_RE.match(segments[0]):
        return None
    return token if has_ext or len(segments) >= 3 or token.endswith("/") else None


def _path_tokens(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _TOKEN_SPLIT_RE.finditer(text):
        if "/" in m.group() and (path := _as_path(m.group())) is not None:
            yield path, m.start(), m.start() + len(path)


def cited_paths(text: str) -> list[str]:
    """File paths cited in `text` (`src/a/b.py`, `./x`, `/abs/y.z`), deduplicated, in order; not URLs
    or slash-words ("and/or", dates), and without `:12` / `#L12` suffixes."""
    return list(dict.fromkeys(path for path, _, _ in _path_tokens(text)))

