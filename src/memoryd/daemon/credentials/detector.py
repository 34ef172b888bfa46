"""The one credential detector every path storing outside text asks (docs/security.md). Pure, stdlib only;
a hit's replacement and snippet show at most a vendor's fixed prefix, never the secret."""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter

from memoryd.daemon.credentials.patterns import lazy
from memoryd.daemon.credentials.vendor_tokens import REDACTED, Hit, vendor_hits

__all__ = ["Hit", "credential_hits", "find_credentials", "mask_credentials", "redact_credentials"]

CONTEXT_CHARS = 20

# private_key: PEM blocks from BEGIN through END; one without an END runs 8 KiB on

_PEM_BEGIN_RE = lazy(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PEM_END_RE = lazy(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PEM_UNTERMINATED_CHARS = 8192


def _pem_hits(text: str) -> list[Hit]:
    # Each BEGIN takes the next END by bisect: one pass however many BEGIN lines the text holds.
    if "-----BEGIN" not in text:
        return []
    ends = [m.end() for m in PEM_END_RE.finditer(text)]
    hits = []
    for m in _PEM_BEGIN_RE.finditer(text):
        i = bisect.bisect_left(ends, m.end())
        end = ends[i] if i < len(ends) else min(len(text), m.end() + PEM_UNTERMINATED_CHARS)
        hits.append(Hit(m.start(), end, "private_key", m.group() + "…" + REDACTED))
    return hits

_PLACEHOLDER_RE = lazy(
    r"""^(?:none|null|nil|undefined|true|false|yes|no|empty|n/?a|tbd|todo|hidden|secret|password|passwd|pass
    |same-origin|same-site|include|omit|required|optional|inherit|read-?only
    |pwd|pw|token|[x*._•…-]+|<[^>]*>?|\[[^\]]*\]|\{\{.*\}\}|\$\{?[a-z_][a-z0-9_]*\}?.*
    |%\(?[a-z_]+\)?s?|%[a-z_]+%
    |(?:your|my|the|some|an?)[_-][a-z_-]*|.*(?:placeholder|example|redacted|changeme|change_me|dummy|sample).*
    |(?:\S{0,6}[^a-z0-9])?(?:test|fake|demo|foo|bar)(?:[^a-z0-9]\S{0,4})?
    |(?:os\.environ|process\.env|env\.).*)\Z""",
    re.IGNORECASE | re.VERBOSE,
)
# Code, not a value: a call, a subscript or an attribute path (`get_secret()`, `settings.API_KEY`).
_NAME = r"(?:_*[a-z][a-z0-9_]*|_*[A-Z][A-Za-z0-9_]*)"  # snake_case, CamelCase, CONSTANT
_CODE_RE = lazy(rf"{_NAME}(?:\.{_NAME})*(?:\(.*\)|\[.*\]|\(\Z)(?:\.{_NAME}(?:\(.*\))?|\[.*\])*\Z"
                rf"|{_NAME}(?:\.{_NAME})+\Z")
_ULID_RE = lazy(r"[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")
_PATH_WORD_RE = lazy(r"(?:^|[/.])[a-z]{3,}(?:[/.]|$)")
_WORDS_ONLY_RE = lazy(r"[A-Za-z]+(?:[-_.:/][A-Za-z]+)*[-_.:/]?")  # unambiguous: no backtracking blow-up
_VERSION_RE = lazy(r"v?\d+(?:[.-]\d+)+(?:[-+.][\w.]+)?\Z")


def _is_placeholder(value: str) -> bool:
    """A slot, not a value: "<token>", "${API_KEY}", "********", "sk-test", "xxxx…", code."""
    x_share = value.lower().count("x") / len(value) if value else 0.0
    return bool(_PLACEHOLDER_RE.match(value) or _CODE_RE.match(value) or x_share >= 0.5)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _machine_made(value: str) -> bool:
    """Has a digit, a symbol, inner capitals or 16+ characters: "a8Fq…", not "rotate"."""
    return (len(value) >= 16 or any(c.isdigit() or not c.isalnum() for c in value)
            or (value != value.lower() and value[1:] != value[1:].lower()))


def _words_only(value: str) -> bool:
    """Words joined up without a digit and with few case changes ("X-Api-Key", "readOnlyToken"): a name."""
    if any(c.isdigit() for c in value) or _WORDS_ONLY_RE.fullmatch(value) is None:
        return False
    return _case_changes(value) <= max(2, len(value) // 5)


def _case_changes(value: str) -> int:
    return sum(a.islower() != b.islower() for a, b in zip(value, value[1:]) if a.isalpha() and b.isalpha())


def _random_looking(value: str, min_len: int = 8) -> bool:
    """A token nobody would type as a word, and not an id's shape; hex only from 32 characters (not a SHA)."""
    if len(value) < min_len or _is_placeholder(value) or "://" in value or value[0] in "$<{":
        return False
    if value[0] in "/~." and _PATH_WORD_RE.search(value):
        return False  # a path ("/etc/nginx/conf.d"), not base64 that happens to start with "/"
    if _ULID_RE.match(value) or _VERSION_RE.match(value):
        return False
    lower, upper = any(c.islower() for c in value), any(c.isupper() for c in value)
    digit, symbol = any(c.isdigit() for c in value), any(not c.isalnum() for c in value)
    if not (lower or upper) or _words_only(value):
        return False  # no letters, or words joined up: a name
    if all(c in "0123456789abcdef" for c in value.lower()):
        return len(value) >= 32
    classes = lower + upper + digit + symbol
    mixed_case = lower and upper and _case_changes(value) > len(value) // 4
    if classes < 3 and not (classes == 2 and len(value) >= 12 and (digit or mixed_case)):
        return False
    return _entropy(value) >= min(2.5, math.log2(len(value)) - 1.0)

# Secret-sounding words, found in one scan; then an assignment to one, or a random token after it in prose.

# Longest first, so "password" is seen as itself rather than as "pass".
_WORDS = sorted(["password", "passwords", "passwd", "passphrase", "pwd", "pass", "pw", "secret", "secrets", "token",
                 "tokens", "credential", "credentials", "creds", "apikey", "accountkey", "sharedaccesskey",
                 "sharedaccesssignature", "key", "keys", "auth", "sig", "signature", "cookie", "dsn"],
                key=len, reverse=True)
_WORD_RE = lazy("|".join(_WORDS))
# A bare "key" is a secret's name only after one of these ("API key", "SIGNING_KEY", "x-api-key").
_KEY_QUALIFIERS = ("api", "access", "secret", "private", "signing", "master", "account", "license",
                   "encryption", "session", "auth", "app", "client", "shared", "deploy", "service")
# Names whose assignment is a secret only when the value is random ("auth: oauth2" is a setting).
_WEAK_WORDS = {"key", "keys", "auth", "sig", "signature", "cookie", "dsn"}
_PLURALS = {"passwords", "secrets", "tokens", "keys"}
_PROSE_WORDS = {"password", "passwords", "passwd", "passphrase", "pw", "pwd", "secret", "secrets", "token",
                "tokens", "credential", "credentials", "creds", "apikey", "key", "keys"}
_ASSIGNMENT_TAIL_RE = lazy(
    r"""["']?[ \t]*(?P<sep>:=|=>|=|:)(?![=>])[ \t]*
    (?:(?P<q>["'])(?P<qv>[^"'\n]{0,300})(?P=q)|(?P<uv>[^\s"'`,;)}\]]{1,300}))""",
    re.VERBOSE,
)
_TOKEN_END_RE = lazy(r"[^\s\"'`]{0,4096}")  # bounded; words inside a hit are skipped (_word_hits)
_PROSE_TAIL_RE = lazy(
    r"""(?P<gap>(?:[ \t]+[A-Za-z][\w'-]{0,20}){0,5}?)
    (?P<link>[ \t]*(?::|=|->|→)[ \t]*|[ \t]+(?:is|was|are)[ \t]+|[ \t]+)
    ["'`]?(?P<tok>[^\s"'`]{8,300})""",
    re.VERBOSE,
)


def _lowered(text: str) -> str:
    """ASCII capitals lowered, every index kept (`str.lower` may change lengths)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _word_hits(text: str) -> list[Hit]:
    low = _lowered(text)
    hits = []
    covered = 0  # the end of the last hit: a word inside it ("password=password=…") is not looked at again
    for m in _WORD_RE.finditer(low):
        word, start, end = m.group(), m.start(), m.end()
        if start < covered:
            continue
        after = low[end : end + 1]
        if after.isalnum() or after == "_":
            continue  # "tokenizer", "password_min_length", "keyword"
        glued = start > 0 and low[start - 1].isalpha()
        if word in ("key", "keys"):
            strong = low[max(0, start - 12) : start].rstrip(" _.-").endswith(_KEY_QUALIFIERS)
            glued = glued and not strong
        else:
            strong = word not in _WEAK_WORDS
        if glued and len(word) <= 4:
            continue  # "monkey", "bypass", "oauth"
        assignable = word not in _PLURALS  # "max_tokens: 4096" counts tokens; it holds none
        hit = (_assigned(text, end, strong) if assignable else None) or (
            _in_prose(text, end) if word in _PROSE_WORDS and strong and not glued else None)
        if hit:
            hits.append(hit)
            covered = hit.end
    return hits


def _assigned(text: str, end: int, strong: bool) -> Hit | None:
    """The value assigned right after a name ending at `end`. After a bare `:` it must look machine-made
    ("token: rotate it monthly" is prose); after a weak name, random. An unquoted value is masked to
    its token's end (one cut at `)` or `,` may go on)."""
    m = _ASSIGNMENT_TAIL_RE.match(text, end)
    if not m:
        return None
    quoted = m.group("q") is not None
    start, end = m.span("qv" if quoted else "uv")
    if not quoted:
        end = _TOKEN_END_RE.match(text, end).end()  # type: ignore[union-attr]
    raw = text[start:end]
    value = raw if quoted else raw.strip("([{").rstrip(".,;:!?)]}")
    if len(value) < 3 or _is_placeholder(value) or _is_placeholder(raw.rstrip(".,;:!?")):
        return None
    if strong and not (quoted or m.group("sep") != ":" or _machine_made(value) and not _words_only(value)):
        return None  # "secret: provider-prefixed" is prose
    if not strong and not _random_looking(value, 16):
        return None
    return Hit(start, end, "secret_assignment", REDACTED)


def _in_prose(text: str, end: int) -> Hit | None:
    """A random-looking token right after a secret word, or after a few words and a link ("is", ":")."""
    m = _PROSE_TAIL_RE.match(text, end)
    if not m or (m.group("gap") and not m.group("link").strip()):
        return None
    token = m.group("tok").rstrip(".,;:)!?]}")
    if not _random_looking(token) or _is_placeholder(m.group("tok")):
        return None
    return Hit(m.start("tok"), m.start("tok") + len(token), "keyword_secret", REDACTED)


# connection_string: a URL's userinfo password, to the authority's last `@` (real notes hold unescaped ones).
_URL_PASSWORD_RE = lazy(r"://[^\s/:@]{0,256}:([^\s/]{1,300})@(?=[^\s@/:]+[:/?#\s]|[^\s@/:]+$)")


def _url_hits(text: str) -> list[Hit]:
    found = _URL_PASSWORD_RE.finditer(text) if "://" in text else ()
    return [Hit(*m.span(1), "url_password", REDACTED) for m in found if not _is_placeholder(m.group(1))]

# command_line and header: each row runs only when the lowered text holds one of its words.

# An unquoted value ends at whitespace, a quote, `|`, `;`, or an `&`/`)` that ends the command
# (`&&`, `&` then a space): one inside a password (`-p_&Hu6…`) belongs to it.
_VALUE = r"""(?P<v>'[^'\n]{1,300}'|"[^"\n]{1,300}"|(?:[^\s'"`|;&)]|[&)](?![&\s]|$)){1,300})"""
_SEGMENT = r"[^\n|;&]{0,200}?"  # the rest of one command, up to a pipe, a `;` or an `&&`
_COMMAND_ROWS: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
    ("command_password", ("mysql", "mariadb"),
     lazy(rf"(?:mysql|mariadb)[\w-]*\b{_SEGMENT}\s-p{_VALUE}")),
    ("command_password", ("--",),
     lazy(rf"(?<![\w-])--(?:password|passwd|pass|pwd|token|api-?key|secret|client-secret|access-token"
          rf"|auth-token|private-token)(?:=|[ \t]+){_VALUE}")),
    ("command_password", ("sshpass",), lazy(rf"sshpass\s+-p\s*{_VALUE}")),
    ("command_password", ("login",),
     lazy(rf"(?:docker|podman|helm|oras|buildah|skopeo)\b{_SEGMENT}\blogin\b{_SEGMENT}\s-p[ \t]+{_VALUE}")),
    ("command_password", ("redis-cli",), lazy(rf"redis-cli\b{_SEGMENT}\s-a[ \t]+{_VALUE}")),
    ("command_password", ("htpasswd",), lazy(rf"htpasswd\s+-\w*b\w*\s+(?:-\w+\s+)*\S+\s+\S+\s+{_VALUE}")),
    ("command_user_password", ("-u", "--user", "--proxy-user"),
     lazy(rf"(?<![\w-])(?:-u|--user|--proxy-user)[ \t]*['\"]?[^\s:'\"]+:{_VALUE}")),
    ("env_password", ("pgpass", "mysql_pwd", "rediscli_auth", "sshpass="),
     lazy(rf"(?:PGPASSWORD|PGPASS|MYSQL_PWD|REDISCLI_AUTH|SSHPASS)=(?!\s){_VALUE}")),
    ("auth_header", ("authorization",),
     lazy(r"(?:Proxy-)?Authorization\s*:\s*(?:(?:Basic|Bearer|Token|Digest|Bot)\s+)?(?P<v>[A-Za-z0-9._~+/=:-]{8,})",
          re.IGNORECASE)),
    ("auth_header", ("bearer",), lazy(r"(?<!\w)Bearer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)", re.IGNORECASE)),
    ("cookie_header", ("cookie",), lazy(r"(?:Set-)?Cookie\s*:\s*[^\n=]{1,64}=(?P<v>[A-Za-z0-9%._~+/-]{16,})",
                                         re.IGNORECASE)),
]
_SCHEMES = {"basic", "bearer", "token", "digest", "bot"}
_FLAG_RE = lazy(r"--?[A-Za-z][A-Za-z-]*\Z")  # the next option ("-p --verbose"), not a password


def _command_hits(text: str) -> list[Hit]:
    low = _lowered(text)
    hits = []
    for kind, words, pattern in _COMMAND_ROWS:
        for m in pattern.finditer(text) if any(w in low for w in words) else ():
            start, end = m.span("v")
            end = end if text[start] in "'\"" else _TOKEN_END_RE.match(text, end).end()  # type: ignore[union-attr]
            value = text[start:end].strip("'\"")  # to the token's end: "-pc8%&&U7p…" is one word
            if _is_placeholder(value) or value.lower() in _SCHEMES or value.startswith("$") or _FLAG_RE.match(value):
                continue
            if len(value) < 4 or not _machine_made(value):
                continue  # "curl -u user:pass" in a how-to names the slot, it fills none
            hits.append(Hit(start, end, kind, REDACTED))
    return hits


def _non_overlapping(hits: list[Hit]) -> list[Hit]:
    """Hits by position; one overlapping an earlier (or longer, same-start) hit is dropped."""
    kept: list[Hit] = []
    for hit in sorted(hits, key=lambda h: (h.start, -h.end)):
        if not kept or hit.start >= kept[-1].end:
            kept.append(hit)
    return kept


# Surest first: where two families overlap, the earlier one names the hit.
_FAMILIES = (vendor_hits, _pem_hits, _url_hits, _command_hits, _word_hits)


def credential_hits(text: str) -> list[Hit]:
    """Every secret in `text`, by position, none overlapping."""
    kept: list[Hit] = []
    for family in _FAMILIES:
        found = _non_overlapping(family(text))
        kept += [h for h in found if not any(k.start < h.end and h.start < k.end for k in kept)]
    return sorted(kept)


def _redacted(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """`text` with every secret replaced, and each replacement's span in it and kind."""
    parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    cursor = length = 0
    for start, end, kind, replacement in credential_hits(text):
        parts += [text[cursor:start], replacement]
        length += start - cursor
        spans.append((length, length + len(replacement), kind))
        length += len(replacement)
        cursor = end
    return "".join(parts) + text[cursor:], spans


def redact_credentials(text: str) -> str:
    """`text` with every secret replaced (a vendor's fixed prefix, then [REDACTED])."""
    return _redacted(text)[0]


def mask_credentials(text: str) -> tuple[str, list[str]]:
    """`text` with every secret replaced, and the kinds replaced, in text order ([] when clean)."""
    redacted, spans = _redacted(text)
    return redacted, [kind for _, _, kind in spans]


def find_credentials(text: str) -> list[dict[str, str]]:
    """Secrets in `text` as `[{kind, snippet}]`, in text order, snippets cut from the redacted text."""
    redacted, spans = _redacted(text)
    return [{"kind": kind, "snippet": _window(redacted, *_snap(spans, s, e))} for s, e, kind in spans]


def _snap(spans: list[tuple[int, int, str]], start: int, end: int) -> tuple[int, int]:
    """Widen `[start, end)` by the context radius without cutting another redaction in half."""
    lo, hi = start - CONTEXT_CHARS, end + CONTEXT_CHARS
    for s, e, _ in spans:
        lo = e if s < lo < e else lo
        hi = s if s < hi < e else hi
    return max(0, lo), hi


def _window(text: str, lo: int, hi: int) -> str:
    """`text[lo:hi]`, whitespace collapsed, cuts marked."""
    lo, hi = max(0, lo), min(len(text), hi)
    return ("…" if lo > 0 else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")
