"""Regular expressions compiled on first use (`lazy`), and all at once in the memory tier's first
slice after start (`compile_all`): compiling ~100 is a tenth of a start (docs/benchmark.md).
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["compile_all", "lazy"]


class _Lazy:
    """A pattern compiled on first use, then called as fast as the compiled one: its methods are
    copied onto the instance."""

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
    """A pattern that compiles itself when first used (typed as the compiled pattern it becomes)."""
    pending = _Lazy(pattern, flags)
    _DECLARED.append(pending)
    return cast("re.Pattern[str]", pending)


def compile_all() -> None:
    """Compile every declared pattern now (idempotent)."""
    for pending in _DECLARED:
        pending.compile()
