"""Tool arguments checked against the tool's `inputSchema` (the JSON-Schema subset the catalogue uses)."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from memoryd.errors import InvalidParams

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
                                       "array": (list,), "object": (dict,), "null": (type(None),)}


# An escape, a character class (maybe unterminated) or one character: only a bare `$` is changed.
_PATTERN_TOKEN = re.compile(r"\\.?|\[(?:\\.?|[^\\\]])*\]?|.", re.S)


@lru_cache(maxsize=256)
def python_pattern(regex: str) -> re.Pattern[str]:
    """A schema `pattern` (ECMA-262) for Python: `$` outside a class becomes `\\Z` (no final newline)."""
    return re.compile("".join("\\Z" if token == "$" else token for token in _PATTERN_TOKEN.findall(regex)))


def check_args(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """The arguments with defaults filled in, or `InvalidParams` for the first broken rule."""
    if not isinstance(args, dict):
        raise InvalidParams("arguments", "must be an object")
    props: dict[str, Any] = schema.get("properties", {})
    for name in args:
        if name not in props:
            raise InvalidParams(str(name), f"unknown parameter (known: {', '.join(props) or 'none'})")
    for name in schema.get("required", []):
        if args.get(name) is None:
            raise InvalidParams(name, "is required")
    return {name: check_value(name, rule, args[name]) if args.get(name) is not None else rule.get("default")
            for name, rule in props.items()}


def _type_ok(value: Any, types: str | list[str]) -> bool:
    for name in [types] if isinstance(types, str) else types:
        allowed = _TYPES[name]
        if isinstance(value, bool) and bool not in allowed:
            continue  # bool is an int in Python, never in JSON
        if isinstance(value, allowed):
            return True
    return False


def check_value(name: str, rule: dict[str, Any], value: Any) -> Any:
    if "type" in rule and not _type_ok(value, rule["type"]):
        raise InvalidParams(name, f"must be of type {rule['type']}, got {type(value).__name__}")
    if "enum" in rule and value not in rule["enum"]:
        raise InvalidParams(name, f"must be one of {', '.join(map(str, rule['enum']))}")
    if isinstance(value, str):
        if len(value) < rule.get("minLength", 0):
            raise InvalidParams(name, f"must be at least {rule['minLength']} characters")
        if "maxLength" in rule and len(value) > rule["maxLength"]:
            raise InvalidParams(name, f"must be at most {rule['maxLength']} characters")
        if "pattern" in rule and not python_pattern(rule["pattern"]).search(value):
            shown = value if len(value) <= 40 else value[:40] + "…"
            raise InvalidParams(name, f"{shown!r} does not match {rule['pattern']}")
    elif isinstance(value, list):
        if len(value) < rule.get("minItems", 0):
            raise InvalidParams(name, f"must have at least {rule['minItems']} item(s)")
        if "maxItems" in rule and len(value) > rule["maxItems"]:
            raise InvalidParams(name, f"must have at most {rule['maxItems']} items, got {len(value)}")
        if rule.get("items"):
            return [check_value(f"{name}[{i}]", rule["items"], v) for i, v in enumerate(value)]
    elif isinstance(value, dict) and "properties" in rule:
        try:
            return {k: v for k, v in check_args(rule, value).items() if v is not None}
        except InvalidParams as exc:
            raise InvalidParams(f"{name}.{exc.data['param']}", exc.data["reason"]) from exc
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidParams(name, "must be a finite number")
        if "minimum" in rule and value < rule["minimum"]:
            raise InvalidParams(name, f"must be at least {rule['minimum']}, got {value}")
        if "maximum" in rule and value > rule["maximum"]:
            raise InvalidParams(name, f"must be at most {rule['maximum']}, got {value}")
    return value


def require_text(name: str, value: str, max_bytes: int) -> str:
    """A text argument the schema cannot fully check: not blank, and within `max_bytes` of UTF-8."""
    if not value.strip():
        raise InvalidParams(name, "must not be empty or blank")
    if (size := len(value.encode())) > max_bytes:
        raise InvalidParams(name, f"is {size} bytes, over the cap of {max_bytes}")
    return value
