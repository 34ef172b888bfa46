"""`memoryd eval`: search quality on a labelled set through the agent's real path: a throwaway daemon, a bridge per
project, every memory through `memory_write` and every query through `memory_search` (docs/benchmark.md, "Search
quality"; ages: docs/search.md, "Age in the eval")."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from memoryd import names
from memoryd.bench.kit import Bridge, Throwaway, progress
from memoryd.eval import prompts as typed
from memoryd.eval import toolcalls
from memoryd.hooks.disclosure import gate

DEFAULT_SET = Path(__file__).with_name("recall_set.yaml")
DEFAULT_PROMPTS = Path(__file__).with_name("prompts_typed.yaml")
SEARCH_DEPTH = 10
# Kinds that measure something else than finding: their own row, kept out of `all` so it stays comparable.
OWN_ROW_KINDS = ("recency",)
# The argument that answers each gate outcome when the write is tried again.
ANSWERS = {"transient_warning": "acknowledge_transient", "scope_mismatch": "acknowledge_scope_mismatch",
           "ungrounded": "acknowledge_ungrounded", "credential_warning": "acknowledge_credential", "duplicate": "force"}


def load_set(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    keys = {m["key"] for m in data["memories"]}
    aged = [m["key"] for m in data["memories"] if not isinstance(m.get("age_days", 0), int | float)
            or isinstance(m.get("age_days"), bool) or m.get("age_days", 0) < 0]
    if aged:
        raise ValueError(f"memories {aged[:5]} have an age_days that is not a number of days >= 0")
    for query in data["queries"]:
        missing = [k for k in query["relevant"] if k not in keys]
        if missing:
            raise ValueError(f"query {query['q']!r} names unknown memories {missing}")
    return data  # type: ignore[no-any-return]


def load_prompts(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    prompts: list[dict[str, Any]] = yaml.safe_load(path.read_text())["prompts"]
    keys = {m["key"] for m in data["memories"]}
    unknown = [p["related"] for p in prompts if p["related"] and p["related"] not in keys]
    if unknown:
        raise ValueError(f"prompts name unknown memories {unknown[:5]}")
    return prompts


def write_memory(bridge: Bridge, memory: dict[str, Any], outcomes: dict[str, int]) -> str:
    """Write one memory as an agent would, answering gate outcomes; returns its id."""
    args: dict[str, Any] = {"content": memory["content"], "scopes": memory["scopes"],
                            "category": memory.get("category", "fact")}
    for _ in range(len(ANSWERS) + 1):
        result = bridge.call(names.MEMORY_WRITE, **args)
        status = str(result.get("status"))
        outcomes[status] = outcomes.get(status, 0) + 1
        if status == "committed":
            return str(result["id"])
        if status == "pending":
            return str(bridge.call(names.MEMORY_WRITE_CONFIRM, pending_id=result["pending_id"])["id"])
        if status not in ANSWERS:
            raise RuntimeError(f"memory {memory['key']} not written: {result}")
        args[ANSWERS[status]] = True
    raise RuntimeError(f"memory {memory['key']} not written after answering every gate")


def score_query(ranked: list[str], relevant: list[str]) -> dict[str, float]:
    """Metrics of one positive query from its ranked memory keys."""
    rank = next((i + 1 for i, key in enumerate(ranked) if key in relevant), None)
    dcg = sum(1 / math.log2(i + 2) for i, key in enumerate(ranked[:10]) if key in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return {"hit@1": float(rank == 1), "recall@1": len(set(ranked[:1]) & set(relevant)) / len(relevant),
            "recall@5": len(set(ranked[:5]) & set(relevant)) / len(relevant),
            "mrr": 1 / rank if rank else 0.0, "ndcg@10": dcg / ideal}


def wait_for_vectors(bridge: Bridge, count: int, timeout_s: float = 600) -> str:
    """Until the daemon has a meaning vector for `count` memories or says it cannot; returns its meaning state."""
    deadline = time.monotonic() + timeout_s
    while True:
        meaning = bridge.call(names.MEMORY_HEALTH).get("search_by_meaning", {})
        state = str(meaning.get("state"))
        if state == "off" or state.startswith("unavailable") or meaning.get("vectors", 0) >= count:
            return state
        if time.monotonic() > deadline:
            raise RuntimeError(f"the daemon embedded {meaning.get('vectors')} of {count} memories in {timeout_s:g} s")
        time.sleep(0.2)


def age_records(home: Path, ages: dict[str, float], now: datetime) -> int:
    """Hand-edit the `created` and `updated` of each memory's record file to `ages[id]` days before
    `now` (the daemon must be stopped); returns how many files changed."""
    changed = 0
    for memory_id, days in ages.items():
        stamp = (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        for path in home.glob(f"**/memories/{memory_id}.md"):
            head, sep, body = path.read_text().partition("\n---\n")
            aged = re.sub(r"^(created|updated): .*$", rf"\1: '{stamp}'", head, flags=re.M)
            path.write_text(aged + sep + body)
            changed += 1
    return changed


def evaluate(data: dict[str, Any], prompts: list[dict[str, Any]], lexical: bool = False) -> dict[str, Any]:
    bridges: dict[str | None, Bridge] = {}
    with Throwaway() as box:
        if lexical:
            Path(box.env["MEMORYD_CONFIG"]).write_text("search_by_meaning: false\n")
        try:
            box.start()

            def bridge_for(project: str | None) -> Bridge:
                if project not in bridges:
                    worktree = str(box.base / "work" / project) if project else ""
                    bridges[project] = Bridge({**box.env, "MEMORYD_WORKTREE": worktree})
                    bridges[project].initialize()
                return bridges[project]

            progress(f"writing {len(data['memories'])} memories", "eval")
            outcomes: dict[str, int] = {}
            key_of = {write_memory(bridge_for(m.get("project")), m, outcomes): m["key"] for m in data["memories"]}
            ages = {memory_id: m["age_days"] for memory_id, key in key_of.items()
                    for m in data["memories"] if m["key"] == key and m.get("age_days")}
            if ages:  # the daemon stopped, the records aged by hand, the daemon serving them again
                progress(f"ageing {len(ages)} memories", "eval")
                while bridges:
                    bridges.popitem()[1].close()
                box.stop()
                aged = age_records(box.base, ages, datetime.now(UTC))
                box.start()
                edited = bridge_for(None).call(names.MEMORY_HEALTH).get("hand_edited", {}).get("total")
                if aged != len(ages) or edited != len(ages):
                    raise RuntimeError(f"aged {aged} record files of {len(ages)}; hand edits the daemon saw: {edited}")
            meaning = wait_for_vectors(bridge_for(None), len(key_of))
            progress(f"{len(data['queries'])} queries", "eval")
            rows = [run_query(bridge_for(q.get("project")), q, key_of) for q in data["queries"]]
            progress(f"{len(prompts)} typed prompts", "eval")
            prompt_rows = [typed.run_prompt(bridge_for(p.get("project")), p, key_of) for p in prompts]
            progress("filler pairs", "eval")
            pairs = typed.run_filler_pairs(bridge_for, key_of)
            calls = toolcalls.load()
            progress(f"{len(calls)} shell calls", "eval")
            call_rows = [toolcalls.run_call(bridge_for(c.get("project")), c, key_of) for c in calls]
        finally:
            for bridge in bridges.values():
                bridge.close()
    return {"write_outcomes": outcomes, "search_by_meaning": meaning, "queries": rows, "summary": summarize(rows),
            "prompts": prompt_rows, "filler_pairs": pairs, "prompt_gate": typed.summarize(prompt_rows, pairs),
            "tool_calls": call_rows, "tool_gate": toolcalls.summarize(call_rows)}


def run_query(bridge: Bridge, query: dict[str, Any], key_of: dict[str, str]) -> dict[str, Any]:
    hits = bridge.call(names.MEMORY_SEARCH, query=query["q"], max_results=SEARCH_DEPTH)["results"]
    ranked = [key_of.get(h["id"], "?") for h in hits]
    row = {"q": query["q"], "kind": query["kind"], "split": query["split"], "ranked": ranked[:5],
           "relevant": query["relevant"], "top_relevance": hits[0].get("relevance", 0.0) if hits else 0.0,
           "verdicts": [h.get("staleness_verdict") for h in hits[:5]]}
    if query["relevant"]:
        row.update(score_query(ranked, query["relevant"]))
        row["hook_hit"] = float(any(key_of.get(h["id"]) in query["relevant"] for h in gate(hits[:3], typed.SETTINGS)))
    else:
        row["silent"] = float(not gate(hits, typed.SETTINGS))
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """`{split: {kind or "all": {metric: mean, "n": count}}}`, splits `tune`, `heldout`, `all`."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        overall = "negative" if not row["relevant"] else "all" if row["kind"] not in OWN_ROW_KINDS else None
        for split, kind in itertools.product((row["split"], "all"), (row["kind"], overall)):
            if kind:
                groups[(split, kind)].append(row)
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for (split, kind), members in sorted(groups.items()):
        metrics = ("silent",) if kind == "negative" else ("hit@1", "recall@1", "recall@5", "mrr", "ndcg@10", "hook_hit")
        out[split][kind] = {m: typed.mean(r[m] for r in members) for m in metrics} | {"n": len(members)}
    return dict(out)


