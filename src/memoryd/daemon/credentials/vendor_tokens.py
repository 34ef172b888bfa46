"""The detector's `vendor_token` family: issuers' fixed prefixes and tell-tale shapes. Stdlib only."""

from __future__ import annotations

import re
from typing import NamedTuple

from memoryd.daemon.credentials.patterns import lazy

REDACTED = "[REDACTED]"


class Hit(NamedTuple):
    start: int
    end: int
    kind: str
    replacement: str

# (kind, the issuer's fixed prefixes, what follows one)

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
# Each prefix's rows, anchored at the prefix, tried where one could start inside a run of token
# characters: its start, or after a `.+/=:~` (why, not a pattern per row: docs/security.md).
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
    """The vendor token starting at `at`, if any (the longest prefix wins)."""
    for length in _PREFIX_LENGTHS:
        for kind, pattern, visible in _ROWS_BY_PREFIX.get(text[at : at + length], ()):
            found = pattern.match(text, at)
            if found:
                return Hit(at, found.end(), kind, found.group()[:visible] + "…" + REDACTED)
    return None


def vendor_hits(text: str) -> list[Hit]:
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
