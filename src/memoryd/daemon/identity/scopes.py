"""Scope rules shared by every tier: `:` nests, and disabling a scope hides what is below it."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet


def under(scope: str, parent: str) -> bool:
    """True when `scope` is `parent` or nested below it (`projects:memoryd` under `projects`)."""
    return scope == parent or scope.startswith(parent + ":")


def is_hidden(scopes: Iterable[str], disabled: AbstractSet[str]) -> bool:
    """A record is hidden when any of its scopes is disabled or nested below a disabled scope."""
    return bool(disabled) and any(under(s, d) for s in scopes for d in disabled)


def matches_any(scopes: Iterable[str], wanted: Iterable[str]) -> bool:
    """A scope filter: the record has one of `wanted`, or a scope nested below one."""
    wanted = list(wanted)
    return any(under(s, w) for s in scopes for w in wanted)


def unique(scopes: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(scopes))
