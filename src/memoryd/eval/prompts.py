"""The prompt hook's part of `memoryd eval`: what the hook would disclose for each typed prompt, filler pair and
20-prompt session, searched and chosen as the hook does (docs/search.md, "Disclosure"); only tune may inform a bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from memoryd import names
from memoryd.bench.kit import Bridge
from memoryd.config import SESSION_MIN_FULL_CHARS as MIN_FULL_CHARS
from memoryd.config import Config
from memoryd.hooks import disclosure

FILLER_PAIRS = Path(__file__).with_name("filler_pairs.yaml")
HOOK_DEPTH = 10
SESSION_TURNS = 20
_CONFIG = Config()
SETTINGS = _CONFIG.hook_settings()
# The targets, checked on held-out: (key, comparison, bound, label).
TARGETS = [
    ("reached", ">=", 0.85, "related: right memory reached the agent (full or pointer)"),
    ("right_full", ">=", 0.50, "related: right memory in full"),
    ("unrelated_nothing", ">=", 0.90, "unrelated: nothing at all"),
    ("unrelated_full", "<=", 0.05, "unrelated: a memory in full"),
    ("unrelated_mean_chars", "<=", 100, "unrelated: mean chars injected"),
    ("max_chars", "<=", 1500, "largest injection on any prompt (chars)"),
    ("session_max_chars", "<=", 4000, "20 prompts of one session: most chars (prompts only)"),
    ("filler_agree", ">=", 0.90, "filler pairs: same tier and memory"),
]


def disclose(bridge: Bridge, prompt: str, key_of: dict[str, str]) -> dict[str, Any]:
    hits = bridge.call(names.MEMORY_SEARCH, query=disclosure.prompt_query(prompt), max_results=HOOK_DEPTH)["results"]
    full, pointed = disclosure.choose(hits, SETTINGS)
    return {"full": full, "pointed": pointed, "hits": hits,
            "keys": ([key_of.get(h["id"], "?") for h in full], [key_of.get(h["id"], "?") for h in pointed])}


def run_prompt(bridge: Bridge, prompt: dict[str, Any], key_of: dict[str, str]) -> dict[str, Any]:
    seen = disclose(bridge, prompt["prompt"], key_of)
    full_keys, pointed_keys = seen["keys"]
    row = {"prompt": prompt["prompt"], "kind": prompt["kind"], "split": prompt["split"],
           "related": prompt["related"], "project": prompt.get("project"), "injected": full_keys,
           "pointed": pointed_keys,
           "chars": len(disclosure.context(seen["full"], seen["pointed"], int(SETTINGS["prompt_chars"])) or ""),
           "ids": ([h["id"] for h in seen["full"]], [h["id"] for h in seen["pointed"]]),
           "lengths": {h["id"]: len(disclosure.hit_line(h, 10_000)) for h in seen["full"]},
           "top": [{"key": key_of.get(h["id"], "?"), "relevance": h.get("relevance"),
                    "similarity": h.get("similarity")} for h in seen["hits"]]}
    if prompt["related"]:
        row["right"] = float(prompt["related"] in full_keys)
        row["reached"] = float(prompt["related"] in full_keys + pointed_keys)
    else:
        row["silent"] = float(not full_keys and not pointed_keys)
        row["full"] = float(bool(full_keys))
    return row


def run_filler_pairs(bridge_for: Any, key_of: dict[str, str], path: Path = FILLER_PAIRS) -> list[dict[str, Any]]:
    rows = []
    for pair in yaml.safe_load(path.read_text())["pairs"]:
        bridge = bridge_for(pair.get("project"))
        plain, filled = disclose(bridge, pair["prompt"], key_of), disclose(bridge, pair["filled"], key_of)
        rows.append({"split": pair["split"], "prompt": pair["prompt"], "filled": pair["filled"],
                     "agree": float(plain["keys"] == filled["keys"]), "plain": plain["keys"],
                     "with_filler": filled["keys"]})
    return rows


def session_chars(rows: list[dict[str, Any]]) -> list[int]:
    """Chars the prompt hook adds over each run of SESSION_TURNS prompts of one project, replaying
    the session's dedup (`take_unseen`) and budget."""
    totals = []
    by_project: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_project.setdefault(row["project"], []).append(row)
    for members in by_project.values():
        for start in range(0, len(members), SESSION_TURNS):
            shown: set[str] = set()
            pointed: set[str] = set()
            total = 0
            for row in members[start : start + SESSION_TURNS]:
                full_ids = [i for i in row["ids"][0] if i not in shown]
                candidates = row["ids"][1]
                left = _CONFIG.hook_session_chars - total
                if left < MIN_FULL_CHARS:  # too little budget left: the daemon points instead
                    full_ids, candidates = [], full_ids + candidates
                pointer_ids = [i for i in candidates if i not in shown | pointed | set(full_ids)][:2]
                shown |= set(full_ids)
                pointed |= set(pointer_ids)
                total += _estimate(row, full_ids, pointer_ids, max(0, left))
            totals.append(total)
    return totals


