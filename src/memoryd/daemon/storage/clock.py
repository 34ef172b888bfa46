"""The store's one time format, ISO-8601 UTC with milliseconds and `Z` (`iso`, `parse_iso`;
`parse_stamp` and `stamp_text` for what a hand edit may leave), and the injected `Clock`."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Clock = Callable[[], float]


def iso(t: float) -> str:
    global _iso_second
    whole = int(t // 1)
    if whole != _iso_second[0]:  # a write stamps the same second 2-3 times: format it once
        tm = time.gmtime(whole)
        # By hand: strftime's %Y gives "999" for year 999, which breaks string ordering.
        second = f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d}T{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}"
        _iso_second = (whole, second)
    return f"{_iso_second[1]}.{min(999, int((t - whole) * 1000)):03d}Z"


_iso_second: tuple[int | None, str] = (None, "")


def parse_iso(ts: str) -> float:
    base, _, frac = ts.rstrip("Z").partition(".")
    seconds = float("0." + frac) if frac else 0.0
    if len(base) == 19 and base[10] == "T":  # our own stamps: the C parser (strptime is ~10x slower)
        try:
            return datetime.fromisoformat(base).replace(tzinfo=UTC).timestamp() + seconds
        except ValueError:
            pass
    import calendar

    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + seconds


def parse_stamp(ts: str) -> float:
    """`parse_iso`, but a stamp that is none (`updated: zzzz`) is the epoch: stale, never an error."""
    try:
        return parse_iso(ts)
    except (ValueError, TypeError, AttributeError, OverflowError):
        return 0.0


def stamp_text(value: Any) -> Any:
    """A bare YAML timestamp (naive is UTC) as the text `iso` writes; any other value as it is."""
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return value
