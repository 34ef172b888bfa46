"""The episode index cache speeds up start without ever hiding a changed file: sessions come back
packed and are decoded on first use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.episodes.index_cache import CACHE_MAGIC, Packed, encode_cache, read_cache
from memoryd.daemon.episodes.journal import Journal
from memoryd.daemon.episodes.tools import write_episode


def _store_with_episodes(root: Path) -> tuple[Core, list[str]]:
    """Three episodes of a session in /w (swarm "swarm"), one of a session in /v."""
    core = Core(root, Config())
    core.open()
    session = core.start_session({"worktree": "/w"}, "c1")
    ids = [write_episode(core, session, f"body {i}", f"takeaway {i}", ["a:b"], "swarm", None)["id"]
           for i in range(3)]
    other = core.start_session({"worktree": "/v"}, "c2")
    ids.append(write_episode(core, other, "elsewhere", "other worktree", [], None, None)["id"])
    core.sync()  # the episodes are on disk under their names, as at any stop
    core.journal.save_cache(core.log.seq)
    core.sync()
    core.log.close()
    return core, ids


def _rewrite_cache(journal: Journal, edit: Callable[[int, Packed], Packed]) -> None:
    """The cache file saved again with `edit(position, packed)` applied to each session."""
    sessions, seq = read_cache(journal.cache_path)
    assert seq is not None
    loose = [(sid, replace(p, rows=p.row_bytes(), source=None)) for sid, p in sessions.items()]
    journal.cache_path.write_bytes(encode_cache(seq, [(sid, edit(i, p)) for i, (sid, p) in enumerate(loose)]))


def test_a_restart_reads_unchanged_episodes_from_the_cache(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    assert first.journal.cache_path.exists()
    again = Core(tmp_path / "s", Config())
    again.open()
    assert len(again.journal._packed) == 2 and not again.journal._live  # nothing decoded yet
    assert set(again.journal.by_id.keys()) == set(ids) and ids[0] in again.journal.by_id
    assert again.journal.count_in_worktree("/w") == 3 and again.journal.count_in_worktree("/v") == 1
    assert sorted(n for _, n, _ in again.journal.summaries()) == [1, 3]
    assert len(again.journal._packed) == 2
    assert [e.id for e in again.journal.matching("/v")] == [ids[3]]  # only /v's session is decoded
    assert len(again.journal._packed) == 1
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]
    assert not again.journal._packed


def test_unchanged_files_leave_sessions_packed_through_the_check_and_the_next_save(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    again = Core(tmp_path / "s", Config())
    again.open()
    assert again.journal.verify_some(None) == 0
    assert len(again.journal._packed) == 2 and not again.journal.found_late and not again.journal.dropped_late
    again.journal.save_cache(again.log.seq)
    again.sync()
    third = Core(tmp_path / "s", Config())
    third.open()
    assert {i: third.journal.by_id[i] for i in ids} == {i: first.journal.by_id[i] for i in ids}


def test_a_damaged_cache_row_is_replaced_by_its_file(tmp_path: Path) -> None:
    import msgpack

    def created_not_text(_: int, packed: Packed) -> Packed:
        rows = msgpack.unpackb(packed.rows)
        rows[0][2] = 12345  # `created` is not text
        return replace(packed, rows=msgpack.packb(rows))

    first, ids = _store_with_episodes(tmp_path / "s")
    _rewrite_cache(first.journal, created_not_text)
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
    assert again.journal.by_id[ids[0]].takeaway == "takeaway 0"
    assert again.journal.verify_some(1) == 1  # one session per slice of this size
    again.journal.verify_some(None)
    assert again.journal.by_id[ids[0]].takeaway == "edited by hand, longer"
    assert again.journal.found_late == [ids[0]]
    assert again.journal.by_id[ids[1]] == first.journal.by_id[ids[1]]


def test_a_garbage_cache_is_ignored(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    first.journal.cache_path.write_bytes(b"\x93not msgpack at all")
    again = Core(tmp_path / "s", Config())
    again.open()
    assert set(ids) <= set(again.journal.by_id)


def test_undecodable_cache_rows_mean_the_files_are_read(tmp_path: Path) -> None:
    import msgpack

    first, ids = _store_with_episodes(tmp_path / "s")
    bad_rows = [b"\xc1 not msgpack", msgpack.packb([])]  # the second: fewer rows than ids
    _rewrite_cache(first.journal, lambda i, p: replace(p, rows=bad_rows[i]))
    again = Core(tmp_path / "s", Config())
    again.open()
    again.journal.verify_some(None)
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_a_cached_id_that_is_not_text_means_that_folder_is_read(tmp_path: Path) -> None:
    """A cached session whose ids are not all text (here one decodes as a map) is left out of
    the cache as read: its folder is read instead, and the start does not crash."""
    first, ids = _store_with_episodes(tmp_path / "s")
    _rewrite_cache(first.journal, lambda i, p: replace(p, ids=(*p.ids[:2], {"not": "an id"})) if len(p.ids) == 3 else p)
    again = Core(tmp_path / "s", Config())
    again.open()
    assert set(again.journal.owner) == set(ids)
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_a_cache_of_an_older_format_is_ignored_and_replaced(tmp_path: Path) -> None:
    """Format 2 (one msgpack map, rows inline) is no longer read: the folders are, and the next
    save writes the current format."""
    import msgpack

    first, ids = _store_with_episodes(tmp_path / "s")
    sessions, seq = read_cache(first.journal.cache_path)
    first.journal.cache_path.write_bytes(msgpack.packb({"v": 2, "seq": seq, "sessions": [
        [sid, list(p.ids), p.newest, [list(w) for w in p.worktrees], list(p.swarms), p.row_bytes()]
        for sid, p in sessions.items()]}))
    again = Core(tmp_path / "s", Config())
    again.open()
    assert not again.journal._packed and set(ids) <= set(again.journal.by_id)
    again.journal.save_cache(again.log.seq)
    again.sync()
    assert first.journal.cache_path.read_bytes().startswith(CACHE_MAGIC)
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_packed_rows_stay_in_the_cache_file_until_decoded(tmp_path: Path) -> None:
    """A start keeps only the summaries; the rows are read from the file it opened, even after a
    save has replaced that file."""
    first, ids = _store_with_episodes(tmp_path / "s")
    again = Core(tmp_path / "s", Config())
    again.open()
    assert all(p.rows is None and p.source is not None for p in again.journal._packed.values())
    again.journal.save_cache(again.log.seq)  # replaced by rename while sessions are still packed
    again.sync()
    assert again.journal.verify_some(None) == 0 and len(again.journal._packed) == 2
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_a_cache_cut_short_means_the_files_are_read(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    data = first.journal.cache_path.read_bytes()
    first.journal.cache_path.write_bytes(data[:-20])  # the last session's rows are cut
    again = Core(tmp_path / "s", Config())
    again.open()
    again.journal.verify_some(None)
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]
    first.journal.cache_path.write_bytes(data[:40])  # the header itself is cut
    third = Core(tmp_path / "s", Config())
    third.open()
    assert not third.journal._packed and set(ids) <= set(third.journal.by_id)


def _cold(root: Path, minimum: int | None) -> Core:
    """A start with no index cache; `minimum` (not None) lets the prefetch helper run."""
    (root / "state" / "episodes.cache").unlink(missing_ok=True)
    core = Core(root, Config())
    if minimum is not None:
        core.journal.prefetch(minimum)
        assert core.journal._helper is not None
    core.open()
    return core


def test_a_start_without_the_cache_parses_episodes_in_a_helper_process(tmp_path: Path) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    sessions = sorted({first.journal.by_id[i].session_id for i in ids})
    bad = tmp_path / "s" / "episodes" / sessions[0] / "01ARZ3NDEKTSV4RRFFQ69G5FAV.md"
    bad.write_text("---\nnot: [closed\n---\nbody\n")
    helped = _cold(tmp_path / "s", minimum=1)
    assert helped.journal._helper is None  # waited for and adopted
    assert not helped.journal.unverified  # parsed during this start: nothing to check after it
    assert not helped.journal.unlisted  # listed during this start, by the helper, and not again
    assert set(helped.journal._packed) == set(sessions)  # the bad file is reported, the rest packed
    assert [b["path"] for b in helped.journal.bad_files] == [str(bad)]
    plain = _cold(tmp_path / "s", minimum=None)
    assert {i: helped.journal.by_id[i] for i in ids} == {i: plain.journal.by_id[i] for i in ids}
    assert [b["path"] for b in plain.journal.bad_files] == [str(bad)]


def test_temp_files_the_helper_saw_are_settled_and_their_folders_read_again(tmp_path: Path) -> None:
    """The helper lists the session folders for recovery too: a temp file whose episode the log
    names is rolled forward and indexed, a stray one removed, as a start without it would."""
    first, ids = _store_with_episodes(tmp_path / "s")
    crashed = first.journal.path_of(first.journal.by_id[ids[1]])  # flushed, logged, not renamed
    temp = crashed.with_name(f".tmp-{crashed.name}.0a1b2c3d")
    crashed.rename(temp)
    stray = first.journal.path_of(first.journal.by_id[ids[3]]).with_name(".tmp-01ARZ3NDEKTSV4RRFFQ69G5FAV.md.00")
    stray.write_text("---\nhalf")
    bad = crashed.with_name("01ARZ3NDEKTSV4RRFFQ69G5FAV.md")  # beside the temp file: its folder is read again
    bad.write_text("---\nnot: [closed\n---\nbody\n")
    (tmp_path / "s" / "state" / "episodes.cache").unlink()
    helped = Core(tmp_path / "s", Config())
    helped.journal.prefetch(1)
    report = helped.open()
    assert report["temp_files_rolled_forward"] == 1 and report["temp_files_removed"] == 1
    assert crashed.exists() and not temp.exists() and not stray.exists()
    for episode_id in ids:
        assert helped.journal.by_id[episode_id] == first.journal.by_id[episode_id]
    assert [b["path"] for b in helped.journal.bad_files] == [str(bad)]  # once, though seen twice
    assert not helped.journal.unverified


def test_a_failed_helper_costs_only_its_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.daemon.episodes import index_cache

    first, ids = _store_with_episodes(tmp_path / "s")

    def broken(*args: object) -> bytes:
        raise OSError("the helper could not write")  # raised in the forked helper only
    monkeypatch.setattr(index_cache, "encode_cache", broken)
    again = _cold(tmp_path / "s", minimum=1)
    assert not again.journal._packed and again.journal._helper is None
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_a_helper_result_without_its_listing_means_listing_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result the daemon cannot use whole is not used at all: the folders are listed here,
    temp files included, as a start without a helper would."""
    from memoryd.daemon.episodes import index_cache

    first, ids = _store_with_episodes(tmp_path / "s")
    crashed = first.journal.path_of(first.journal.by_id[ids[0]])
    temp = crashed.with_name(f".tmp-{crashed.name}.0a1b2c3d")
    crashed.rename(temp)
    encode = index_cache.encode_cache
    monkeypatch.setattr(index_cache, "encode_cache", lambda seq, sessions, listing=None: encode(seq, sessions))
    again = _cold(tmp_path / "s", minimum=1)
    assert not again.journal._packed and again.journal._helper is None  # parsed here instead
    assert crashed.exists() and not temp.exists()  # the deep temp-file scan ran after all
    for episode_id in ids:
        assert again.journal.by_id[episode_id] == first.journal.by_id[episode_id]


