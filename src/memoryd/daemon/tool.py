"""What a tool is, in one declaration (its arguments' typed signature: `calls.signature`), and the argument
types tools share. Import contract: nothing above `core`; each tier lists its `TOOLS`, `catalogue` joins them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, TypedDict

from memoryd.daemon.calls.signature import Rule, input_schema
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
    args: type  # a TypedDict: its annotations are the input schema
    returns: dict[str, Any]
    handler: Callable[[Call, dict[str, Any]], Result]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    core: bool = False  # listed in the `core` profile (docs/tools.md, "Tool profiles"); all are in `full`
    # A call resent after it was applied (a restart lost the reply cache) is answered from what it
    # did: the logged event -> its first result, or None to run it again (daemon/calls/resent.py).
    replay: Callable[[Core, dict[str, Any]], dict[str, Any] | None] | None = None

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """The rules the daemon checks every call against (validate.check_args)."""
        return input_schema(self.args)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    def wire(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": advertised(self.input_schema),
                "outputSchema": {"type": "object", "properties": self.returns},
                "annotations": {"readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                                "idempotentHint": self.idempotent, "openWorldHint": False}}


def advertised(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as tools/list shows it: without the id and scope patterns. Those are the same in
    every tool, so the server instructions say them once; the daemon still checks every pattern."""
    shown = {key: value for key, value in schema.items() if not (key == "pattern" and value in SHARED_PATTERNS)}
    if "properties" in shown:
        shown["properties"] = {name: advertised(rule) for name, rule in shown["properties"].items()}
    if isinstance(shown.get("items"), dict):
        shown["items"] = advertised(shown["items"])
    return shown


# Argument types tools share (their patterns are the checks' own; tools/list leaves them out).
Scope = Annotated[str, Rule(pattern=SCOPE_PATTERN)]
Scopes = Annotated[list[Scope], Rule(maxItems=64)]
Ulid = Annotated[str, Rule(pattern=ULID_PATTERN)]
SessionId = Annotated[str, Rule(pattern=SESSION_PATTERN)]
On = Annotated[bool, Rule(default=True)]  # a true default; a false one goes unsaid


class NoArgs(TypedDict):
    """A tool that takes no arguments."""


# Output-schema shorthands: loose on purpose (clients validate structuredContent against them),
# and short, because every agent pays for tools/list in context on every session.
ANY_LIST: dict[str, Any] = {"type": "array"}
ANY_OBJ: dict[str, Any] = {"type": "object"}
STR: dict[str, Any] = {"type": "string"}
OPT_STR: dict[str, Any] = {}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
