"""`memoryd reindex`: rebuild `state/` from the record files and the log, daemon stopped, with progress
(a cold start on purpose; the pending-write snapshot is kept). Exit codes: 0 done; 1 the daemon is
running; 2 a bad config; 3 a damaged log (the message names the line and the repair)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def add_parser(sub: Any) -> None:
    sub.add_parser("reindex", help="rebuild state/ (caches, search index, checkpoint) from the files; "
                   "daemon stopped").set_defaults(func=lambda ns: main())


class Bar:
    """Progress on stderr: one line redrawn on a terminal, a line per phase otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.tty = stream, stream.isatty()
        self.phase, self.drawn = "", 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if phase != self.phase:
            if self.tty and self.phase:
                self.stream.write("\n")
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


def main() -> int:
    from memoryd import config
    from memoryd.daemon.process import lifecycle
    from memoryd.errors import StoreDamaged

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
