"""The CLI's one printer: `--json` prints a verb's result as JSON (ASCII-escaped), otherwise its
lines, with stored text's control characters made visible."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7f, 0xa0)] if c not in (0x09, 0x0a)}


def emit(as_json: bool, result: Any, lines: Callable[[Any], list[str]], out: TextIO | None = None) -> None:
    """The result as JSON (no raw control byte reaches a pipe), or `lines(result)` made visible
    (agent-written text must not drive the terminal with escape sequences); to `out` or stdout."""
    print(json.dumps(result, indent=2) if as_json else visible("\n".join(lines(result))), file=out)


def visible(text: str) -> str:
    """`text` with C0/C1 control characters (ESC, CSI, BEL, …; not tab or newline) as `\\xNN`."""
    return text.translate(_CONTROL)
