"""YAML from files memoryd did not write itself: `check` walks the parser's events, before any object is
built, refusing anchors and aliases (a few hundred bytes expand to gigabytes), tags and deep nesting.
Import contract: stdlib, and yaml on first use (the store's cold start does not pay for it)."""

from __future__ import annotations

import functools
from typing import Any

MAX_DEPTH = 64  # memoryd's and bettermemory's frontmatter nest 2 or 3 levels


class YAMLRefused(ValueError):
    """YAML not loaded, unsafe or not YAML; `line` is 1-based in the text given, or None."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


@functools.cache
def yaml_kit() -> tuple[Any, Any, Any]:
    """PyYAML with its safe loader and dumper, libyaml's when present (docs/benchmark.md)."""
    import yaml

    try:
        from yaml import CSafeDumper as dumper
        from yaml import CSafeLoader as loader
    except ImportError:  # pragma: no cover
        from yaml import SafeDumper as dumper  # type: ignore[assignment]
        from yaml import SafeLoader as loader  # type: ignore[assignment]
    return yaml, loader, dumper


def check(text: str, max_depth: int = MAX_DEPTH) -> None:
    """YAMLRefused at the first anchor, alias, tag or nesting past `max_depth`, or when `text` does not parse."""
    yaml, loader, _ = yaml_kit()
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise YAMLRefused("YAML anchors and aliases are not accepted", line)
            if getattr(event, "tag", None) is not None:
                raise YAMLRefused("explicit YAML tags are not accepted", line)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise YAMLRefused(f"nested deeper than {max_depth} levels", line)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YAMLRefused(f"not YAML: {exc.problem or exc}", mark.line + 1 if mark else None) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise YAMLRefused(f"not YAML: {type(exc).__name__}") from None


def load(text: str, max_depth: int = MAX_DEPTH, walk: bool = True) -> Any:
    """`text` loaded safely, else YAMLRefused; `walk=False` skips `check`, for text without '&', '*' or '!'."""
    if walk:
        check(text, max_depth)
    yaml, loader, _ = yaml_kit()
    try:
        return yaml.load(text, Loader=loader)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:  # a bad date, an int too long
        raise YAMLRefused(f"not YAML: {type(exc).__name__}") from None
