"""Every event kind is declared once (daemon/storage/events.py): what the daemon records, replays and
verifies is a declared kind, and the derived sets say what the old hand-written lists said."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memoryd
import memoryd.names
from memoryd.daemon.domain import _APPLIERS as CORE_APPLIERS
from memoryd.daemon.memories.tier import _APPLIERS as MEMORY_APPLIERS
from memoryd.daemon.storage import events, logcheck
from memoryd.daemon.sync.service import _APPLIERS as SYNC_APPLIERS

SRC = Path(memoryd.__file__).resolve().parent


def _kind_named(node: ast.expr) -> str | None:
    """A literal kind, or one named through `memoryd.names` (`names.EPISODE_WRITE`) or `events`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "names":
        return str(getattr(memoryd.names, node.attr))
    if isinstance(node, ast.Name) and isinstance(getattr(events, node.id, None), str):
        return str(getattr(events, node.id))
    return None


def recorded_kinds() -> dict[str, list[str]]:
    """Each kind passed by name to a `.record(...)` call in the package, with where."""
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record"
                    and node.args and (kind := _kind_named(node.args[0])) is not None):
                found.setdefault(kind, []).append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_every_recorded_kind_is_declared_and_every_declared_kind_is_recorded_or_a_marker() -> None:
    recorded = recorded_kinds()
    assert set(recorded) <= set(events.KINDS), {k: w for k, w in recorded.items() if k not in events.KINDS}
    assert set(events.KINDS) - set(recorded) == {"quarantined"}  # log repair's marker, not recorded


@pytest.mark.parametrize("table", [CORE_APPLIERS, MEMORY_APPLIERS, SYNC_APPLIERS])
def test_every_applier_applies_a_declared_kind(table: dict[str, object]) -> None:
    assert set(table) <= set(events.KINDS), set(table) - set(events.KINDS)


def test_the_derived_sets_are_the_ones_the_daemon_relied_on() -> None:
    assert sorted(events.READ_KINDS) == ["digest", "inject", "search", "show"]
    assert sorted(events.NON_CALL_KINDS) == sorted([
        "daemon_start", "daemon_stop", "recovery", "session_start", "session_end", "session_attach",
        "session_reopen", "pending_expired", "episode_prune", "reaper_run", "files_checked", "quarantined"])
    assert logcheck._REQUIRED["episode_write"] == ("session", "episode_id")


def test_recording_an_undeclared_kind_is_refused(tmp_path: Path) -> None:
    from memoryd.config import Config
    from memoryd.daemon.core import Core
    from memoryd.errors import InternalError

    core = Core(tmp_path, Config())
    core.open()
    try:
        with pytest.raises(InternalError, match="not declared"):
            core.record("made_up_kind")
    finally:
        core.log.close()
