"""What a tool is — one declaration: name, description, schemas, annotations, handler, its profile
and how a resent call is replayed — and schema shorthands.

Import contract: nothing above `core`. Each tier module lists its `TOOLS`; `catalogue` joins them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.core import Call, Core
from memoryd.daemon.identity import idents

SCOPE_PATTERN = r"^(?=.{1,128}$)[a-z0-9]+(?:[-:][a-z0-9]+)*$"  # the length cap rides in the pattern
ULID_PATTERN = f"^{idents.ULID_RE.pattern}$"  # the schemas' patterns are the checks' own
SESSION_PATTERN = f"^{idents.SESSION_RE.pattern}$"
SHARED_PATTERNS = frozenset({SCOPE_PATTERN, ULID_PATTERN, SESSION_PATTERN})


@dataclass
class Parked:
    """A handler's answer "not yet": the server re-runs `check` after writes until `deadline`."""

    check: Callable[[bool], dict[str, Any] | None]  # check(timed_out) -> result, or None to keep waiting
    deadline: float


Result = dict[str, Any] | Parked


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: dict[str, Any]
    required: tuple[str, ...]
    returns: dict[str, Any]
    handler: Callable[[Call, dict[str, Any]], Result]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    core: bool = False  # listed in the `core` profile (docs/tools.md, "Tool profiles"); all are in `full`
    # A call resent after it was applied (a restart lost the reply cache) is answered from what it
    # did: the logged event -> its first result, or None to run it again (daemon/calls/resent.py).
    replay: Callable[[Core, dict[str, Any]], dict[str, Any] | None] | None = None

    @property
    def input_schema(self) -> dict[str, Any]:
        """The rules the daemon checks every call against (validate.check_args)."""
        schema: dict[str, Any] = {"type": "object", "properties": self.params}
        if self.required:  # absent means none: every listed char is paid for in context
            schema["required"] = list(self.required)
        schema["additionalProperties"] = False
        return schema

    def wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": advertised(self.input_schema),
            "outputSchema": {"type": "object", "properties": self.returns},
            "annotations": {"readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                            "idempotentHint": self.idempotent, "openWorldHint": False},
        }


def advertised(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as tools/list shows it: without the id and scope patterns. Those are the same in
    every tool, so the server instructions say them once; the daemon still checks every pattern."""
    shown = {key: value for key, value in schema.items() if not (key == "pattern" and value in SHARED_PATTERNS)}
    if "properties" in shown:
        shown["properties"] = {name: advertised(rule) for name, rule in shown["properties"].items()}
    if isinstance(shown.get("items"), dict):
        shown["items"] = advertised(shown["items"])
    return shown


def string(desc: str = "", **rules: Any) -> dict[str, Any]:
    return {"type": "string", **({"description": desc} if desc else {}), **rules}


def integer(desc: str, default: int, lo: int, hi: int) -> dict[str, Any]:
    rule: dict[str, Any] = {"type": "integer", "default": default, "minimum": lo, "maximum": hi}
    if desc:
        rule["description"] = desc
    return rule


def boolean(desc: str = "", default: bool = False) -> dict[str, Any]:
    # A false default goes unsaid (absent means false) to keep tools/list short.
    rule: dict[str, Any] = {"type": "boolean", "default": True} if default else {"type": "boolean"}
    if desc:
        rule["description"] = desc
    return rule


def scope_list(desc: str, max_items: int = 64, min_items: int = 0) -> dict[str, Any]:
    rule: dict[str, Any] = {"type": "array", "maxItems": max_items, "items": string(pattern=SCOPE_PATTERN)}
    if desc:
        rule["description"] = desc
    if min_items:
        rule["minItems"] = min_items
    return rule


def scope(desc: str) -> dict[str, Any]:
    return string(desc, pattern=SCOPE_PATTERN)


def ulid(desc: str) -> dict[str, Any]:
    return string(desc, pattern=ULID_PATTERN)


def session_id(desc: str) -> dict[str, Any]:
    return string(desc, pattern=SESSION_PATTERN)


# Output-schema shorthands: loose on purpose (clients validate structuredContent against them),
# and short, because every agent pays for tools/list in context on every session.
ANY_LIST: dict[str, Any] = {"type": "array"}
ANY_OBJ: dict[str, Any] = {"type": "object"}
STR: dict[str, Any] = {"type": "string"}
OPT_STR: dict[str, Any] = {}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
