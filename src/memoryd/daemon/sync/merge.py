"""The merge rule, pure: which of two versions of one record wins, and why (docs/sync.md, "Merging"),
from only what is in the two files, so every machine picks the same winner."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memoryd.daemon.storage import frontmatter
from memoryd.daemon.storage.clock import stamp_text
from memoryd.daemon.sync.layout import TOMB

STAMP_FIELDS = ("created", "updated", "last_verified_at", "removed_at")
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")  # `clock.iso`'s format
# How far past this machine's clock a pulled stamp may be (clocks a little apart); beyond, a stamp
# would win every merge until then.
SKEW_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Version:
    state: str
    data: bytes

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def key(self, not_after: int | None = None) -> tuple[bool, int, str]:
        """What the rule orders by: a valid stamp (not past `not_after`), the stamp, the sha."""
        stamp = stamp_of(self.state, self.data)
        valid = stamp is not None and (not_after is None or stamp <= not_after)
        return valid, stamp if valid and stamp is not None else 0, self.sha


def stamp_ms(value: Any) -> int | None:
    """Epoch ms of a stamp in the store's format (a bare YAML timestamp counts); else None."""
    value = stamp_text(value)
    if not isinstance(value, str) or not _STAMP.fullmatch(value):
        return None
    try:
        moment = datetime.fromisoformat(value[:19]).replace(tzinfo=UTC)
    except ValueError:  # month 13, February 30th, …
        return None
    return int(moment.timestamp()) * 1000 + int(value[20:23])


def horizon() -> int:
    """The latest stamp this machine believes: now plus the clock-skew margin, in ms."""
    return int(time.time() * 1000) + SKEW_MS


def stamp_of(state: str, data: bytes) -> int | None:
    """`removed_at` of a tombstone, `updated` of a live memory, in ms; None when it does not parse."""
    try:
        meta, _body = frontmatter.parse(data)
    except (frontmatter.BadRecord, UnicodeDecodeError):
        return None
    return stamp_ms(meta.get("removed_at") if state == TOMB else meta.get("updated"))


@dataclass(frozen=True)
class Decision:
    winner: Version
    loser: Version
    rule: str  # "newer" (the stamps differ) or "sha" (equal stamps, broken by sha256)


def pick(a: Version, b: Version, not_after: int | None = None) -> Decision:
    """The winner of two differing versions, symmetric; a stamp past `not_after` (ms) counts as none."""
    key_a, key_b = a.key(not_after), b.key(not_after)
    winner, loser = (a, b) if key_a > key_b else (b, a)
    return Decision(winner, loser, "newer" if key_a[:2] != key_b[:2] else "sha")


def three_way(base: Any, ours: Any, theirs: Any) -> str:
    """"same", "ours", "theirs" or "conflict": which side a merge takes, comparing any values."""
    if ours == theirs:
        return "same"
    if ours == base:
        return "theirs"
    if theirs == base:
        return "ours"
    return "conflict"
