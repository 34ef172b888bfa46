"""An edit on one machine against a newer removal on the other, neither synced in between: the
machines must end in one state, the removal's, with the edited text kept as a conflict both see
and can take back (`memoryd sync resolve ID --keep other`), never a split where each machine
holds its own version for ever.

Two real daemons (two `MEMORYD_HOME`s), one local bare git remote, syncs through `memoryd sync`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness import Env
from synckit import set_up, synced, tool

FACT = "The staging database runs Postgres 15 on port 5433 behind pgbouncer."
EDITED = "The staging database runs Postgres 17 on port 5435 behind pgbouncer, since the March upgrade."
ROUNDS = 2  # a round: each machine syncs once; the third (below) must move nothing


def edited_then_removed(remote: Path, a: Env, b: Env) -> str:
    """One memory both machines hold; then B edits it and A, later, removes it."""
    for env in (a, b):
        set_up(env, remote)
    memory_id = str(tool(a, "memory_write", content=FACT, scopes=["projects:memoryd"])["id"])
    synced(a)
    synced(b)
    assert tool(b, "memory_update", id=memory_id, content=EDITED)["status"] == "updated"
    time.sleep(0.01)  # the subject: A's removal carries a later stamp (ms) than B's edit
    assert tool(a, "memory_remove", id=memory_id, reason="the runbook has it now")["status"] == "removed"
    return memory_id


def state_of(env: Env, memory_id: str) -> dict[str, Any]:
    """What a machine holds of the memory: its status, its file's bytes, its open conflicts."""
    shown = tool(env, "memory_show", id=memory_id)
    folder = "tombstones" if shown["status"] == "removed" else "memories"
    conflicts = tool(env, "memory_health")["sync"]["conflicts"]
    return {"status": shown["status"], "content": shown["content"],
            "file": (env.home / folder / f"{memory_id}.md").read_bytes(),
            "conflicts": [(row["id"], row["kept_versions"]) for row in conflicts["items"]]}


def kept_texts(env: Env, memory_id: str) -> list[str]:
    shown = env.memoryd_json("sync", "status", "--show", memory_id)
    return [row["text"].strip() for row in shown["kept"]]


@pytest.mark.parametrize("first", ["remover", "editor"])
def test_an_edit_against_a_newer_removal_ends_in_one_state_with_the_edit_kept(
        pair: tuple[Env, Env], remote: Path, first: str) -> None:
    a, b = pair  # A removes, B edits
    memory_id = edited_then_removed(remote, a, b)
    order = (a, b) if first == "remover" else (b, a)
    for _ in range(ROUNDS):
        for env in order:
            synced(env)
    on_a, on_b = state_of(a, memory_id), state_of(b, memory_id)
    assert on_a == on_b, (on_a, on_b)  # one state, byte for byte
    assert on_a["status"] == "removed" and on_a["content"] == FACT  # the newer change won
    assert [i for i, _ in on_a["conflicts"]] == [memory_id]  # the edit waits to be settled, on both
    for env in (a, b):
        assert kept_texts(env, memory_id) == [EDITED]  # B's text is not lost
    again = [synced(env) for env in order]  # settled: nothing left to move
    assert all(s["pushed"] == 0 and s["pulled"] == 0 and s["quarantined"] == [] for s in again), again
    # The user takes the edit back on the remover's machine; it becomes the current one everywhere.
    done = a.memoryd("sync", "resolve", memory_id, "--keep", "other")
    assert done.returncode == 0, done.stderr
    synced(a)
    synced(b)
    for env in (a, b):
        shown = tool(env, "memory_show", id=memory_id)
        assert shown["status"] == "live" and shown["content"] == EDITED, shown
        assert tool(env, "memory_health")["sync"]["conflicts"]["total"] == 0
    assert state_of(a, memory_id) == state_of(b, memory_id)