def test_no_helper_for_a_small_store_or_when_the_cache_exists(tmp_path: Path) -> None:
    _store_with_episodes(tmp_path / "s")
    core = Core(tmp_path / "s", Config())
    core.journal.prefetch(1)  # the cache is there: it is read instead
    assert core.journal._helper is None
    (tmp_path / "s" / "state" / "episodes.cache").unlink()
    core.journal.prefetch(3)  # two sessions
    assert core.journal._helper is None


def _store_of_six_sessions(root: Path) -> tuple[Core, list[str], Path, Path]:
    """Six sessions of two episodes each, no index cache; one folder holds a bad file, another
    an episode whose write crashed after the flush (its temp file, which the log names)."""
    core = Core(root, Config())
    core.open()
    ids = []
    for n in range(6):
        session = core.start_session({"worktree": f"/w{n}"}, f"c{n}")
        ids += [write_episode(core, session, f"body {n}.{i}", f"takeaway {n}.{i}", [], None, None)["id"]
                for i in range(2)]
    core.sync()
    core.log.close()
    bad = core.journal.path_of(core.journal.by_id[ids[4]]).with_name("01ARZ3NDEKTSV4RRFFQ69G5FAV.md")
    bad.write_text("---\nnot: [closed\n---\nbody\n")
    crashed = core.journal.path_of(core.journal.by_id[ids[8]])
    crashed.rename(crashed.with_name(f".tmp-{crashed.name}.0a1b2c3d"))
    return core, ids, bad, crashed


