"""`memoryd hook prompt`: memories disclosed for a typed prompt (hooks/disclosure.py) and sibling news.
Import contract: as hooks/common.py."""

from __future__ import annotations

from typing import Any

from memoryd import names
from memoryd.hooks import disclosure
from memoryd.hooks.common import NEWS_CHARS, Daemon, answer, news_section, unseen

SEARCH_DEPTH = 10


def run(event: str, client: str, data: dict[str, Any], dry_run: bool = False) -> str | None:
    return answer(event, client, data, dry_run, lambda daemon, _: prompt(daemon, data, dry_run))


def prompt(daemon: Daemon, data: dict[str, Any], dry_run: bool = False) -> str | None:
    text, settings = data.get("prompt"), daemon.settings
    query = disclosure.prompt_query(text) if isinstance(text, str) else ""
    if not query:
        return None
    hits = daemon.tool(names.MEMORY_SEARCH, query=query, max_results=SEARCH_DEPTH)["results"]
    full, pointed = disclosure.choose(hits, settings)
    # With the siblings' news (sessions/news.py) less these hits: a just-written match shows once.
    full, pointed, reply = unseen(daemon, full, pointed, dry_run, limit=int(settings.get("prompt_max_hits", 3)),
                                  news=True)
    budget = min(int(settings.get("prompt_chars", 1500)), 10_000, int(reply.get("budget_left", 10_000)))
    news = news_section(reply, min(NEWS_CHARS, budget // 2 if full or pointed else budget))
    memories = disclosure.context(full, pointed, budget - (len(news) + 2 if news else 0))
    return "\n\n".join(s for s in (memories, news) if s) or None
