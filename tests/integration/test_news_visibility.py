"""Live news keeps to what the listening session's own default `memory_search` would show it: the
session's repo (any worktree of it) plus memories made outside any repo. A memory another repo
wrote reaches none of this repo's sessions as news, whatever its scopes say — `topics:billing` is
not a project, yet the memory still belongs to the repo it was written in.

Real daemon, real `git init` repos as worktrees, agents on official-SDK bridges, and the real
`memoryd hook prompt` process fed Claude Code's UserPromptSubmit stdin.
"""

from __future__ import annotations

from pathlib import Path

from test_hooks import git_repo
from test_live_awareness import agent, ask, begin, committed, news_of, write

from harness import Env

BILLING = ("Invoices are re-issued only through the billing admin's 'void and reissue' action; editing an "
           "invoice row in place breaks the ledger's running totals.")
EVERYWHERE = "The user reads dates as YYYY-MM-DD everywhere and wants no other date format in any output."


def searched(env: Env, key: str, cwd: Path, query: str) -> list[str]:
    """The ids a default `memory_search` (auto_scope on) from a bridge in `cwd` finds."""
    [found] = agent(env, key, cwd, ("memory_search", {"query": query}))
    return [hit["id"] for hit in found["results"]]


def test_a_memory_scoped_to_no_project_is_news_only_where_a_search_would_show_it(served: Env) -> None:
    env = served
    shop, billing = git_repo(env.base / "shop"), git_repo(env.base / "billing")
    loose = env.base / "notes"  # outside any repo
    loose.mkdir()
    begin(env, "shop-reader", shop)
    begin(env, "billing-peer", billing)
    [in_billing] = committed(agent(env, "billing-writer", billing, write(BILLING, "topics:billing")))
    [repo_less] = committed(agent(env, "loose-writer", loose, write(EVERYWHERE, "user:preferences")))

    shop_news = news_of(ask(env, "shop-reader", shop))
    assert in_billing not in shop_news and "void and reissue" not in shop_news, shop_news
    assert repo_less in shop_news and "user-wide" in shop_news, shop_news  # made in no repo: everyone's
    assert in_billing not in searched(env, "shop-searcher", shop, "invoices reissue billing ledger")

    peer_news = news_of(ask(env, "billing-peer", billing))  # the writer's own repo still hears it
    assert in_billing in peer_news and "void and reissue" in peer_news, peer_news
    assert in_billing in searched(env, "billing-searcher", billing, "invoices reissue billing ledger")
