"""The store's offline tools (docs/storage.md): `memoryd log tail|verify|repair` ('Reliability') and `memoryd
reindex`, which rebuilds `state/` with the daemon stopped; its exit codes: 0 done; 1 the daemon is running; 2 a bad
config; 3 a damaged log (the message names the line and the repair)."""

from __future__ import annotations

import argparse  # free: this module is imported where the parser is built
import sys
import time
from typing import Any, TextIO

from memoryd import paths
from memoryd.cli.output import emit
from memoryd.errors import StoreDamaged


def add_parser(sub: Any) -> None:
    logcmd = sub.add_parser("log", help="follow, verify or repair the event log")
    logcmd.add_argument("action", choices=["tail", "verify", "repair"])
    logcmd.add_argument("-f", "--follow", action="store_true")
    logcmd.add_argument("--json", action="store_true")
    logcmd.set_defaults(func=main)


def main(ns: argparse.Namespace) -> int:
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
    if torn := report.get("torn_tail"):
        lines.append(f"torn tail, repaired at next start: {torn['bytes']} bytes at {torn['segment']}:{torn['line']}")
    return lines + [f"quarantined: seq {marker['first_seq']}..{marker['seq']} at {marker['segment']}:"
                    f"{marker['line']} ({marker['reason']}){_kept(marker)}" for marker in report.get("quarantined", [])]


def repair(events: Any, as_json: bool) -> int:
    """`log repair`: with the daemon stopped (its lock held here), quarantine what replay refuses."""
    import fcntl

    from memoryd.daemon.storage import logcheck
    from memoryd.daemon.storage.clock import iso

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
    if not segments:
        print("memoryd: the event log is empty", file=sys.stderr)
        return 0
    with open(segments[-1], encoding="utf-8") as handle:
        sys.stdout.writelines(handle.readlines()[-20:])
        while follow:
            if line := handle.readline():
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0


def add_reindex_parser(sub: Any) -> None:
    sub.add_parser("reindex", help="rebuild state/ (caches, search index, checkpoint) from the files; "
                   "daemon stopped").set_defaults(func=lambda ns: reindex())


class Bar:
    """Progress on stderr: one line redrawn on a terminal, a line per phase otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.tty = stream, stream.isatty()
        self.phase, self.drawn = "", 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if phase != self.phase:
            self.close()
            self.phase, self.drawn = phase, 0.0
            if not self.tty:
                self.stream.write(f"memoryd: {phase}\n")
        if self.tty and now - self.drawn >= 0.1:
            self.drawn = now
            filled = int(30 * min(done, total) / total) if total else 0
            shown = f"[{'#' * filled}{'.' * (30 - filled)}] {done:,}/{total:,}" if total else f"{done:,}"
            self.stream.write(f"\r{phase:28} {shown}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.phase:
            self.stream.write("\n")


def reindex() -> int:
    from memoryd import config
    from memoryd.daemon.process import lifecycle

    bar = Bar(sys.stderr)
    began = time.monotonic()
    failed: tuple[int, str] | None = None
    try:
        report: dict[str, Any] = lifecycle.reindex(bar)
    except lifecycle.AlreadyRunning as exc:
        failed = 1, f"the daemon is {exc}; stop it first (memoryd stop), then reindex"
    except config.ConfigError as exc:
        failed = 2, str(exc)
    except StoreDamaged as exc:
        failed = 3, exc.message
    bar.close()
    if failed:
        print(f"memoryd: {failed[1]}", file=sys.stderr)
        return failed[0]
    print(f"memoryd: reindexed {report.get('memories', 0):,} memories, {report.get('tombstones', 0):,} tombstones "
          f"and the episodes in {time.monotonic() - began:.1f} s "
          f"({report.get('memories_bad_files', 0) + report.get('bad_files', 0)} bad files; see memory_health)")
    return 0
