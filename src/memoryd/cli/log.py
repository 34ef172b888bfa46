"""`memoryd log tail|verify|repair`: follow the event log, check its hash chain, or (daemon
stopped) quarantine what replay refuses (docs/storage.md, 'Reliability')."""

from __future__ import annotations

import argparse  # free: this module is imported where the parser is built
import sys
from typing import Any

from memoryd.cli.output import emit


def add_parser(sub: Any) -> None:
    logcmd = sub.add_parser("log", help="follow, verify or repair the event log")
    logcmd.add_argument("action", choices=["tail", "verify", "repair"])
    logcmd.add_argument("-f", "--follow", action="store_true")
    logcmd.add_argument("--json", action="store_true")
    logcmd.set_defaults(func=main)


def main(ns: argparse.Namespace) -> int:
    from memoryd import paths
    from memoryd.daemon.storage import logcheck

    events = paths.store_root() / "events"
    if ns.action == "verify":
        report = logcheck.verify(events)
        emit(ns.json, report, verify_lines)
        return 0 if report["ok"] else 1
    if ns.action == "repair":
        return repair(events, ns.json)
    return tail(logcheck.segments(events), ns.follow)


def verify_lines(report: dict[str, Any]) -> list[str]:
    """`log verify` in words: a torn tail is not a break (the next start cuts it)."""
    if not report["ok"]:
        return [(f"log BROKEN at seq {report['broken_seq']} ({report['segment']}:{report['line']}): "
                 f"{report['reason']}"),
                "the daemon will not start on it; fix: memoryd stop && memoryd log repair (docs/storage.md)"]
    lines = [f"log ok: {report['events']} events, chain intact"]
    torn = report.get("torn_tail")
    if torn:
        lines.append(f"torn tail, repaired at next start: {torn['bytes']} bytes at {torn['segment']}:{torn['line']}")
    for marker in report.get("quarantined", []):
        lines.append(f"quarantined: seq {marker['first_seq']}..{marker['seq']} at {marker['segment']}:"
                     f"{marker['line']} ({marker['reason']}){_kept(marker)}")
    return lines


def repair(events: Any, as_json: bool) -> int:
    """`log repair`: with the daemon stopped (its lock held here), quarantine what replay refuses."""
    import fcntl
    import time

    from memoryd import paths
    from memoryd.daemon.storage import logcheck
    from memoryd.daemon.storage.clock import iso
    from memoryd.errors import StoreDamaged

    paths.ensure_private_dir(paths.runtime_dir())
    with open(paths.lock_path(), "a+") as lock:  # the daemon's single-instance lock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("memoryd: the daemon is running; stop it first (memoryd stop)", file=sys.stderr)
            return 1
        try:
            report = logcheck.repair(events, iso(time.time()))
        except StoreDamaged as exc:
            print(f"memoryd: {exc.message}", file=sys.stderr)
            return 1
    emit(as_json, report, repair_lines)
    return 0


def repair_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    if not report["segments_rewritten"]:
        lines.append("log ok: nothing to repair")
    elif report["torn_bytes_truncated"]:
        lines.append(f"cut a torn tail of {report['torn_bytes_truncated']} bytes (a crash mid-append)")
    return lines + [f"quarantined seq {marker['first_seq']}..{marker['seq']} in {marker['segment']} "
                    f"({marker['lines']} line(s): {marker['reason']}){_kept(marker)}"
                    for marker in report["quarantined"]]


def _kept(marker: dict[str, Any]) -> str:
    return f"; the removed bytes are in events/{marker['file']}" if marker.get("file") else ""


def tail(segments: list[Any], follow: bool) -> int:
    import time

    if not segments:
        print("memoryd: the event log is empty", file=sys.stderr)
        return 0
    with open(segments[-1], encoding="utf-8") as handle:
        lines = handle.readlines()[-20:]
        sys.stdout.writelines(lines)
        while follow:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0