def _shared_start(root: Path, monkeypatch: pytest.MonkeyPatch, take: object) -> tuple[Core, list[str]]:
    """A cold start whose episode parse is shared in one-folder chunks, `take` standing in for
    `helper.Shares.take`; returns the started core and the folders this process parsed."""
    from memoryd.daemon.episodes import journal
    from memoryd.daemon.storage import prefetch as helper

    here, parsed_here = os.getpid(), []
    load_entry = journal.Journal._load_entry

    def counted(self: Journal, folder: os.DirEntry[str], *args: Any, **kwargs: Any) -> None:
        if os.getpid() == here:
            parsed_here.append(folder.name)
        load_entry(self, folder, *args, **kwargs)
    monkeypatch.setattr(journal, "SHARE_CHUNK", 1)
    monkeypatch.setattr(journal.Journal, "_load_entry", counted)
    monkeypatch.setattr(helper.Shares, "take", take)
    core = Core(root, Config())
    core.journal.prefetch(1)
    report = core.open()
    assert report["temp_files_rolled_forward"] == 1 and report["temp_files_removed"] == 0
    return core, parsed_here


def _same_as_a_start_without_helper(core: Core, ids: list[str], bad: Path, crashed: Path) -> None:
    assert core.journal._helper is None and not core.journal.unverified and not core.journal.unlisted
    assert crashed.exists() and sorted(core.journal.by_id.keys()) == sorted(ids)
    assert [b["path"] for b in core.journal.bad_files] == [str(bad)]  # once, whoever found it
    plain = Core(core.root, Config())
    plain.open()
    for episode_id in ids:
        assert core.journal.by_id[episode_id] == plain.journal.by_id[episode_id]
    assert sorted(core.journal.session_dirs) == sorted(plain.journal.session_dirs)


