"""The web view's live feed: follow the store's event log from its files, read-only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FEED_BACKLOG = 20
FEED_POLL_S = 0.25


def follow_events(events_dir: Path, stop: threading.Event, backlog: int = FEED_BACKLOG,
                  poll_s: float = FEED_POLL_S) -> Iterator[dict[str, Any] | None]:
    """Yield the last `backlog` events, then each new one as the daemon appends it (None every
    poll with nothing new, so the caller can ping). Follows a new monthly segment when one starts;
    a line is yielded only once its newline is there (a half-written line waits)."""
    current, position = max(events_dir.glob("*.jsonl"), default=None), 0
    if current is not None:
        data = current.read_bytes()
        position = data.rfind(b"\n") + 1  # a half-written last line is read with the new ones
        for line in data[:position].splitlines()[-backlog:]:
            yield _event(line)
    pending = b""
    while not stop.is_set():
        newest = sorted(events_dir.glob("*.jsonl"))
        if current is None and newest:
            current, position = newest[0], 0
        if current is not None:
            with open(current, "rb") as handle:
                handle.seek(position)
                chunk = handle.read()
            position += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    yield _event(line)
            later = [s for s in newest if s.name > current.name]
            if later and not pending:
                current, position = later[0], 0
                continue
        yield None
        stop.wait(poll_s)


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {"kind": "unreadable line"}
    return {k: v for k, v in event.items() if k not in ("prev", "hash")} if isinstance(event, dict) else {}
