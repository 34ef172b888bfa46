"""Ids: ULIDs for records, the id patterns, and the checks a start runs over whole columns of loaded
values at once. Import contract: stdlib only."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

# Matched with `fullmatch`: `$` would also accept a value that ends in a newline.
ULID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
SESSION_RE = re.compile(r"sess-[1-9][0-9]{0,17}")


def mint_ulid(when: float) -> str:
    """A new ULID for `when` (Unix seconds); minted here, as python-ulid's import was costly (docs/benchmark.md)."""
    value = int(when * 1000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join([_CROCKFORD[value >> shift & 31] for shift in _ULID_SHIFTS])


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_SHIFTS = range(125, -1, -5)


def is_ulid(value: Any) -> bool:
    return isinstance(value, str) and bool(ULID_RE.fullmatch(value))


_ULID_LINES = re.compile(rf"(?:{ULID_RE.pattern}\n)*")


def all_ulids(values: list[str]) -> bool:
    """`is_ulid` of every one of `values` (strings), in one regex call."""
    lines = "\n".join(values) + "\n" if values else ""
    return len(lines) == 27 * len(values) and bool(_ULID_LINES.fullmatch(lines))


def all_of_type(values: Sequence[Any], kind: type) -> bool:
    """Every one of `values` exactly of `kind` (not a subclass), at C speed (docs/benchmark.md)."""
    return not values or set(map(type, values)) == {kind}


def is_session_id(value: Any) -> bool:
    return isinstance(value, str) and bool(SESSION_RE.fullmatch(value))
