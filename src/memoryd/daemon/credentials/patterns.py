"""Regular expressions compiled on first use or by `compile_all` (a tenth of a start: docs/benchmark.md)."""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["compile_all", "lazy"]


class _Lazy:
    # Once compiled, the pattern's methods are copied onto the instance, for speed.
    _METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "split")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)

    def compile(self) -> None:
        if "_compiled" not in self.__dict__:
            compiled = re.compile(*self._args)
            self.__dict__.update({m: getattr(compiled, m) for m in self._METHODS}, _compiled=compiled)

    def __getattr__(self, name: str) -> Any:  # only until compiled, and for rarer attributes
        if name.startswith("__") or name in ("_args", "_compiled"):
            raise AttributeError(name)
        self.compile()
        return getattr(self._compiled, name)


_DECLARED: list[_Lazy] = []


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern compiled on first use, typed as the compiled one."""
    pending = _Lazy(pattern, flags)
    _DECLARED.append(pending)
    return cast("re.Pattern[str]", pending)


def compile_all() -> None:
    for pending in _DECLARED:
        pending.compile()
