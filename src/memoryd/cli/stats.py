"""`memoryd stats [--days N]`: how automatic recall did in real work (daemon/sessions/receipts.py):
injections per session, pointers opened, the memories injected most and pointed to but never opened.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from memoryd.cli.memories import OK, run, table
from memoryd.cli.output import emit


def stats_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"last {result['days']} days (since {result['since'][:19]}): {result['sessions']} sessions, "
             f"{result['injections']} injections ({result['injections_per_session']} and "
             f"{result['chars_per_session']} chars a session)",
             f"pointers: {result['pointers']} shown, {result['pointers_opened']} opened "
             f"(open rate {result['pointer_open_rate']:.0%})"]
    if result["most_injected"]:
        rows = [[r["id"], str(r["times"])] for r in result["most_injected"]]
        lines += ["", *table(["MEMORY", "TIMES INJECTED"], rows)]
    if result["never_opened"]:
        lines += ["", "pointed to but never opened: " + ", ".join(result["never_opened"])]
    return lines


def cmd_stats(op: Any, ns: argparse.Namespace) -> int:
    emit(ns.json, op.admin("stats", days=ns.days), stats_lines)
    return OK


def add_parser(sub: Any) -> None:
    stats = sub.add_parser("stats", help="how automatic recall did: injections, pointers opened, per session")
    stats.add_argument("--days", type=int, default=7)
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=functools.partial(run, cmd_stats))
