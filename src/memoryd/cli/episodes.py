"""`memoryd episodes list [SESSION]` / `memoryd episodes prune [--dry-run]`, through the daemon
(the only writer), auto-spawning it when needed."""

from __future__ import annotations

import argparse
import json
from typing import Any


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
        result = _ask({"action": "prune", "dry_run": ns.dry_run})
        if ns.json:
            print(json.dumps(result, indent=2))
        else:
            verb = "would prune" if ns.dry_run else "pruned"
            print(f"{verb} {result['episodes']} episode(s) in {len(result['sessions'])} session(s)")
            for entry in result["sessions"]:
                print(f"  {entry['session']:12} {entry['episodes']:5}  newest {entry['newest']}")
        return 0
    result = _ask({"action": "list", "session": ns.session})
    if ns.json:
        print(json.dumps(result, indent=2))
    elif not result.get("episodes" if ns.session else "sessions"):
        print(f"no episodes{f' in session {ns.session}' if ns.session else ''}")
    elif ns.session:
        for e in result["episodes"]:
            print(f"{e['created']}  {e['id']}  [{e['provenance']}]  {e['takeaway']}")
    else:
        for row in result["sessions"]:
            print(f"{row['session']:12} {row['episodes']:5} episodes  newest {row['newest']}  ended {row['ended']}")
    return 0
