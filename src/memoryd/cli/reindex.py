"""`memoryd reindex`: rebuild the derived files of `state/` (episode and memory caches, the search
index, the checkpoint) from the record files and the log, with the daemon stopped.

What a cold start does, done on purpose, with a progress bar: for a store whose caches were
lost or that was restored from an `export`, or to be sure nothing derived is stale. The
pending-write snapshot is not derived and is kept. Exit codes: 0 done; 1 the daemon is running
(stop it first); 2 a bad config; 3 a damaged log (the message names the line and the repair).
"""

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
            if total:
                filled = int(30 * min(done, total) / total)
                line = f"{phase:28} [{'#' * filled}{'.' * (30 - filled)}] {done:,}/{total:,}"
            else:
                line = f"{phase:28} {done:,}"
            self.stream.write("\r" + line)
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
    try:
        report: dict[str, Any] = lifecycle.reindex(bar)
    except lifecycle.AlreadyRunning as exc:
        bar.close()
        print(f"memoryd: the daemon is {exc}; stop it first (memoryd stop), then reindex", file=sys.stderr)
        return 1
    except config.ConfigError as exc:
        bar.close()
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
    except StoreDamaged as exc:
        bar.close()
        print(f"memoryd: {exc.message}", file=sys.stderr)
        return 3
    bar.close()
    print(f"memoryd: reindexed {report.get('memories', 0):,} memories, {report.get('tombstones', 0):,} tombstones "
          f"and the episodes in {time.monotonic() - began:.1f} s "
          f"({report.get('memories_bad_files', 0) + report.get('bad_files', 0)} bad files; see memory_health)")
    return 0
