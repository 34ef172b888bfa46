"""`memoryd memories edit` and an editor that misbehaves: what it leaves is read from its folder
without following a link, only as a regular UTF-8 file of bounded size; anything else exits 2 with
one line and writes nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest

from harness import Env, call

ORIGINAL = "The shop API listens on port 8443 behind the nginx ingress."
SCRIPTS = {
    "not UTF-8": "printf '\\377\\376 not text' > \"$1\"",
    "gone": "rm \"$1\"",
    "a symlink": "rm \"$1\" && ln -s \"$OUTSIDE\" \"$1\"",
    "a FIFO": "rm \"$1\" && mkfifo \"$1\"",
    "too big": "head -c 4000001 /dev/zero | tr '\\0' 'a' > \"$1\"",
}


def editor(env: Env, body: str) -> str:
    path = env.base / "editor.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def write(daemon: Env) -> str:
    async def main() -> str:
        async with daemon.session(MEMORYD_WORKTREE="/w/shop") as bridge:
            return str((await call(bridge, "memory_write", content=ORIGINAL, scopes=["projects:shop"]))["id"])
    return anyio.run(main)


@pytest.mark.parametrize("what", sorted(SCRIPTS))
def test_an_editor_that_leaves_anything_but_a_plain_utf8_file_writes_nothing(daemon: Env, what: str) -> None:
    outside = daemon.base / "outside.txt"
    outside.write_text("TEXT FROM OUTSIDE THE EDIT: must never become the memory")
    memory_id = write(daemon)
    done = daemon.memoryd("memories", "edit", memory_id, EDITOR=editor(daemon, SCRIPTS[what]), VISUAL="",
                          OUTSIDE=str(outside))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "nothing written" in done.stderr
    assert daemon.memoryd_json("memories", "show", memory_id)["content"] == ORIGINAL
    assert outside.read_text().startswith("TEXT FROM OUTSIDE")  # read nowhere, changed nowhere
    assert not [p for p in Path("/tmp").glob(f"memoryd-{memory_id}-*") if os.path.lexists(p)]  # cleaned up


def test_an_editor_that_saves_plain_text_updates_the_memory(daemon: Env) -> None:
    memory_id = write(daemon)
    done = daemon.memoryd("memories", "edit", memory_id, VISUAL="",
                          EDITOR=editor(daemon, "printf 'The shop API listens on port 9443.' > \"$1\""))
    assert done.returncode == 0, done.stderr
    assert daemon.memoryd_json("memories", "show", memory_id)["content"] == "The shop API listens on port 9443."
