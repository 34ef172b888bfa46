"""A tool's arguments declared once, as a typed signature: a `TypedDict` whose annotations are the JSON Schema
the daemon checks each call against (`validate.check_args`) and tools/list shows (docs/architecture.md)."""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


class Rule:
    """What a parameter's type cannot say: `Rule("description", minimum=1, maximum=50, default=5)`."""

    def __init__(self, description: str = "", **keywords: Any) -> None:
        self.keywords = ({"description": description} if description else {}) | keywords


def input_schema(args: type) -> dict[str, Any]:
    """The object schema of the TypedDict `args`, properties in declaration order."""
    hints = get_type_hints(args, include_extras=True)
    schema: dict[str, Any] = {"type": "object", "properties": {name: rule_of(hint) for name, hint in hints.items()}}
    # Read from the hints, not `__required_keys__`: under postponed annotations Python 3.11's
    # TypedDict cannot see a `NotRequired` written as a string and lists every key as required.
    total = args.__total__  # type: ignore[attr-defined]
    required = [name for name, hint in hints.items()
                if get_origin(hint) is Required or (total and get_origin(hint) is not NotRequired)]
    if required:  # absent means none
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def rule_of(hint: Any) -> dict[str, Any]:
    origin = get_origin(hint)
    if origin in (NotRequired, Required):
        return rule_of(get_args(hint)[0])
    if origin is Annotated:
        base, *extras = get_args(hint)
        rule = rule_of(base)
        for extra in extras:
            rule |= extra.keywords
        if rule.get("default") is False:  # unsaid: every listed character costs each agent context
            del rule["default"]
        return rule
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(hint))}
    if origin in (Union, types.UnionType):  # Literal[...] | Literal[...]: one enum
        return {"type": "string", "enum": [value for part in get_args(hint) for value in rule_of(part)["enum"]]}
    if origin is list:
        (item,) = get_args(hint)
        return {"type": "array"} | ({"items": rule_of(item)} if item is not Any else {})
    if hint is Any:
        return {}
    if origin is dict or hint in _SCALARS:
        return {"type": _SCALARS[origin or hint]}
    raise TypeError(f"no JSON Schema for the annotation {hint!r}")
