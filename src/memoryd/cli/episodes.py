"""`memoryd episodes list [SESSION]` / `memoryd episodes prune [--dry-run]`, through the daemon
(the only writer), auto-spawning it when needed."""

from __future__ import annotations

import argparse
from typing import Any

from memoryd.cli.output import emit


def _ask(args: dict[str, Any]) -> Any:
    from memoryd.client.connection import Connection

    conn = Connection({"client": "memoryd-cli"})
    conn.connect()
    try:
        return conn.call("episodes", args)
    finally:
        conn.close()


def main(ns: argparse.Namespace) -> int:
    if ns.action == "prune":
        verb = "would prune" if ns.dry_run else "pruned"
        emit(ns.json, _ask({"action": "prune", "dry_run": ns.dry_run}), lambda r: [
            f"{verb} {r['episodes']} episode(s) in {len(r['sessions'])} session(s)",
            *(f"  {e['session']:12} {e['episodes']:5}  newest {e['newest']}" for e in r["sessions"])])
        return 0
    emit(ns.json, _ask({"action": "list", "session": ns.session}), lambda r: list_lines(r, ns.session))
    return 0


def list_lines(result: dict[str, Any], session: str | None) -> list[str]:
    if not result.get("episodes" if session else "sessions"):
        return [f"no episodes{f' in session {session}' if session else ''}"]
    if session:
        return [f"{e['created']}  {e['id']}  [{e['provenance']}]  {e['takeaway']}" for e in result["episodes"]]
    return [f"{row['session']:12} {row['episodes']:5} episodes  newest {row['newest']}  ended {row['ended']}"
            for row in result["sessions"]]
