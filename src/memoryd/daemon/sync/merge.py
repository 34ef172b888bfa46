"""The merge rule, pure: which of two versions of one record wins, and why.

Two machines changed the same memory since they last agreed. Both run this on the same two
byte strings and must pick the same winner, so the rule uses only what is in the files:
a version's stamp is `removed_at` for a tombstone and `updated` for a live memory (a removal is
a change made at `removed_at`), the newer stamp wins, and equal stamps are broken by the file's
sha256 (the larger wins) — identical on every machine. A version that does not parse has the
empty stamp and loses to any that does. The loser is never dropped: the caller keeps it under
`conflicts/<id>/<sha256>.md`. No text of a record is ever merged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from memoryd.daemon import store
from memoryd.daemon.sync.layout import TOMB


@dataclass(frozen=True)
class Version:
    """One version of a record: live or tombstone, with its file's bytes."""

    state: str
    data: bytes

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def stamp(self) -> str:
        return stamp_of(self.state, self.data)


def _text(value: Any) -> str:
    # A bare YAML timestamp (a hand edit) loads as a datetime: compare its ISO form.
    if hasattr(value, "isoformat"):
        return str(value.isoformat()).replace("+00:00", "Z")
    return value if isinstance(value, str) else ""


def stamp_of(state: str, data: bytes) -> str:
    """When this version was made: `removed_at` of a tombstone, `updated` of a live memory;
    "" when the file does not parse (so it loses)."""
    try:
        meta, _body = store.parse(data)
    except (store.BadRecord, UnicodeDecodeError):
        return ""
    return _text(meta.get("removed_at") if state == TOMB else meta.get("updated"))


@dataclass(frozen=True)
class Decision:
    winner: Version
    loser: Version
    rule: str  # "newer" (the stamps differ) or "sha" (equal stamps, broken by sha256)


def pick(a: Version, b: Version) -> Decision:
    """The winner of two differing versions of one record; symmetric: pick(a, b) == pick(b, a)."""
    key_a, key_b = (a.stamp, a.sha), (b.stamp, b.sha)
    winner, loser = (a, b) if key_a > key_b else (b, a)
    return Decision(winner, loser, "newer" if key_a[0] != key_b[0] else "sha")


def three_way(base: Any, ours: Any, theirs: Any) -> str:
    """Which side a record's merge takes, by comparing versions (any comparable value: blob ids):
    "same" (nothing to do), "ours", "theirs", or "conflict" (both changed it differently)."""
    if ours == theirs:
        return "same"
    if ours == base:
        return "theirs"
    if theirs == base:
        return "ours"
    return "conflict"