def _estimate(row: dict[str, Any], full_ids: list[str], pointer_ids: list[str], left: int) -> int:
    """The chars of a prompt's disclosure after the session's dedup, clipped to the budget `left`."""
    if not full_ids and not pointer_ids:
        return 0
    full = sum(row["lengths"].get(i, 0) + 1 for i in full_ids) + (len(disclosure.PROMPT_HEADER) if full_ids else 0)
    pointer = (len(disclosure.POINTER_HEADER) + 1 + 95 * len(pointer_ids)) if pointer_ids else 0
    if left < pointer:  # not even a pointer fits what is left of the session's budget
        return 0 if not full_ids else min(full, left)
    return int(min(full + pointer, int(SETTINGS["prompt_chars"]), left))


def summarize(rows: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for split in ("tune", "heldout", "all"):
        members = [r for r in rows if split in (r["split"], "all")]
        related = [r for r in members if r["related"]]
        unrelated = [r for r in members if not r["related"]]
        spoke = [r["chars"] for r in members if r["chars"]]
        agree = [p["agree"] for p in pairs if split in (p["split"], "all")]
        right, silent = mean(r["right"] for r in related), mean(r["silent"] for r in unrelated)
        shown = round(mean(spoke))
        out[split] = {
            "reached": mean(r["reached"] for r in related), "right_full": right, "unrelated_nothing": silent,
            "unrelated_full": mean(r["full"] for r in unrelated),
            "unrelated_mean_chars": round(mean(r["chars"] for r in unrelated), 1),
            "max_chars": max(spoke, default=0), "mean_chars_when_shown": shown,
            "session_max_chars": max(session_chars(members), default=0), "filler_agree": mean(agree),
            "n_related": len(related), "n_unrelated": len(unrelated), "n_pairs": len(agree),
            # the former measures, for comparison with earlier reports
            "related_right": right, "unrelated_silent": silent, "mean_chars": shown,
        }
    return out


def mean(values: Any) -> float:
    items = list(values)
    return round(sum(items) / len(items), 3) if items else 0.0


def target_table(title: str, summary: dict[str, dict[str, float]], targets: list[tuple[str, str, float, str]],
                 counts: dict[str, str]) -> list[str]:
    """Each target's measure on tune and held-out side by side, whether held-out met it, then the
    `counts` (summary key -> label) of both."""
    lines = [f"\n{title} (targets are checked on held-out):",
             f"  {'measure':58} {'tune':>7} {'heldout':>8} {'target':>9}"]
    for key, op, bound, label in targets:
        tune, held = summary["tune"][key], summary["heldout"][key]
        met = held >= bound if op == ">=" else held <= bound
        lines.append(f"  {label:58} {tune:>7} {held:>8} {op + ' ' + str(bound):>9} {'met' if met else 'MISSED'}")
    tune_n, held_n = summary["tune"], summary["heldout"]
    return [*lines, "  (n " + ", ".join(f"{label} {tune_n[key]}/{held_n[key]}" for key, label in counts.items()) + ")"]


def render(summary: dict[str, dict[str, float]]) -> list[str]:
    counts = {"n_related": "related", "n_unrelated": "unrelated", "n_pairs": "filler pairs"}
    return target_table("prompt hook disclosure (typed prompts)", summary, TARGETS, counts)