def render(report: dict[str, Any]) -> str:
    lines = []
    for split in ("tune", "heldout", "all"):
        lines.append(f"\n{split}:")
        lines.append(f"  {'kind':12} {'n':>4} {'hit@1':>6} {'R@1':>6} {'R@5':>6} {'MRR':>6} "
                     f"{'nDCG@10':>8} {'hook hit':>9}")
        for kind, m in sorted(report["summary"].get(split, {}).items(), key=lambda kv: kv[0] == "all"):
            if kind == "negative":
                lines.append(f"  {kind:12} {m['n']:>4}   the prompt gate stays silent: {m['silent']:.3f}")
            else:
                lines.append(f"  {kind:12} {m['n']:>4} {m['hit@1']:>6.3f} {m['recall@1']:>6.3f} {m['recall@5']:>6.3f} "
                             f"{m['mrr']:>6.3f} {m['ndcg@10']:>8.3f} {m['hook_hit']:>9.3f}")
    served = [v for row in report["queries"] if row["kind"] in OWN_ROW_KINDS for v in row["verdicts"]]
    if served:
        lines.append(f"\nrecency: staleness verdicts on those queries' hits {dict(sorted(Counter(served).items()))}")
    lines += typed.render(report["prompt_gate"]) + toolcalls.render(report["tool_gate"])
    lines.append(f"\nwrite outcomes: {report['write_outcomes']}; search by meaning: {report['search_by_meaning']}")
    return "\n".join(lines).lstrip("\n")


def main(ns: argparse.Namespace) -> int:
    path = Path(ns.set) if ns.set else DEFAULT_SET
    try:
        data = load_set(path)
        prompts = load_prompts(Path(ns.prompts) if ns.prompts else DEFAULT_PROMPTS, data)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        print(f"memoryd eval: bad set {path}: {exc}", file=sys.stderr)
        return 2
    report = evaluate(data, prompts, lexical=ns.lexical)
    if ns.json:
        print(json.dumps(report if ns.verbose else {k: v for k, v in report.items() if k != "queries"}, indent=2))
    else:
        print(render(report))
        if ns.verbose:
            for row in report["queries"]:
                if row["relevant"] and row.get("mrr", 0) < 1:
                    print(f"  miss [{row['split']}/{row['kind']}] {row['q']!r} -> {row['ranked'][:3]} "
                          f"want {row['relevant']}")
    return 0
