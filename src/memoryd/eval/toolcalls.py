"""The pre-tool hook's search by meaning in `memoryd eval`: what it would disclose before each shell
call of `tool_calls.yaml`, anchors aside (docs/search.md, "Shell calls by meaning")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from memoryd import names
from memoryd.bench.kit import Bridge
from memoryd.eval.prompts import SETTINGS, mean, target_table
from memoryd.hooks import disclosure

TOOL_CALLS = Path(__file__).with_name("tool_calls.yaml")
DEPTH = 3
TARGETS = [
    ("reached", ">=", 0.70, "related calls: right memory reached the agent"),
    ("unrelated_nothing", ">=", 0.95, "unrelated calls: nothing at all"),
]


def load(path: Path = TOOL_CALLS) -> list[dict[str, Any]]:
    calls = yaml.safe_load(path.read_text())["calls"]
    if not isinstance(calls, list) or not all(isinstance(c, dict) and c.get("command") for c in calls):
        raise ValueError(f"{path}: calls must be a list of {{command, description, related, split}}")
    return calls


def run_call(bridge: Bridge, call: dict[str, Any], key_of: dict[str, str]) -> dict[str, Any]:
    query = disclosure.tool_query(call["command"], call.get("description"))
    hits = bridge.call(names.MEMORY_SEARCH, query=query, max_results=DEPTH)["results"]
    full, pointed = disclosure.choose_for_tool(hits, SETTINGS)
    shown = [key_of.get(h["id"], "?") for h in full + pointed]
    row = {"command": call["command"], "split": call["split"], "kind": call.get("kind"),
           "related": call.get("related"), "full": [key_of.get(h["id"], "?") for h in full], "shown": shown,
           "top": [(key_of.get(h["id"], "?"), h.get("similarity")) for h in hits[:1]]}
    if call.get("related"):
        row["reached"] = float(call["related"] in shown)
    else:
        row["silent"] = float(not shown)
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for split in ("tune", "heldout", "all"):
        members = [r for r in rows if split in (r["split"], "all")]
        related = [r["reached"] for r in members if r["related"]]
        unrelated = [r["silent"] for r in members if not r["related"]]
        out[split] = {"reached": mean(related), "unrelated_nothing": mean(unrelated),
                      "n_related": len(related), "n_unrelated": len(unrelated)}
    return out


def render(summary: dict[str, dict[str, float]]) -> list[str]:
    counts = {"n_related": "related", "n_unrelated": "unrelated"}
    return target_table("pre-tool search by meaning (Bash command + description)", summary, TARGETS, counts)
