"""Tool profiles: which tools a bridge lists (docs/tools.md, "Tool profiles").
Import contract: stdlib only (the bridge's start path reads this before anything else)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

PROFILES = ("core", "full")
DEFAULT = "core"
ENV_VAR = "MEMORYD_TOOLS"


class ProfileError(ValueError):
    """A profile name nobody knows; the message names where it came from and the choices."""


def check(value: object, where: str) -> str:
    """`value` if it names a profile, else `ProfileError` naming `where` and the choices."""
    if value not in PROFILES:
        raise ProfileError(f"{where} must be one of {', '.join(PROFILES)}, got {value!r}")
    return str(value)


def for_bridge(args: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """`--tools X` / `--tools=X` in `args`, else `MEMORYD_TOOLS`, else None; anything else is a `ProfileError`."""
    rest = list(args)
    chosen: str | None = None
    while rest:
        arg = rest.pop(0)
        if arg == "--tools" and rest:
            chosen = check(rest.pop(0), "--tools")
        elif arg.startswith("--tools="):
            chosen = check(arg.split("=", 1)[1], "--tools")
        else:
            raise ProfileError(f"unexpected argument {arg!r} (usage: memoryd mcp [--tools {'|'.join(PROFILES)}])")
    if chosen is None and environ.get(ENV_VAR):
        chosen = check(environ[ENV_VAR], ENV_VAR)
    return chosen
