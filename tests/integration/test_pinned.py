"""Pinned rules (docs/search.md "Pinned rules"): a memory written with `pinned=true` is listed first
in every session start context of its project, before handoffs and the newest memories, within
its own budget, however many memories are written after it.

Through the real path: the SDK client speaking to a real bridge for the pin, real bridges for the
50 newer writes, real `memoryd hook session-start` processes, and the `memoryd memories` CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from test_hooks import git_repo, start

from harness import Env, call
from memoryd.bench.kit import Bridge
from memoryd.eval.run import write_memory
from memoryd.hooks.start import PINNED_CHARS

RULE = "Never run `terraform apply` against prod from a laptop: every prod change goes through the deploy pipeline."
TOPICS = ["invoices", "webhooks", "celery", "redis", "sentry", "migrations", "coupons", "refunds", "taxes", "ledger"]


def newer_memories(env: Env, repo: Path, count: int) -> None:
    bridge = Bridge(env.environ(), worktree=str(repo))
    try:
        bridge.initialize()
        outcomes: dict[str, int] = {}
        for i in range(count):
            topic = TOPICS[i % len(TOPICS)]
            content = (f"Note {i} on {topic}: the {topic} module keeps its settings in config/{topic}_{i}.yaml "
                       f"and its tests under tests/{topic}/case_{i}; owner team {i % 7}.")
            write_memory(bridge, {"key": f"n{i}", "content": content, "scopes": ["projects:shop"],
                                  "category": "fact"}, outcomes)
        assert outcomes.get("committed") == count, outcomes
    finally:
        bridge.close()


def pin_rule(env: Env, repo: Path, content: str = RULE, **extra: bool) -> str:
    async def write() -> str:
        async with env.session(cwd=str(repo)) as bridge:
            result = await call(bridge, "memory_write", content=content, scopes=["projects:shop"], pinned=True,
                                **extra)
            assert result["status"] == "committed" and result.get("pinned") is True, result
            return str(result["id"])
    return anyio.run(write)


def test_a_pinned_rule_is_still_first_at_session_start_after_50_newer_memories(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop").resolve()
    rule_id = pin_rule(env, repo)
    newer_memories(env, repo, 50)

    context = start(env, "cc-pin-1", repo)
    assert context is not None and RULE in context
    assert context.index("## Pinned rules") < context.index("## Newest stored memories")
    assert context.count(RULE) == 1  # not listed again among the newest

    stored = (env.home / "memories" / f"{rule_id}.md").read_text()
    assert "pinned: true" in stored
    listed = env.memoryd_json("memories", "list", "--pinned", "--json")
    assert [m["id"] for m in listed["memories"]] == [rule_id] and listed["total"] == 1

    short = listed["memories"][0]["short_id"]
    assert env.memoryd("memories", "unpin", short).returncode == 0
    assert "pinned" not in (env.home / "memories" / f"{rule_id}.md").read_text()
    after = start(env, "cc-pin-2", repo) or ""
    assert "## Pinned rules" not in after
    history = env.memoryd_json("memories", "show", rule_id, "--json")["history"]
    assert [e["kind"] for e in history].count("update") == 1  # the unpin is an edit in the history

    assert env.memoryd("memories", "pin", short).returncode == 0
    assert RULE in (start(env, "cc-pin-3", repo) or "")


def test_pinned_rules_keep_to_their_own_budget_and_say_how_many_more(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop").resolve()
    rules = [f"Rule {i}: before touching the {topic} service, read docs/{topic}/runbook_{i}.md and ask the "
             f"{topic} owners in their channel; never hot-patch it in place." for i, topic in enumerate(TOPICS * 2)]
    for rule in rules:
        pin_rule(env, repo, rule, force=True)  # alike on purpose: the duplicate gate would hold them
    context = start(env, "cc-pin-budget", repo)
    assert context is not None
    section = context.split("## Pinned rules", 1)[1].split("\n\n", 1)[0]
    assert len("## Pinned rules" + section) <= PINNED_CHARS
    assert rules[0] in section  # oldest first: the first rule written is never the one dropped
    shown = sum(rule in section for rule in rules)
    assert 0 < shown < len(rules)
    assert f"and {len(rules) - shown} more" in section and "--pinned" in section
    listed = json.loads(env.memoryd("memories", "list", "--pinned", "--json").stdout)
    assert listed["total"] == len(rules)