def test_the_daemon_parses_the_folders_its_helper_has_not_reached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once its own part of the start is done, the daemon takes session folders from the end
    the helper has not reached; the start indexes each episode once, as without a helper."""
    import time

    from memoryd.daemon.storage import prefetch as helper

    _, ids, bad, crashed = _store_of_six_sessions(tmp_path / "s")
    take = helper.Shares.take

    def late_helper(self: helper.Shares, taker: int) -> Iterator[int]:
        deadline = time.monotonic() + 10  # the helper begins only once the daemon has taken a chunk
        while taker == helper.HELPER and not self.marks[self.count - 1] and time.monotonic() < deadline:
            time.sleep(0.001)
        yield from take(self, taker)
    core, parsed_here = _shared_start(tmp_path / "s", monkeypatch, late_helper)
    assert parsed_here and len(set(parsed_here)) == len(parsed_here)
    _same_as_a_start_without_helper(core, ids, bad, crashed)


@pytest.mark.parametrize("last", ["helper", "daemon"])
def test_a_chunk_both_took_is_indexed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last: str) -> None:
    """Where the helper and the daemon meet, both may take a chunk: its episodes, bad files and
    temp files count once. Here both take every chunk, one after the other."""
    import time

    from memoryd.daemon.storage import prefetch as helper

    _, ids, bad, crashed = _store_of_six_sessions(tmp_path / "s")
    final = helper.HELPER if last == "helper" else helper.DAEMON

    def greedy(self: helper.Shares, taker: int) -> Iterator[int]:
        deadline = time.monotonic() + 10  # the last taker waits for the other to take them all
        while taker == final and time.monotonic() < deadline and not all(
                self.marks[i] == helper.HELPER + helper.DAEMON - final for i in range(self.count)):
            time.sleep(0.001)
        for index in range(self.count):
            self.marks[index] = taker
            yield index
    core, parsed_here = _shared_start(tmp_path / "s", monkeypatch, greedy)
    assert len(parsed_here) == 6
    _same_as_a_start_without_helper(core, ids, bad, crashed)


def test_a_session_folder_that_cannot_be_listed_is_a_bad_file_not_a_failed_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, ids = _store_with_episodes(tmp_path / "s")
    (tmp_path / "s" / "state" / "episodes.cache").unlink()
    locked = first.journal.path_of(first.journal.by_id[ids[3]]).parent
    scandir = os.scandir

    def refusing(path: Any = ".") -> Any:
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)
    monkeypatch.setattr(os, "scandir", refusing)
    for minimum in (None, 1):  # parsed here, and shared with a helper
        again = _cold(tmp_path / "s", minimum)
        assert again.journal.bad_files == [{"path": str(locked), "reason": "cannot be listed (Permission denied)"}]
        assert sorted(again.journal.by_id.keys()) == sorted(ids[:3])
