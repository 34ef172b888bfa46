"""The one credential detector: every path that stores outside text asks it (docs/security.md).

memory_write and memory_update, episode takeaways, a session's handoff, captured last words, every
importer and sync admission call `find_credentials` / `credential_hits`; nothing keeps a list of
its own. The detector knows *families* rather than examples:

- `vendor_token`: tokens whose issuer gives them a fixed prefix (cloud, code hosts, registries,
  payment, chat, mail, model hubs …), one row each in `_VENDOR_ROWS`;
- `private_key`: PEM private-key blocks (with or without their END line) and JWTs;
- `command_line` and `header`: a password or token handed to a program (`mysql -p…`, `curl -u
  user:pw`, `--password …`, `PGPASSWORD=…`) or sent in an `Authorization`/`Cookie` header;
- `connection_string`: `scheme://user:pw@host`, Azure's `AccountKey=` / `SharedAccessKey=` /
  `SharedAccessSignature=`, `Password=` in a DSN (these share the assignment rule below);
- `assignment`: `.env`/YAML/JSON/TOML assignments to a secret-sounding name;
- `keyword_entropy`: a random-looking token right after a secret-sounding word in prose
  ("the staging API key is …").

Pure: stdlib only, no I/O, no state. A hit never leaks its secret: the replacement shows at most a
vendor's fixed prefix, and snippets are cut from the text with every hit already replaced.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from typing import NamedTuple

from memoryd.daemon.patterns import lazy

__all__ = ["Hit", "credential_hits", "find_credentials", "mask_credentials", "redact_credentials"]

REDACTED = "[REDACTED]"
CONTEXT_CHARS = 20


class Hit(NamedTuple):
    start: int
    end: int
    kind: str
    replacement: str


# ---------------------------------------------------------------------------------------------
# vendor_token: (kind, the issuer's fixed prefixes, what follows one)

_B64 = r"A-Za-z0-9+/"
_URLSAFE = r"A-Za-z0-9_-"
_GITLAB = ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-", "glwt-")
_AWS = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "ABIA", "ACCA")
_VENDOR_ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("anthropic_key", ("sk-ant-",), rf"[{_URLSAFE}]{{20,}}"),
    ("openai_key", ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-"), rf"(?!ant-)[{_URLSAFE}]{{20,}}"),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"[A-Za-z0-9]{30,}"),
    ("github_token", ("github_pat_",), r"[A-Za-z0-9_]{30,}"),
    ("gitlab_token", _GITLAB, rf"[{_URLSAFE}]{{20,}}"),
    ("gitlab_token", ("GR1348941",), rf"[{_URLSAFE}]{{20,}}"),
    ("aws_access_key", _AWS, r"[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ("slack_token", ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-"), r"[A-Za-z0-9-]{10,}"),
    ("slack_token", ("xapp-",), r"\d-[A-Za-z0-9-]{20,}"),
    ("slack_webhook", ("hooks.slack.com/",), r"(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}"),
    ("discord_webhook", ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"), r"\d+/[A-Za-z0-9_-]{30,}"),
    ("stripe_key", ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), r"[A-Za-z0-9]{16,}"),
    ("stripe_webhook_secret", ("whsec_",), rf"[{_B64}=]{{24,}}"),
    ("npm_token", ("npm_",), r"[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("pypi_token", ("pypi-AgEIcHlwaS5vcmc",), rf"[{_URLSAFE}]{{40,}}"),
    ("huggingface_token", ("hf_", "api_org_"), r"[A-Za-z0-9]{30,}"),
    ("sendgrid_key", ("SG.",), rf"[{_URLSAFE}]{{20,24}}\.[{_URLSAFE}]{{40,46}}"),
    ("mailgun_key", ("key-",), r"[0-9a-f]{32}(?![0-9a-f])"),
    ("twilio_key", ("SK",), r"[0-9a-fA-F]{32}(?![0-9a-fA-F])"),
    ("google_api_key", ("AIza",), rf"[{_URLSAFE}]{{35}}"),
    ("google_oauth_secret", ("GOCSPX-",), rf"[{_URLSAFE}]{{24,}}"),
    ("google_oauth_token", ("ya29.",), rf"[{_URLSAFE}]{{20,}}"),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"[a-f0-9]{64}"),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"[a-fA-F0-9]{32}"),
    ("atlassian_token", ("ATATT3",), r"[A-Za-z0-9_=-]{50,}"),
    ("databricks_token", ("dapi",), r"[a-f0-9]{32}(?:-\d)?(?![\w-])"),
    ("vault_token", ("hvs.", "hvb.", "hvr."), rf"[{_URLSAFE}]{{24,}}"),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."), r"[A-Za-z0-9]{30,}"),
    ("linear_key", ("lin_api_", "lin_oauth_"), r"[A-Za-z0-9]{32,}"),
    ("postman_key", ("PMAK-",), r"[a-f0-9]{24}-[a-f0-9]{34}"),
    ("grafana_token", ("glsa_",), r"[A-Za-z0-9]{32}_[a-f0-9]{8}"),
    ("grafana_token", ("glc_",), rf"[{_B64}]{{32,}}={{0,2}}"),
    ("newrelic_key", ("NRAK-", "NRII-", "NRJS-", "NRRA-"), r"[A-Za-z0-9]{20,}"),
    ("docker_token", ("dckr_pat_", "dckr_oat_"), rf"[{_URLSAFE}]{{20,}}"),
    ("replicate_token", ("r8_",), r"[A-Za-z0-9]{30,}"),
    ("groq_key", ("gsk_",), r"[A-Za-z0-9]{40,}"),
    ("xai_key", ("xai-",), r"[A-Za-z0-9]{40,}"),
    ("perplexity_key", ("pplx-",), r"[A-Za-z0-9]{40,}"),
    ("tailscale_key", ("tskey-",), r"[a-z]+-[A-Za-z0-9]+-[A-Za-z0-9]{10,}"),
    ("age_secret_key", ("AGE-SECRET-KEY-1",), r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("sentry_token", ("sntrys_", "sntryu_", "sntrya_"), rf"[{_B64}=_-]{{40,}}"),
    ("heroku_key", ("HRKU-",), rf"[{_URLSAFE}]{{20,}}"),
    ("supabase_token", ("sbp_",), r"[a-f0-9]{40}"),
    ("square_token", ("sq0atp-", "sq0csp-"), rf"[{_URLSAFE}]{{22,}}"),
    ("square_token", ("EAAA",), rf"[{_URLSAFE}]{{60,}}"),
    ("alibaba_key", ("LTAI",), r"[A-Za-z0-9]{12,20}(?![A-Za-z0-9])"),
    ("mapbox_token", ("sk.eyJ",), rf"[{_URLSAFE}]{{20,}}\.[{_URLSAFE}]{{20,}}"),
    ("fly_token", ("fo1_",), rf"[{_URLSAFE}]{{30,}}"),
    ("netlify_token", ("nfp_",), r"[A-Za-z0-9]{30,}"),
    ("buildkite_token", ("bkua_",), r"[a-f0-9]{40}"),
    ("circleci_token", ("CCIPAT_",), r"[A-Za-z0-9]{20,}_[a-f0-9]{40}"),
    ("jfrog_key", ("AKCp",), r"[A-Za-z0-9]{60,}"),
    ("figma_token", ("figd_",), rf"[{_URLSAFE}]{{30,}}"),
    ("notion_token", ("secret_",), r"[A-Za-z0-9]{43}(?![A-Za-z0-9])"),
    ("notion_token", ("ntn_",), r"[A-Za-z0-9]{40,}"),
    ("airtable_token", ("pat",), r"[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("dropbox_token", ("sl.",), rf"[{_URLSAFE}]{{120,}}"),
    ("pulumi_token", ("pul-",), r"[a-f0-9]{40}"),
    ("render_key", ("rnd_",), r"[A-Za-z0-9]{30,}"),
    ("jwt", ("eyJ",), rf"[{_URLSAFE}]{{8,}}\.eyJ[{_URLSAFE}]{{8,}}\.[{_URLSAFE}]*"),
]
# Each prefix's rows, anchored at the prefix. A vendor token is found by a scan for long runs of
# token characters (one character class, ~0.02 µs a character), then a look at where a prefix could
# start inside each run: its start, or just after a `.+/=:~` (`KEY=sk_live_…`, `https://hooks…`).
# One pattern per row over the whole text cost 50× that; one alternation of the prefixes 10×.
_ROWS_BY_PREFIX: dict[str, list[tuple[str, re.Pattern[str], int]]] = {}
for _kind, _prefixes, _body in _VENDOR_ROWS:
    for _prefix in _prefixes:
        _ROWS_BY_PREFIX.setdefault(_prefix, []).append((_kind, lazy(re.escape(_prefix) + _body), len(_prefix)))
_PREFIXES = tuple(_ROWS_BY_PREFIX)
_PREFIX_LENGTHS = sorted({len(p) for p in _PREFIXES}, reverse=True)
_RUN_RE = lazy(r"[A-Za-z0-9_.+/=:~-]{16,}")
_INNER_START_RE = lazy(r"[.+/=:~]")
# Tokens without a fixed prefix, looked for only in a run that holds their tell-tale piece.
_SHAPE_ROWS: list[tuple[str, str, re.Pattern[str]]] = [
    ("telegram_bot_token", ":AA", lazy(r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_-]{33}(?![\w-])")),
    ("mailchimp_key", "-us", lazy(r"(?<![\w-])[0-9a-f]{32}-us\d{1,2}(?!\w)")),
    ("terraform_token", ".atlasv1.", lazy(r"(?<![\w.])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}")),
    ("azure_client_secret", "Q~", lazy(r"(?<![\w~.])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])")),
    ("discord_token", ".",
     lazy(r"(?<![\w.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![\w-])")),
]


def _prefixed_at(text: str, at: int) -> Hit | None:
    """The vendor token starting at `at`, if one does (the longest prefix that is there wins)."""
    for length in _PREFIX_LENGTHS:
        for kind, pattern, visible in _ROWS_BY_PREFIX.get(text[at : at + length], ()):
            found = pattern.match(text, at)
            if found:
                return Hit(at, found.end(), kind, found.group()[:visible] + "…" + REDACTED)
    return None


def _vendor_hits(text: str) -> list[Hit]:
    hits = []
    for run in _RUN_RE.finditer(text):
        lo, hi = run.span()
        for at in [lo] + [m.end() for m in _INNER_START_RE.finditer(text, lo, hi)]:
            hit = _prefixed_at(text, at) if text.startswith(_PREFIXES, at) else None
            if hit:
                hits.append(hit)
        for kind, tell, pattern in _SHAPE_ROWS:
            if tell in run.group():
                hits += [Hit(*found.span(), kind, REDACTED) for found in pattern.finditer(text, lo, hi)]
    return hits


# ---------------------------------------------------------------------------------------------
# private_key: PEM blocks from BEGIN through END; one without an END runs 8 KiB on

_PEM_BEGIN_RE = lazy(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = lazy(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PEM_UNTERMINATED_CHARS = 8192


def _pem_hits(text: str) -> list[Hit]:
    """Ends are found once and each BEGIN takes the next one (a bisect), so text full of BEGIN
    lines costs one pass, not one scan to the end per BEGIN."""
    if "-----BEGIN" not in text:
        return []
    ends = [m.end() for m in _PEM_END_RE.finditer(text)]
    hits = []
    for m in _PEM_BEGIN_RE.finditer(text):
        i = bisect.bisect_left(ends, m.end())
        end = ends[i] if i < len(ends) else min(len(text), m.end() + PEM_UNTERMINATED_CHARS)
        hits.append(Hit(m.start(), end, "private_key", m.group() + "…" + REDACTED))
    return hits


# ---------------------------------------------------------------------------------------------
# What a value must look like to be a secret rather than a placeholder, a variable or prose

_PLACEHOLDER_RE = lazy(
    r"""^(?:none|null|nil|undefined|true|false|empty|n/?a|tbd|todo|hidden|secret|password|token
    |[x*._•…-]+|<[^>]*>?|\[[^\]]*\]|\{\{.*\}\}|\$\{?[a-z_][a-z0-9_]*\}?.*
    |%\(?[a-z_]+\)?s?|%[a-z_]+%
    |(?:your|my|the|some|an?)[_-].*|.*(?:placeholder|example|redacted|changeme|change_me|dummy
    |sample|xxxx).*|[a-z_][a-z0-9_.]*[(\[].*|(?:os\.environ|process\.env|env\.).*)\Z""",
    re.IGNORECASE | re.VERBOSE,
)
_ULID_RE = lazy(r"[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")
_VERSION_RE = lazy(r"v?\d+(?:[.-]\d+)+(?:[-+.][\w.]+)?\Z")


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER_RE.match(value))


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _machine_made(value: str) -> bool:
    """Has a digit, a symbol, inner capitals or 16+ characters: "a8Fq…", not "rotate"."""
    return (
        len(value) >= 16
        or any(c.isdigit() or not c.isalnum() for c in value)
        or (value != value.lower() and value[1:] != value[1:].lower())
    )


def _random_looking(value: str, min_len: int = 8) -> bool:
    """A token nobody would type as a word: long enough, several character classes, little
    repetition, and none of the shapes that are ids rather than secrets (ULIDs, versions, paths,
    URLs, variables). Hex-only strings qualify only from 32 characters (commit SHAs are shorter
    or sit next to words like "commit", not "token is")."""
    if len(value) < min_len or _is_placeholder(value) or "://" in value or value[0] in "/~.$%<{":
        return False
    if _ULID_RE.match(value) or _VERSION_RE.match(value):
        return False
    lower, upper = any(c.islower() for c in value), any(c.isupper() for c in value)
    digit, symbol = any(c.isdigit() for c in value), any(not c.isalnum() for c in value)
    if not (lower or upper):
        return False
    if all(c in "0123456789abcdef" for c in value.lower()):
        return len(value) >= 32
    classes = lower + upper + digit + symbol
    if classes < 3 and not (classes == 2 and digit and len(value) >= 12):
        return False
    return _entropy(value) >= min(3.0, math.log2(len(value)) - 0.5)


# ---------------------------------------------------------------------------------------------
# Secret-sounding words. One scan of the text (lowered, same length) finds them all; what follows
# a word decides whether it names a secret: an assignment (`NAME=value`, `"name": "value"`, a DSN's
# `Password=…;`) or, in prose, a random-looking token right after it ("the API key is …").

# Longest first, so "password" is seen as itself rather than as "pass".
_WORDS = sorted(["password", "passwords", "passwd", "passphrase", "pwd", "pass", "pw", "secret", "secrets", "token",
                 "tokens", "credential", "credentials", "creds", "apikey", "accountkey", "sharedaccesskey",
                 "sharedaccesssignature", "key", "keys", "auth", "sig", "signature", "cookie", "dsn"],
                key=len, reverse=True)
_WORD_RE = lazy("|".join(_WORDS))
# A bare "key" is a secret's name only after one of these ("API key", "SIGNING_KEY", "x-api-key").
_KEY_QUALIFIERS = ("api", "access", "secret", "private", "signing", "master", "account", "license",
                   "encryption", "session", "auth", "app", "client", "shared", "deploy", "service")
# Names that make an assignment a secret only when the value is random-looking: "auth: oauth2" and
# "cache_key = user" are settings.
_WEAK_WORDS = {"key", "keys", "auth", "sig", "signature", "cookie", "dsn"}
_PROSE_WORDS = {"password", "passwords", "passwd", "passphrase", "pw", "pwd", "secret", "secrets", "token",
                "tokens", "credential", "credentials", "creds", "apikey", "key", "keys"}
_ASSIGNMENT_TAIL_RE = lazy(
    r"""["']?[ \t]*(?P<sep>:=|=>|=|:)(?![=>])[ \t]*
    (?:(?P<q>["'])(?P<qv>[^"'\n]{0,300})(?P=q)|(?P<uv>[^\s"'`,;)}\]]{1,300}))""",
    re.VERBOSE,
)
_PROSE_TAIL_RE = lazy(
    r"""(?P<gap>(?:[ \t]+[A-Za-z][\w'-]{0,20}){0,5}?)
    (?P<link>[ \t]*(?::|=|->|→)[ \t]*|[ \t]+(?:is|was|are)[ \t]+|[ \t]+)
    ["'`]?(?P<tok>[^\s"'`]{8,300})""",
    re.VERBOSE,
)


def _lowered(text: str) -> str:
    """`text` with ASCII capitals lowered and every index kept (`str.lower` may change lengths)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _qualified(low: str, start: int) -> bool:
    """Whether the "key" at `start` follows a qualifier word ("api key", "API_KEY", "apiKey")."""
    before = low[max(0, start - 12) : start].rstrip(" _.-")
    return before.endswith(_KEY_QUALIFIERS)


def _word_hits(text: str) -> list[Hit]:
    low = _lowered(text)
    hits = []
    for m in _WORD_RE.finditer(low):
        word, start, end = m.group(), m.start(), m.end()
        after = low[end : end + 1]
        if after.isalnum() or after == "_":
            continue  # "tokenizer", "password_min_length", "keyword"
        glued = start > 0 and low[start - 1].isalpha()
        if word in ("key", "keys"):
            strong = _qualified(low, start)
            glued = glued and not strong
        else:
            strong = word not in _WEAK_WORDS
        if glued and len(word) <= 4:
            continue  # "monkey", "bypass", "oauth"
        hit = _assigned(text, end, strong) or (
            _in_prose(text, end) if word in _PROSE_WORDS and strong and not glued else None)
        if hit:
            hits.append(hit)
    return hits


def _assigned(text: str, end: int, strong: bool) -> Hit | None:
    """The value assigned right after a name ending at `end`. After a bare `:` the value must look
    machine-made, because "token: rotate it monthly" is prose while "token: a8Fq…" is not; a weak
    name needs a random-looking value."""
    m = _ASSIGNMENT_TAIL_RE.match(text, end)
    if not m:
        return None
    group = "qv" if m.group("q") else "uv"
    value = m.group(group)
    if len(value) < 3 or _is_placeholder(value):
        return None
    if strong and not (group == "qv" or m.group("sep") != ":" or _machine_made(value)):
        return None
    if not strong and not _random_looking(value, 16):
        return None
    return Hit(*m.span(group), "secret_assignment", REDACTED)


def _in_prose(text: str, end: int) -> Hit | None:
    """A random-looking token right after a secret word, or after a few words and a link ("is",
    ":"): "password for the admin panel: …". Words between with no link ("token refresh fix landed
    in 4e5f…") are not a hit."""
    m = _PROSE_TAIL_RE.match(text, end)
    if not m or (m.group("gap") and not m.group("link").strip()):
        return None
    token = m.group("tok").rstrip(".,;:)!?]}")
    if not _random_looking(token):
        return None
    return Hit(m.start("tok"), m.start("tok") + len(token), "keyword_secret", REDACTED)


# ---------------------------------------------------------------------------------------------
# connection_string: a password in a URL's userinfo (`postgres://app:…@db`, `redis://:…@cache`)

_URL_PASSWORD_RE = lazy(r"://[^\s/:@]{0,256}:([^\s/@]{1,300})@")


def _url_hits(text: str) -> list[Hit]:
    hits = []
    for m in _URL_PASSWORD_RE.finditer(text) if "://" in text else ():
        if not _is_placeholder(m.group(1)):
            hits.append(Hit(*m.span(1), "url_password", REDACTED))
    return hits


# ---------------------------------------------------------------------------------------------
# command_line and header: a secret handed to a program or sent in a request. Each row runs only
# when the lowered text holds one of its words.

_VALUE = r"""(?P<v>'[^'\n]{1,300}'|"[^"\n]{1,300}"|[^\s'"|;&)]{1,300})"""
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


def _command_hits(text: str) -> list[Hit]:
    low = _lowered(text)
    hits = []
    for kind, words, pattern in _COMMAND_ROWS:
        for m in pattern.finditer(text) if any(w in low for w in words) else ():
            value = m.group("v").strip("'\"")
            if _is_placeholder(value) or value.lower() in _SCHEMES or value.startswith(("-", "$")):
                continue
            if kind in ("auth_header", "cookie_header") and not _machine_made(value):
                continue
            hits.append(Hit(*m.span("v"), kind, REDACTED))
    return hits


# ---------------------------------------------------------------------------------------------
# The detector


def _non_overlapping(hits: list[Hit]) -> list[Hit]:
    """Hits by position; one overlapping an earlier (or longer, same-start) hit is dropped."""
    kept: list[Hit] = []
    for hit in sorted(hits, key=lambda h: (h.start, -h.end)):
        if not kept or hit.start >= kept[-1].end:
            kept.append(hit)
    return kept


# Surest first: where two families overlap, the earlier one names the hit (a vendor token assigned
# to a name is reported as the vendor's, `AccountKey=…` as an assignment rather than prose).
_FAMILIES = (_vendor_hits, _pem_hits, _url_hits, _command_hits, _word_hits)


def credential_hits(text: str) -> list[Hit]:
    """Every secret in `text`, by position, none overlapping."""
    kept: list[Hit] = []
    for family in _FAMILIES:
        found = _non_overlapping(family(text))
        kept += [h for h in found if not any(k.start < h.end and h.start < k.end for k in kept)]
    return sorted(kept)


def redact_credentials(text: str) -> str:
    """`text` with every secret replaced (a vendor's fixed prefix, then [REDACTED])."""
    out, cursor = [], 0
    for hit in credential_hits(text):
        out += [text[cursor : hit.start], hit.replacement]
        cursor = hit.end
    return "".join(out) + text[cursor:]


def mask_credentials(text: str) -> tuple[str, list[str]]:
    """`text` with every secret replaced, and the kinds replaced, in text order ([] when clean):
    for text kept whatever it holds (an episode's run state), where refusing would lose the rest."""
    hits = credential_hits(text)
    return (redact_credentials(text) if hits else text), [hit.kind for hit in hits]


def find_credentials(text: str) -> list[dict[str, str]]:
    """Secrets in `text` as `[{kind, snippet}]`, in text order.

    Every detected secret is redacted from the whole text before any snippet is cut, so a snippet
    never holds a secret it found, even one sitting next to another.
    """
    parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    cursor = length = 0
    for start, end, kind, replacement in credential_hits(text):
        parts.append(text[cursor:start])
        length += start - cursor
        spans.append((length, length + len(replacement), kind))
        parts.append(replacement)
        length += len(replacement)
        cursor = end
    parts.append(text[cursor:])
    redacted = "".join(parts)
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
