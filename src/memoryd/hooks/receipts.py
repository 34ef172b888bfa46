"""The receipt a hook sends of the context it injected (daemon/sessions/receipts.py), read back from
the printed text: each section header gives the tier, each `- <id>` or `(<id>)` a memory. Best effort.

Import contract: stdlib, hooks.disclosure and hooks.table (the hook's import path)."""

from __future__ import annotations

import re
from typing import Any

from memoryd.hooks.disclosure import POINTER_HEADER, PROMPT_HEADER
from memoryd.hooks.table import BY_VERB, SESSION_START

_ID_RE = re.compile(r"(?<![\w-])(m[0-9a-hjkmnp-tv-z]{8,9}|[0-7][0-9A-HJKMNP-TV-Z]{25})(?![\w-])")
NEWS_MARK = "new from other agents"
TOOL_MARK = "stored memories about this"
MAX_ITEMS = 40


def _tier(header: str, event: str) -> str | None:
    if header.startswith(POINTER_HEADER):
        return "pointer"
    if header.startswith(PROMPT_HEADER) or TOOL_MARK in header:
        return "full"
    if NEWS_MARK in header:
        return "news"
    return "listed" if event == SESSION_START.verb else None


def items_of(text: str, event: str) -> list[dict[str, str]]:
    """`[{id, tier}]` for the memories named in `text`, by the section each sits in."""
    items: list[dict[str, str]] = []
    tier = "listed" if event == SESSION_START.verb else None
    for line in text.splitlines():
        if line.startswith(("memoryd:", "## ")):
            tier = _tier(line, event)
            continue
        if tier is None or not line.lstrip().startswith(("- ", "* ")) and "(" not in line:
            continue
        for found in _ID_RE.findall(line):
            if len(items) < MAX_ITEMS and all(i["id"] != found for i in items):
                items.append({"id": found, "tier": tier})
    return items


def send(daemon: Any, event: str, text: str | None) -> None:
    if not text or not BY_VERB[event].injects:
        return
    try:
        daemon.hook("receipt", hook=event, items=items_of(text, event), chars=len(text))
    except Exception:  # noqa: BLE001 - the context is already chosen; a lost receipt must not cost it
        pass
