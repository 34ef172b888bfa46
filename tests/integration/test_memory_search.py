"""memory_search through the official client → bridge → daemon: relevance on a labelled fixture,
auto-scope across sibling git worktrees, hidden scopes, filters, staleness with path drift."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call, call_error, wait_for_async

WT = {"MEMORYD_WORKTREE": "/w/s"}
FIXTURE = {
    "socket": ("The daemon listens on an ipc socket inside a 0700 runtime directory.", ["projects:memoryd"]),
    "reaper": ("Episodes older than the TTL are pruned by the reaper every ten minutes.", ["projects:memoryd"]),
    "pytest": ("Run pytest with -x and --tb=short when iterating on unit tests locally.", ["tooling"]),
    "checkout": ("The webshop checkout retries card payments twice before failing.", ["projects:webshop"]),
    "yaml": ("Frontmatter is parsed with libyaml when available, falling back to pure Python.", ["storage"]),
    "tabs": ("Makefiles and Go code use tabs for indentation, never spaces.", ["style"]),
    "pgbouncer": ("Postgres connection pooling goes through pgbouncer in transaction mode.", ["database"]),
    "bm25": ("Search ranks memories with BM25 and breaks ties by recency.", ["projects:memoryd"]),
    "fsync": ("Durable writes fsync the file and its directory before acknowledging.", ["storage"]),
    "healthz": ("Kubernetes liveness probes hit the healthz endpoint every five seconds.", ["ops"]),
}
QUERIES = [
    ("ipc socket runtime directory", "socket"), ("when does the reaper prune episodes", "reaper"),
    ("how do I run pytest", "pytest"), ("card payment retries at checkout", "checkout"),
    ("yaml frontmatter parser", "yaml"), ("tabs or spaces", "tabs"), ("pgbouncer pooling mode", "pgbouncer"),
    ("bm25 ranking ties", "bm25"), ("fsync durability", "fsync"), ("healthz probe interval", "healthz"),
]


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_repo(base: Path, name: str, files: dict[str, str]) -> Path:
    repo = base / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


async def write(s: Any, content: str, scopes: list[str], **extra: Any) -> dict[str, Any]:
    result = await call(s, "memory_write", content=content, scopes=scopes, **extra)
    assert result["status"] == "committed", result
    return result


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in found["results"]]


def test_the_right_memory_ranks_first_for_each_labelled_query(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT) as s:
            by_label = {}
            for label, (content, scopes) in FIXTURE.items():
                by_label[label] = (await write(s, content, scopes, acknowledge_scope_mismatch=True))["id"]
            await call(s, "episode_write", body="reaper prune episodes ttl", takeaway="reaper episodes ttl")
            for query, label in QUERIES:
                found = await call(s, "memory_search", query=query)
                assert ids(found)[0] == by_label[label], (query, found)
                assert found["framing"] == "data" and len(found["results"]) <= 5
            hit = (await call(s, "memory_search", query="pgbouncer"))["results"][0]
            assert set(hit) >= {"id", "content", "scopes", "category", "confidence", "created", "updated",
                                "score", "staleness_verdict", "age_days"}
            assert hit["staleness_verdict"] == "fresh" and hit["age_days"] == 0.0
            assert all(h["id"] in by_label.values() for h in
                       (await call(s, "memory_search", query="reaper episodes ttl"))["results"])
    anyio.run(main)


def test_filters_totals_and_long_content_snippets(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT) as s:
            for i in range(3):
                await write(s, f"Cache layer {i} stores rendered pages for {10 * (i + 1)} minutes.", ["cache"],
                            force=True)
            await call(s, "memory_write", content="The user reads cache dashboards daily.", scopes=["user"],
                       category="user-inference")
            capped = await call(s, "memory_search", query="cache", max_results=1)
            assert len(capped["results"]) == 1 and capped["total"] == 3
            assert (await call(s, "memory_search", query="cache", scopes=["nothing"]))["total"] == 0
            assert (await call(s, "memory_search", query="cache", category="ambient"))["results"] == []
            long_text = "Filler sentence about nothing in particular. " * 60 + "The zanzibar flag enables " \
                        "the experimental planner. " + "More filler text follows here. " * 60
            await write(s, long_text, ["docs"])
            hit = (await call(s, "memory_search", query="zanzibar planner"))["results"][0]
            assert hit["truncated"] is True and "zanzibar" in hit["content"] and len(hit["content"]) <= 1002
            for bad, param in (({"query": "  "}, "query"), ({"query": "x", "max_results": 51}, "max_results"),
                               ({"query": "x", "scopes": ["Not A Scope"]}, "scopes[0]")):
                err = await call_error(s, "memory_search", **bad)
                assert err.code == -32602 and err.data["param"] == param
    anyio.run(main)
    log_text = "".join(p.read_text() for p in (env.home / "events").glob("*.jsonl"))
    assert "zanzibar" not in log_text
    searches = [json.loads(line) for line in log_text.splitlines() if '"kind":"search"' in line]
    assert searches[0]["query_len"] == len("cache") and len(searches[0]["query_hash"]) == 16


def test_disabled_scopes_are_hidden_from_search(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT) as s:
            hidden = await write(s, "The legacy billing cron runs at midnight UTC.", ["projects:billing:legacy"],
                                 acknowledge_scope_mismatch=True)  # a project new to the store
            await call(s, "memory_scope_disable", scope="projects:billing")
            assert (await call(s, "memory_search", query="billing cron midnight"))["results"] == []
            assert (await call(s, "memory_list"))["total"] == 0
            await call(s, "memory_scope_enable", scope="projects:billing")
            assert ids(await call(s, "memory_search", query="billing cron midnight")) == [hidden["id"]]
    anyio.run(main)


def test_since_prior_session_keeps_only_what_changed_since_the_prior_session_began(env: Env) -> None:
    async def main() -> None:
        async with env.session(**WT) as zero:
            old = await write(zero, "Nightly exports land in the analytics bucket.", ["data"])
        async with env.session(**WT) as one:
            new = await write(one, "Weekly exports land in the archive bucket.", ["data"])
        async with env.session(**WT) as two:
            everything = await call(two, "memory_search", query="exports bucket")
            recent = await call(two, "memory_search", query="exports bucket", since_prior_session=True)
            assert set(ids(everything)) == {old["id"], new["id"]} and ids(recent) == [new["id"]]
    anyio.run(main)


def test_auto_scope_spans_sibling_worktrees_of_one_repo_and_no_other_repo(env: Env) -> None:
    repo = make_repo(env.base, "app", {"README.md": "app\n"})
    sibling = env.base / "app-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(sibling))
    other = make_repo(env.base, "other", {"README.md": "other\n"})

    async def main() -> None:
        async with env.session(cwd=str(repo)) as main_wt:
            mine = await write(main_wt, "Feature flags are read from flags.toml at startup.", ["config"])
        async with env.session() as nowhere:  # outside git: no repo
            shared = await write(nowhere, "Feature flags default to off in every environment.", ["config"],
                                 force=True)
        async with env.session(cwd=str(sibling)) as side:
            assert set(ids(await call(side, "memory_search", query="feature flags"))) == {mine["id"], shared["id"]}
            shown = await call(side, "memory_show", id=mine["id"])
            assert shown["origin"]["worktree"] == str(repo) and shown["origin"]["branch"] == "main"
            assert len(shown["origin"]["commit"]) == 40
        async with env.session(cwd=str(other)) as stranger:
            assert ids(await call(stranger, "memory_search", query="feature flags")) == [shared["id"]]
            assert len((await call(stranger, "memory_search", query="feature flags", auto_scope=False))["results"]) == 2
    anyio.run(main)


def test_a_deleted_cited_file_turns_the_verdict_to_spot_check_required(env: Env) -> None:
    repo = make_repo(env.base, "svc", {"src/app.py": "print('hi')\n", "docs/guide.md": "guide\n"})

    async def main() -> None:
        async with env.session(cwd=str(repo)) as s:
            memory = await write(s, "The entry point is src/app.py and the guide lives in docs/guide.md.", ["svc"])
            hit = (await call(s, "memory_search", query="entry point guide"))["results"][0]
            assert hit["staleness_verdict"] == "fresh" and hit["path_drift"] == {"checked": 2, "missing": []}
            (repo / "src" / "app.py").unlink()
            hit = (await call(s, "memory_search", query="entry point guide"))["results"][0]
            assert hit["id"] == memory["id"] and hit["staleness_verdict"] == "spot_check_required"
            assert hit["path_drift"] == {"checked": 2, "missing": ["src/app.py"]}
            health = await call(s, "memory_health")
            assert health["stale"]["items"][0]["id"] == memory["id"]
    anyio.run(main)


def test_a_search_audit_event_reaches_the_log_soon_without_another_write(env: Env) -> None:
    """A pass that logged only reads' audit events replies before its fsync; the event still lands
    in the log within about a second (the loop's timer), with no other call to carry it."""
    async def main() -> None:
        async with env.session(**WT) as s:
            await write(s, "The deploy script tags images with the git sha.", ["ops"])
            before = env.logged("search")
            await call(s, "memory_search", query="deploy images")
            await wait_for_async(lambda: env.logged("search") > before, step=0.05,
                                 what="the search event reaching the log")
            health = await call(s, "memory_health")
            assert health["log"]["chain_ok"] is True, health
    anyio.run(main)
