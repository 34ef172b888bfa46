"""The package's shape holds: no import circles, layers point down, the bridge stays thin.

The import graph is read from the source with `ast` (every import, lazy ones inside functions and
`TYPE_CHECKING` blocks included), so a circle cannot hide behind a deferred import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memoryd

SRC = Path(memoryd.__file__).resolve().parent
# Below the tiers: the domain core and the machinery packages (docs/architecture.md).
MACHINERY = {"core", "domain", "tool", "calls", "identity", "search", "encoder", "credentials", "storage"}
TIER_ORDER = ["episodes", "memories", "sessions"]  # each may import only those before it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of this package that `name` imports (a `from pkg import mod` counts as `pkg.mod`)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.update((sub, base) if sub in known else (base,))  # the package runs first
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative enough here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["memoryd", "daemon"] or len(parts) < 3:
        return None
    return parts[2]


def test_the_package_has_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_daemon_machinery_imports_no_tier_except_the_journal_the_domain_holds() -> None:
    wrong = []
    for module, deps in _graph().items():
        if _layer(module) not in MACHINERY:
            continue
        for dep in deps:
            if _layer(dep) in TIER_ORDER and not (module == "memoryd.daemon.domain"
                                                  and dep == "memoryd.daemon.episodes.journal"):
                wrong.append((module, dep))
    assert wrong == []


def test_tiers_import_only_the_tiers_below_them() -> None:
    wrong = []
    for module, deps in _graph().items():
        layer = _layer(module)
        if layer not in TIER_ORDER:
            continue
        allowed = set(TIER_ORDER[: TIER_ORDER.index(layer) + 1])
        wrong += [(module, dep) for dep in deps if _layer(dep) in TIER_ORDER and _layer(dep) not in allowed]
    assert wrong == []


def test_the_daemon_imports_no_operator_command_bench_bridge_or_client() -> None:
    above = ("memoryd.cli", "memoryd.hooks", "memoryd.bench", "memoryd.mcp_bridge", "memoryd.client",
             "memoryd.importers")
    wrong = [(m, d) for m, deps in _graph().items() if _within(m, "memoryd.daemon")
             for d in deps if _within(d, *above)]
    assert wrong == []


def test_the_hooks_stay_light_they_reach_the_daemon_only_over_the_wire() -> None:
    """A hook process runs on every prompt and tool call: its package (hooks/) imports no daemon,
    operator command, bench, bridge or UI module, lazily or not."""
    wrong = [(m, d) for m, deps in _graph().items() if _within(m, "memoryd.hooks")
             for d in deps if _within(d, "memoryd.daemon", "memoryd.cli", "memoryd.bench", "memoryd.mcp_bridge",
                                      "memoryd.ui", "memoryd.importers")]
    assert wrong == []


def test_importers_are_pure_parsers_that_never_reach_the_daemon_or_a_client() -> None:
    """`memoryd.importers` reads files into drafts (a dry run needs no daemon); only
    `cli/importing.py` talks to the daemon, through the operator client."""
    wrong = [(m, d) for m, deps in _graph().items() if _within(m, "memoryd.importers")
             for d in deps if _within(d, "memoryd.daemon", "memoryd.cli", "memoryd.client", "memoryd.ui",
                                      "memoryd.bench", "memoryd.mcp_bridge")]
    assert wrong == []


def test_sync_is_assembly_no_tier_or_machinery_imports_it() -> None:
    """daemon/sync/ imports the tiers; they see it only through `core.extensions`."""
    wrong = [(m, d) for m, deps in _graph().items()
             if _layer(m) in MACHINERY | set(TIER_ORDER) for d in deps if _layer(d) == "sync"]
    assert wrong == []


def test_only_the_server_imports_zmq() -> None:
    """The sync worker and the rest of the daemon never touch the wire (lazy imports included)."""
    wrong = []
    for name, path in _modules().items():
        if not _within(name, "memoryd.daemon") or name == "memoryd.daemon.server":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [(name, n) for n in names if n == "zmq" or n.startswith("zmq.")]
    assert wrong == []


def test_outside_the_daemon_zmq_is_the_one_clients_transport() -> None:
    """One client (`client.connection`) over its transports; the bridge polls that client's socket
    beside stdin, `spawn.ping` asks a daemon that may be starting, and the bench's pipelined loader
    drives the wire directly on purpose."""
    allowed = {"memoryd.daemon.server", "memoryd.client.zmq_socket", "memoryd.client.spawn",
               "memoryd.mcp_bridge.bridge", "memoryd.bench.kit"}
    users = {name for name, path in _modules().items() if "zmq" in _imports_of(path)}
    assert users <= allowed


def test_the_bridge_never_imports_the_daemon_cli_or_bench_even_transitively() -> None:
    graph = _graph()
    seen: set[str] = set()
    todo = [m for m in graph if m.startswith("memoryd.mcp_bridge")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    assert not [m for m in seen if _within(m, "memoryd.daemon", "memoryd.cli", "memoryd.bench")]


def test_running_the_bridge_entry_loads_no_daemon_module() -> None:
    probe = ("import sys, memoryd.mcp_bridge.bridge, memoryd.mcp_bridge.startup; "
             "print(sorted(m for m in sys.modules if m.startswith('memoryd.daemon')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the seams of issue 32: one way to do each thing ---------------------------------------------

def _calls(path: Path) -> list[str]:
    """Dotted names of every call in a module (`os.replace`, `subprocess.run`, `hasattr` …)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func, parts = node.func, []
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                names.append(".".join([func.id, *reversed(parts)]))
    return names


def _non_blank(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def test_files_are_replaced_only_through_fsio_or_the_stores_group_commit() -> None:
    """One atomic replace (`memoryd.fsio`); the store publishes a whole commit's renames itself,
    after one flush for all of them (docs/storage.md)."""
    users = {name for name, path in _modules().items() if {"os.replace", "os.rename"} & set(_calls(path))}
    assert users <= {"memoryd.fsio", "memoryd.daemon.storage.store"}


def test_in_sync_only_the_git_backend_starts_a_process() -> None:
    """Every git call goes through `sync.git.Git`, which carries the no-programs settings."""
    wrong = [name for name, path in _modules().items() if _within(name, "memoryd.daemon.sync")
             and name != "memoryd.daemon.sync.git" and "subprocess" in _imports_of(path)]
    assert wrong == []


def test_the_cli_checks_the_log_through_logcheck_without_the_live_log() -> None:
    wrong = [(m, d) for m, deps in _graph().items() if _within(m, "memoryd.cli")
             for d in deps if d == "memoryd.daemon.storage.eventlog"]
    assert wrong == []


def test_core_reaches_its_tiers_through_the_loader_protocol_not_hasattr() -> None:
    for name in ("memoryd.daemon.core", "memoryd.daemon.domain"):
        assert "hasattr" not in _calls(_modules()[name]), name


def test_no_module_is_over_400_lines_unless_its_docstring_says_why() -> None:
    long = {}
    for name, path in _modules().items():
        lines = _non_blank(path)
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > 400 and "400 lines" not in docstring:
            long[name] = lines
    assert long == {}


def _imports_of(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (stdlib and third-party included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found
