"""One declaration per tool, per event kind and per hook event (docs/architecture.md, "Where to
change what"): each name is written as a string literal in at most three modules of the package —
its declaration and the few places that must name it. Everything else reaches it through the
declaration (`memoryd.names`, `daemon/storage/events.py`, `hooks/table.py`), so a rename is one
edit and a new tool, kind or hook touches the few files it is about.

Tool names, the clients' hook event names and the hyphenated hook verbs are distinctive strings, so
every literal counts. A one-word hook verb ("prompt", "stop") is also a payload field and a wire op,
so it is counted by its clients' names for it. An event kind is often an ordinary word ("search",
"sync", "remove") that is also a field, a verb or a CLI choice; for kinds only the literals in a
kind's places in the daemon count: `record("kind", …)`, `Kind("kind")`, a comparison with an event's
kind, and the keys of a table of handlers (a dict literal whose values are callables).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import memoryd
from memoryd.daemon import catalogue
from memoryd.daemon.storage import events
from memoryd.hooks import table

SRC = Path(memoryd.__file__).resolve().parent
LIMIT = 3


def _trees() -> dict[str, ast.AST]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text()) for p in sorted(SRC.rglob("*.py"))}


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _mentions_kind(node: ast.AST) -> bool:
    """`kind`, `x.kind`, `event["kind"]`, `event.get("kind")`."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == "kind" or isinstance(n, ast.Attribute) and n.attr == "kind":
            return True
        if isinstance(n, ast.Constant) and n.value == "kind":
            return True
    return False


def _kind_places(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("record", "Kind") and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value))
        elif isinstance(node, ast.Compare) and _mentions_kind(node.left):
            for right in node.comparators:
                found.update(_strings(right))
        elif isinstance(node, ast.Dict) and node.values and all(
                isinstance(v, (ast.Name, ast.Attribute, ast.Lambda)) for v in node.values):
            found.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return found


def _over_limit(names: set[str], places: dict[str, set[str]]) -> dict[str, list[str]]:
    where: dict[str, set[str]] = defaultdict(set)
    for module, found in places.items():
        for name in found & names:
            where[name].add(module)
    return {name: sorted(modules) for name, modules in where.items() if len(modules) > LIMIT}


def test_a_tool_name_is_written_in_at_most_three_modules() -> None:
    literals = {module: set(_strings(tree)) for module, tree in _trees().items()}
    assert _over_limit(set(catalogue.TOOLS), literals) == {}


def test_a_hook_event_is_written_in_at_most_three_modules() -> None:
    names = {name for hook in table.HOOKS for name in (hook.verb, *hook.clients.values())
             if name != hook.verb or "-" in name}
    literals = {module: set(_strings(tree)) for module, tree in _trees().items()}
    assert _over_limit(names, literals) == {}


def test_an_event_kind_is_written_in_at_most_three_modules() -> None:
    places = {module: _kind_places(tree) for module, tree in _trees().items() if module.startswith("daemon/")}
    assert _over_limit(set(events.KINDS), places) == {}


def test_the_rule_sees_what_it_counts() -> None:
    """The counting is not vacuous: each declaration is found where it is declared."""
    trees = _trees()
    assert set(catalogue.TOOLS) <= {s for tree in trees.values() for s in _strings(tree)}
    assert {"session_start", "update", "sync_init"} <= _kind_places(trees["daemon/storage/events.py"])
    assert {"write", "write_confirm"} <= _kind_places(trees["daemon/memories/writes.py"])
    assert {"write", "update", "remove", "search"} <= _kind_places(trees["daemon/memories/tier.py"])
    assert {hook.verb for hook in table.HOOKS} <= set(_strings(trees["hooks/table.py"]))
