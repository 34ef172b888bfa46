"""The episode index cache speeds up start without ever hiding a changed file."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.episodes.tools import write_episode


def _store_with_episodes(root: Path) -> tuple[Core, list[str]]:
    core = Core(root, Config())
    core.open()
    session = core.start_session({"worktree": "/w"}, "c1")
    ids = [write_episode(core, session, f"body {i}", f"takeaway {i}", ["a:b"], "swarm", None)["id"]
           for i in range(3)]
    core.sync()  # the episodes are on disk under their names, as at any stop
    core.journal.save_cache(core.log.seq)
    core.sync()
    core.log.close()
    return core, ids


def test_a_restart_reads_unchanged_episodes_from_the_cache(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    assert first.journal.cache_path.exists()
    again = Core(tmp_path / "s", Config())
    again.open()
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_a_hand_edited_episode_is_parsed_again_not_taken_from_the_cache(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    path = first.journal.path_of(first.journal.by_id[ids[0]])
    path.write_text(path.read_text().replace("takeaway 0", "edited by hand, longer"))
    os.utime(path, ns=(1, 1))
    again = Core(tmp_path / "s", Config())
    again.open()  # cache rows are trusted at start; the files are checked after it, in slices
    assert again.journal.verify_some(1) == 2
    again.journal.verify_some(None)
    assert again.journal.by_id[ids[0]].takeaway == "edited by hand, longer"
    assert again.journal.by_id[ids[1]] == first.journal.by_id[ids[1]]


def test_a_garbage_cache_is_ignored(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    first.journal.cache_path.write_bytes(b"\x93not msgpack at all")
    again = Core(tmp_path / "s", Config())
    again.open()
    assert set(ids) <= set(again.journal.by_id)
