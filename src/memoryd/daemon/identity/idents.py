"""Ids: ULIDs for records (`mint_ulid`, minted here), the id patterns, and the checks a start
runs over whole columns of loaded values at once (`all_ulids`, `all_of_type`).

Import contract: stdlib only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

# Matched with `fullmatch`: `$` would also accept a value that ends in a newline.
ULID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
SESSION_RE = re.compile(r"sess-[1-9][0-9]{0,17}")


def mint_ulid(when: float) -> str:
    """A new ULID for `when` (Unix seconds): 48 bits of Unix milliseconds, then 80 random bits, in Crockford
    base32. Minted here rather than with python-ulid, whose import (it reads its own package
    metadata) took a large share of a daemon start's ~0.5 s budget (docs/benchmark.md)."""
    value = int(when * 1000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join([_CROCKFORD[value >> shift & 31] for shift in _ULID_SHIFTS])


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_SHIFTS = range(125, -1, -5)


def is_ulid(value: Any) -> bool:
    return isinstance(value, str) and bool(ULID_RE.fullmatch(value))


_ULID_LINES = re.compile(rf"(?:{ULID_RE.pattern}\n)*")


def all_ulids(values: list[str]) -> bool:
    """`is_ulid` of every one of `values` (strings), in one regex call: 100k ids at start.
    27 characters a value means no value held a newline (each line is one id)."""
    lines = "\n".join(values) + "\n" if values else ""
    return len(lines) == 27 * len(values) and bool(_ULID_LINES.fullmatch(lines))


def all_of_type(values: Sequence[Any], kind: type) -> bool:
    """Every one of `values` exactly of `kind` (not a subclass), at C speed, faster than
    a generator's `type(v) is kind` each (docs/benchmark.md)."""
    return not values or set(map(type, values)) == {kind}


def is_session_id(value: Any) -> bool:
    return isinstance(value, str) and bool(SESSION_RE.fullmatch(value))
