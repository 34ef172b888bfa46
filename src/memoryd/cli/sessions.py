"""`memoryd sessions` (recent sessions, their handoffs, one's injections) and `memoryd stats` (how automatic recall
did: daemon/sessions/receipts.py), through `admin` reads with `memoryd memories`' exit codes; `memoryd episodes
list|prune`: the journal tier, through the daemon (the only writer), auto-spawning it when needed."""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any

from memoryd import identity
from memoryd.cli.memories import OK, one_line, run, table
from memoryd.cli.output import emit


def worktree_of(path: str) -> str:
    """The git top level holding `path` (what sessions record), else the path made absolute."""
    absolute = os.path.abspath(path)
    return identity.git_output(["rev-parse", "--show-toplevel"], absolute, timeout=5) or absolute


def session_lines(result: dict[str, Any]) -> list[str]:
    rows = [[s["session_id"], (s.get("last_active") or "")[:19], s["ended"], str(s["calls"]), str(s["episodes"]),
             s.get("worktree") or "-"] for s in result["sessions"]]
    lines = table(["SESSION", "LAST ACTIVE", "ENDED", "CALLS", "EPISODES", "WORKTREE"], rows)
    for s in result["sessions"]:
        if s.get("handoff"):
            lines += ["", f"{s['session_id']} handoff ({s['handoff']['id']}):",
                      *(f"  {one_line(line, 200)}" for line in s["handoff"]["text"].splitlines()[:12])]
        elif s.get("last_message"):  # no handoff: what its agent said last, as the hook kept it
            lines += ["", f"{s['session_id']} last message (captured by the session-end hook; no handoff):",
                      *(f"  {one_line(line, 200)}" for line in s["last_message"]["text"].splitlines()[:12])]
    return [*lines, f"{len(result['sessions'])} of {result['total']} sessions"]


def injection_lines(result: dict[str, Any]) -> list[str]:
    rows = [[(r.get("ts") or "")[:19], str(r.get("hook")), str(r.get("chars")),
             ", ".join(f"{i['id']} ({i['tier']})" for i in r["items"]) or "-"] for r in result["injections"]]
    return [*table(["WHEN", "HOOK", "CHARS", "MEMORIES (TIER)"], rows),
            f"{len(rows)} injections, {result['chars']} chars, in session {result['session_id']}"]


def cmd_sessions(op: Any, ns: argparse.Namespace) -> int:
    if ns.worktree == "show":  # `memoryd sessions show SESSION`: what was injected into it
        if not ns.session:
            raise SystemExit("memoryd sessions show: give a session id (sess-<n>)")
        emit(ns.json, op.admin("injections", session_id=ns.session), injection_lines)
        return OK
    emit(ns.json, op.admin("sessions", worktree=worktree_of(ns.worktree) if ns.worktree else None, limit=ns.limit,
                           include_operator=ns.all or None), session_lines)
    return OK


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


def _ask(args: dict[str, Any]) -> Any:
    from memoryd.client.connection import Connection

    conn = Connection({"client": "memoryd-cli"})
    try:
        return conn.call("episodes", args)
    finally:
        conn.close()


def episodes(ns: argparse.Namespace) -> int:
    if ns.action == "prune":
        verb = "would prune" if ns.dry_run else "pruned"
        emit(ns.json, _ask({"action": "prune", "dry_run": ns.dry_run}), lambda r: [
            f"{verb} {r['episodes']} episode(s) in {len(r['sessions'])} session(s)",
            *(f"  {e['session']:12} {e['episodes']:5}  newest {e['newest']}" for e in r["sessions"])])
        return 0
    emit(ns.json, _ask({"action": "list", "session": ns.session}), lambda r: episode_lines(r, ns.session))
    return 0


def episode_lines(result: dict[str, Any], session: str | None) -> list[str]:
    if not result.get("episodes" if session else "sessions"):
        return [f"no episodes{f' in session {session}' if session else ''}"]
    if session:
        return [f"{e['created']}  {e['id']}  [{e['provenance']}]  {e['takeaway']}" for e in result["episodes"]]
    return [f"{row['session']:12} {row['episodes']:5} episodes  newest {row['newest']}  ended {row['ended']}"
            for row in result["sessions"]]


def add_parser(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="recent sessions, how each ended, its handoff; show ID: its injections")
    sessions.add_argument("worktree", nargs="?", help="only this checkout's sessions (a path in it); "
                          "or `show SESSION`: every memory the hooks injected into it, in order")
    sessions.add_argument("session", nargs="?", help=argparse.SUPPRESS)
    sessions.add_argument("--limit", type=int, default=20)
    sessions.add_argument("--all", action="store_true", help="include the operator's own CLI/UI sessions")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(func=functools.partial(run, cmd_sessions))


def add_stats_parser(sub: Any) -> None:
    stats = sub.add_parser("stats", help="how automatic recall did: injections, pointers opened, per session")
    stats.add_argument("--days", type=int, default=7)
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=functools.partial(run, cmd_stats))
