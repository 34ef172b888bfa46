"""The start-up checkpoint (docs/storage.md, 'Checkpoint'): a start that restores it and replays
nothing ends in exactly the state a full replay of the log builds, and anything that makes it
untrustworthy — a log changed since, a crash, a damaged or foreign file — means a full replay.

A real daemon makes the store (sessions, episodes, committed, pending, removed and restored
memories, searches, a finished session); the comparison opens copies of it in-process, so both
sides read the very same bytes.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import anyio
import msgpack
import pytest

from harness import Env, call, wait_for
from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.process import checkpoint, lifecycle

WT = {"MEMORYD_WORKTREE": "/repo/ckpt"}


def _populate(env: Env) -> None:
    async def work() -> None:
        async with env.session(**WT) as s:
            first = await call(s, "memory_write", content="The deploy script lives in ops/deploy.sh.",
                               scopes=["projects:ckpt"])
            second = await call(s, "memory_write", content="Staging runs on port 8443 behind nginx.",
                                scopes=["projects:ckpt"])
            await call(s, "memory_write", content="The user seems to prefer short commit messages.",
                       category="user-inference", scopes=["user:prefs"])
            await call(s, "memory_remove", id=second["id"], reason="moved to 9443")
            await call(s, "memory_restore", id=second["id"])
            await call(s, "memory_search", query="deploy script")
            await call(s, "memory_show", id=first["id"])
            for i in range(3):
                await call(s, "episode_write", body=f"step {i} of the migration", takeaway=f"step {i}")
            await call(s, "memory_session_finish", session_id=(await call(s, "memory_session_start"))["session_id"],
                       handoff="Next: finish the migration of ops/deploy.sh to the new runner.")
        async with env.session(MEMORYD_WORKTREE="/repo/other") as s:
            await call(s, "episode_write", body="another worktree", takeaway="elsewhere")
            await call(s, "episode_handoff")

    anyio.run(work)


def _opened(home: Path, copy_to: Path, use_checkpoint: bool) -> tuple[Core, Any]:
    shutil.copytree(home, copy_to, symlinks=True)
    core = Core(copy_to, Config())
    lifecycle._attach_tiers(core)
    resume = checkpoint.restore(core) if use_checkpoint else None
    core.open(resume)
    core.log.close()
    return core, resume


def _restored_and_replayed(env: Env, tmp_path: Path) -> tuple[Core, Any, Core]:
    """A populated store stopped cleanly, opened twice: from its checkpoint (with the resume
    point) and by a full replay."""
    env.start_daemon()
    _populate(env)
    assert env.memoryd("stop").returncode == 0
    restored, resume = _opened(env.home, tmp_path / "restored", use_checkpoint=True)
    replayed, _ = _opened(env.home, tmp_path / "replayed", use_checkpoint=False)
    return restored, resume, replayed


def _state(core: Core) -> dict[str, Any]:
    return {"core": checkpoint._core_state(core),
            "extensions": {type(e).__name__: e.log_state() for e in core.extensions},
            "log": (core.log.seq, core.log.last_hash, core.log.first_ts, core.log.quarantined),
            "memories": sorted(core.memories.live), "tombstones": sorted(core.memories.tombstones),
            "pending": sorted(core.memories.pending), "episodes": sorted(core.journal.by_id)}


def _without_start_events(state: dict[str, Any]) -> dict[str, Any]:
    """Both opens append their own daemon_start/recovery: compare what came before them."""
    return {k: v for k, v in state.items() if k != "log"}


def _write_one_and_stop(env: Env, content: str) -> str:
    """Start a daemon, write one memory through a session, stop cleanly; the memory's id."""
    env.start_daemon()

    async def write() -> str:
        async with env.session(**WT) as s:
            return str((await call(s, "memory_write", content=content, scopes=["projects:ckpt"]))["id"])

    memory_id = anyio.run(write)
    assert env.memoryd("stop").returncode == 0
    return memory_id


def test_a_start_from_the_checkpoint_equals_a_full_replay(env: Env, tmp_path: Path) -> None:
    restored, resume, replayed = _restored_and_replayed(env, tmp_path)
    assert (env.home / "state" / checkpoint.NAME).exists()
    assert resume is not None and resume.seq == replayed.log.seq - 2  # all but the two start events
    assert _without_start_events(_state(restored)) == _without_start_events(_state(replayed))
    assert restored.log.seq == replayed.log.seq and restored.log.last_hash != ""
    recovery = [e for e in env.events() if e["kind"] == "recovery"]
    assert recovery and recovery[-1]["replayed_from_seq"] == 0  # the daemon's own first start


def test_a_real_restart_resumes_from_the_checkpoint_and_keeps_every_answer(env: Env) -> None:
    env.start_daemon()
    _populate(env)

    async def answers() -> tuple[Any, ...]:
        async with env.session(**WT) as s:
            search = await call(s, "memory_search", query="deploy script")
            handoff = await call(s, "episode_handoff")
            digest = await call(s, "memory_digest")
            return ([h["id"] for h in search["results"]], handoff.get("prior_session", {}).get("id"),
                    [h["id"] for h in digest.get("handoffs", [])])

    before = anyio.run(answers)
    assert env.memoryd("stop").returncode == 0
    env.start_daemon()
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] > 0
    assert anyio.run(answers)[0] == before[0]
    assert anyio.run(answers)[2] == before[2]


def test_a_cold_start_answers_first_and_its_deferred_index_gives_the_same_answers(env: Env) -> None:
    """With every derived file gone the text index is built after the daemon answers (docs/benchmark.md,
    "Cold start"); the first search, and the near-duplicate gate of the first write, see all of it."""
    env.start_daemon()
    _populate(env)

    async def search() -> list[str]:
        async with env.session(**WT) as s:
            return [h["id"] for h in (await call(s, "memory_search", query="deploy script"))["results"]]

    before = anyio.run(search)
    assert env.memoryd("stop").returncode == 0
    for name in lifecycle.DERIVED_STATE:
        (env.home / "state" / name).unlink(missing_ok=True)
    env.start_daemon()
    assert anyio.run(search) == before

    async def near_duplicate() -> Any:
        async with env.session(**WT) as s:
            return await call(s, "memory_write", content="The deploy script lives in ops/deploy.sh!",
                              scopes=["projects:ckpt"])

    assert anyio.run(near_duplicate)["status"] != "committed"


def test_a_changed_log_a_crash_or_a_bad_checkpoint_means_a_full_replay(env: Env, tmp_path: Path) -> None:
    env.start_daemon()
    _populate(env)
    assert env.memoryd("stop").returncode == 0
    saved = (env.home / "state" / checkpoint.NAME).read_bytes()

    # The log changed since the checkpoint (a later run that crashed): not trusted.
    env.start_daemon()
    env.kill_daemon(signal.SIGKILL)
    _, resume = _opened(env.home, tmp_path / "crashed", use_checkpoint=True)
    assert resume is None

    # Garbage, or a checkpoint of another format: ignored, never fatal.
    for content in (b"\x93not msgpack", b"\x81\xa1v\x63"):
        (env.home / "state" / checkpoint.NAME).write_bytes(content)
        _, resume = _opened(env.home, tmp_path / f"bad{len(content)}", use_checkpoint=True)
        assert resume is None
    (env.home / "state" / checkpoint.NAME).write_bytes(saved)

    env.start_daemon()  # after the crash: a full replay, and serving as before
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] == 0

    async def found() -> list[str]:
        async with env.session(**WT) as s:
            return [h["content"] for h in (await call(s, "memory_search", query="deploy script"))["results"]]

    assert any("ops/deploy.sh" in c for c in anyio.run(found))



def test_reindex_rebuilds_every_derived_file_and_refuses_while_the_daemon_runs(env: Env) -> None:
    env.start_daemon()
    _populate(env)
    running = env.memoryd("reindex")
    assert running.returncode == 1 and "stop it first" in running.stderr
    assert env.memoryd("stop").returncode == 0
    state = env.home / "state"
    pending_before = (state / "pending.json").read_bytes()
    for name in ("memories.cache", "search.index", "episodes.cache", checkpoint.NAME):
        (state / name).write_bytes(b"\x93stale garbage")

    done = env.memoryd("reindex")
    assert done.returncode == 0, done.stderr
    assert "building the search index" in done.stderr
    assert "reindexed 3 memories" in done.stdout  # two facts and the handoff
    assert (state / "pending.json").read_bytes() == pending_before  # not derived: kept as it was
    env.start_daemon()  # from the fresh checkpoint and caches: nothing replayed, nothing parsed
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] > 0 and recovery["search_index_restored"] == 1

    async def found() -> list[str]:
        async with env.session(**WT) as s:
            return [h["content"] for h in (await call(s, "memory_search", query="deploy script"))["results"]]

    assert any("ops/deploy.sh" in c for c in anyio.run(found))


def test_status_shows_a_start_in_progress(env: Env) -> None:
    import json
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"])
    env.procs.append(sleeper)
    env.runtime.mkdir(parents=True, exist_ok=True)
    (env.runtime / "memoryd.starting").write_text(json.dumps(
        {"pid": sleeper.pid, "phase": "loading memories", "done": 40000, "total": 100000, "seconds": 2.5}))
    shown = env.memoryd("status")
    assert shown.returncode == 0 and "starting" in shown.stdout and "loading memories 40,000/100,000" in shown.stdout
    sleeper.kill()
    sleeper.wait()
    assert env.memoryd("status").returncode == 1  # a dead pid's progress is not a start


def test_files_edited_while_stopped_are_found_by_the_check_after_start(env: Env) -> None:
    memory_id = _write_one_and_stop(env, "The cache server listens on port 6379.")
    path = env.home / "memories" / f"{memory_id}.md"
    path.write_text(path.read_text().replace("6379", "6380 since the migration"))
    env.start_daemon()  # the caches still describe the old file; nothing asks memory_health

    async def search(query: str) -> list[str]:
        async with env.session(**WT) as s:
            return [h["id"] for h in (await call(s, "memory_search", query=query))["results"]]

    wait_for(lambda: anyio.run(search, "migration") == [memory_id], step=0.05,  # the loop's idle slices reach it
             what="the check of the edited file")
    assert anyio.run(search, "6379") == []


def test_episode_files_added_or_deleted_while_stopped_are_found_after_a_resumed_start(env: Env) -> None:
    """After a clean stop the start takes the session folders from the episode cache unlisted;
    the folders are listed after start: a file dropped in by hand is indexed, a deleted one goes."""
    env.start_daemon()

    async def write() -> tuple[str, list[str]]:
        async with env.session(**WT) as s:
            ids = [(await call(s, "episode_write", body=f"note {i}", takeaway=f"note {i}"))["id"] for i in range(2)]
            return str((await call(s, "episode_search", ids=ids))["episodes"][0]["session_id"]), ids

    session_id, (kept, deleted) = anyio.run(write)
    assert env.memoryd("stop").returncode == 0
    folder = env.home / "episodes" / session_id
    (folder / f"{deleted}.md").unlink()
    added = "01" + "J" * 24
    (folder / f"{added}.md").write_text(
        f"---\nschema_version: 1\nid: {added}\ncreated: '2026-11-30T10:00:00.000Z'\nsession_id: {session_id}\n"
        f"scopes: []\ntakeaway: added by hand\nswarm_id: null\nworktree: /repo/ckpt\n---\nadded by hand\n")
    env.start_daemon()
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] > 0  # resumed from the checkpoint: folders not listed at start

    async def found() -> set[str]:
        async with env.session(**WT) as s:
            await call(s, "memory_health")  # finishes the after-start check at once
            return {e["id"] for e in (await call(s, "episode_search", session_id=session_id))["episodes"]}

    assert anyio.run(found) == {kept, added}


def test_a_new_session_never_takes_the_name_of_a_folder_made_while_stopped(env: Env) -> None:
    """A start after a clean stop lists episodes/ only after it serves; a session started before
    that listing still skips every `sess-<n>` folder made by hand while the daemon was stopped."""
    _write_one_and_stop(env, "Deploys run from the ops runner.")
    last = max(int(e["session"][5:]) for e in env.events() if e["kind"] == "session_start")
    planted = [f"sess-{n}" for n in range(last + 1, last + 4)]
    for name in planted:
        (env.home / "episodes" / name).mkdir(parents=True)
    core = Core(env.home, Config())
    lifecycle._attach_tiers(core)
    core.open(checkpoint.restore(core))
    try:
        assert core.journal.root_unlisted  # resumed: episodes/ not listed yet
        assert core.start_session({"worktree": "/repo/ckpt"}, "c1").id == f"sess-{last + 4}"
        core.verify_files(None)
        assert not core.journal.root_unlisted
        assert core.start_session({"worktree": "/repo/ckpt"}, "c2").id == f"sess-{last + 5}"
    finally:
        core.log.close()


def test_request_keys_stay_packed_until_a_connection_they_name_calls(env: Env, tmp_path: Path) -> None:
    restored, resume, full = _restored_and_replayed(env, tmp_path)
    old, new = restored.retries, full.retries
    assert resume is not None and old.cold_reqs is not None and not old.applied_reqs
    req = next(iter(new.applied_reqs))
    assert old.applied(f"{'0' * 24}:1") is None and old.cold_reqs is not None  # a new bridge
    assert old.applied(req) == new.applied(req) is not None  # its connection calls again: decoded
    assert old.cold_reqs is None
    assert {k: tuple(v) for k, v in old.applied_reqs.items()} == dict(new.applied_reqs)


def test_memory_files_added_or_deleted_while_stopped_are_found_after_a_resumed_start(env: Env) -> None:
    """After a clean stop the checkpoint vouches for the parse cache, so the start takes every
    record from it without listing memories/; the folder is listed after start: a file deleted
    by hand is dropped (and `missing`), one dropped in by hand is indexed (and `unaccounted`)."""
    env.start_daemon()

    async def write() -> list[str]:
        async with env.session(**WT) as s:
            return [str((await call(s, "memory_write", content=text, scopes=["projects:ckpt"]))["id"])
                    for text in ("The build cache lives in /var/cache/ckpt-build.",
                                 "Release tags are signed with the ops GPG key.")]

    kept, deleted = anyio.run(write)
    assert env.memoryd("stop").returncode == 0
    folder = env.home / "memories"
    (folder / f"{deleted}.md").unlink()
    planted = "01" + "K" * 24
    (folder / f"{planted}.md").write_text((folder / f"{kept}.md").read_text().replace(kept, planted).replace(
        "The build cache lives in /var/cache/ckpt-build.", "Nightly dumps are copied to the cold bucket."))
    env.start_daemon()
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] > 0 and recovery["memory_folders_deferred"] == 1
    assert recovery["memories_missing"] == 0  # not known yet: the folder was not listed

    async def after_check() -> tuple[dict[str, Any], list[str], list[str]]:
        async with env.session(**WT) as s:
            health = await call(s, "memory_health")  # finishes the after-start check at once
            gone = [h["id"] for h in (await call(s, "memory_search", query="GPG key release tags"))["results"]]
            new = [h["id"] for h in (await call(s, "memory_search", query="nightly dumps cold bucket"))["results"]]
            return health, gone, new

    health, gone, new = anyio.run(after_check)
    assert [m["id"] for m in health["missing"]["items"]] == [deleted] and deleted not in gone
    assert planted in [m["id"] for m in health["unaccounted"]["items"]] and planted in new
    checked = [e for e in env.events() if e["kind"] == "files_checked"][-1]
    assert checked["memories_parsed"] == 1 and checked["memories_dropped"] == 1
    assert env.memoryd("stop").returncode == 0
    env.start_daemon()  # the stop rewrote the cache: the next start takes both from it
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["memory_folders_deferred"] == 1 and recovery["memories"] == 2
    assert recovery["memories_missing"] == 1 and recovery["memories_unaccounted"] == 1


def test_stray_temp_files_after_a_clean_stop_are_swept_once_the_daemon_serves(env: Env) -> None:
    """A resumed start does not list the folders for temp files (a clean stop leaves none of
    ours): a stray one dropped in while stopped is removed by the first check after start,
    and a whole record the log names is rolled forward, as a start would have."""
    memory_id = _write_one_and_stop(env, "The metrics agent ships to port 9125.")
    folder = env.home / "memories"
    record = (folder / f"{memory_id}.md").read_bytes()
    (folder / f"{memory_id}.md").unlink()
    whole = folder / f".tmp-{memory_id}.md.0000beef"
    whole.write_bytes(record)  # as if the rename had not happened
    stray = folder / ".tmp-01K00000000000000000000000.md.deadbeef"
    stray.write_bytes(b"half a record")
    env.start_daemon()
    recovery = [e for e in env.events() if e["kind"] == "recovery"][-1]
    assert recovery["replayed_from_seq"] > 0 and recovery["temp_files_swept"] == "after start"

    async def health() -> dict[str, Any]:
        async with env.session(**WT) as s:
            return await call(s, "memory_health")  # runs the after-start check at once

    anyio.run(health)
    assert not stray.exists() and not whole.exists()
    assert (folder / f"{memory_id}.md").read_bytes() == record


def test_a_restored_session_keeps_its_episode_ids_compact_until_it_writes_again(env: Env, tmp_path: Path) -> None:
    from memoryd.daemon.episodes.tools import write_episode

    env.start_daemon()
    _populate(env)
    assert env.memoryd("stop").returncode == 0
    shutil.copytree(env.home, tmp_path / "a", symlinks=True)
    core = Core(tmp_path / "a", Config())
    lifecycle._attach_tiers(core)
    core.open(checkpoint.restore(core))
    try:
        owner = next(s for s in core.sessions.every().values() if s.episodes_written)
        before = set(owner.episodes_written)
        assert type(owner.episodes_written) is tuple and len(before) == len(owner.episodes_written)
        new = write_episode(core, owner, "one more step", "more", [], None, None)["id"]
        assert owner.episodes_written == before | {new} and type(owner.episodes_written) is set
    finally:
        core.log.close()


def test_closed_sessions_stay_packed_until_read_and_a_damaged_checkpoint_means_a_full_replay(
        env: Env, tmp_path: Path) -> None:
    restored, _, replayed = _restored_and_replayed(env, tmp_path)
    table = restored.sessions
    closed = [sid for sid in table.rows if sid not in table.open_ids]
    assert closed and not table.open_ids.keys() & table.rows.keys()  # open ones are read at start
    assert len(table) == len(replayed.sessions)
    walked = list(table.walk_back("/repo/ckpt", skip=""))  # a handoff walk reads them on demand
    assert walked and all(s.id not in table.rows for s in walked)
    def fields(session: Any) -> list[Any]:  # a restored session holds its ids as a tuple, not a set
        return [set(v) if f in checkpoint._SET_FIELDS else v
                for f in checkpoint._SESSION_FIELDS for v in (getattr(session, f),)]
    for session in walked:
        assert fields(session) == fields(replayed.sessions.get(session.id))

    saved = (env.home / "state" / checkpoint.NAME).read_bytes()
    flipped = bytearray(saved)
    flipped[len(saved) // 2] ^= 0x20  # one bit, anywhere: the checksum no longer holds
    for n, damaged in enumerate([bytes(flipped), saved[:-1], saved[:-4], saved + b"\0"]):
        (env.home / "state" / checkpoint.NAME).write_bytes(damaged)
        _, resume = _opened(env.home, tmp_path / f"damaged{n}", use_checkpoint=True)
        assert resume is None, n
    thaw = restored.sessions.thaw
    assert thaw is not None
    bad_rows = [msgpack.packb(["sess-1"]), msgpack.packb([*([None] * 9), [10**6], *([None] * 5)])]
    for row in bad_rows:  # a row this version did not write: an error, never a wrong session
        with pytest.raises(ValueError):
            thaw(row)


def test_a_cold_start_with_helper_processes_equals_one_without(env: Env, tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    """With no state/, helpers parse the episode and memory files while the log replays; the
    daemon must end up exactly where it would have parsing them itself, bad and edited files
    included, and keep the helpers' caches for the next start."""
    from memoryd.daemon.episodes import journal
    from memoryd.daemon.memories import recovery

    env.start_daemon()
    _populate(env)
    assert env.memoryd("stop").returncode == 0
    for name in lifecycle.DERIVED_STATE:
        (env.home / "state" / name).unlink(missing_ok=True)  # vectors.bin: only with search by meaning on
    live = sorted((env.home / "memories").glob("*.md"))
    live[0].write_text(live[0].read_text().replace("ops/deploy.sh", "ops/deploy2.sh"))  # a hand edit
    (env.home / "memories" / "01ARZ3NDEKTSV4RRFFQ69G5FAV.md").write_text("---\nnot: [closed\n---\nx\n")
    plain, _ = _opened(env.home, tmp_path / "plain", use_checkpoint=False)
    monkeypatch.setattr(journal, "PREFETCH_MIN_SESSIONS", 1)
    monkeypatch.setattr(recovery, "PREFETCH_MIN_RECORDS", 1)
    helped, _ = _opened(env.home, tmp_path / "helped", use_checkpoint=False)
    assert helped.journal._helper is None and helped.memories.helper is None  # both were used
    assert not helped.memories.unverified and not helped.journal.unverified
    states = [_without_start_events(_state(core)) for core in (helped, plain)]
    assert states[0]["extensions"]["MemoryTier"].pop("cache_gen") is not None  # the helper's cache
    states[1]["extensions"]["MemoryTier"].pop("cache_gen")  # (a random name for each save)
    assert states[0] == states[1]
    for core in (helped, plain):
        assert [b["path"].rsplit("/", 1)[1] for b in core.memories.bad_files] == ["01ARZ3NDEKTSV4RRFFQ69G5FAV.md"]
        assert core.memories.hand_edited == [live[0].name[:-3]]
    query = "deploy2 nginx"
    assert helped.memories.index.text.search(query, limit=5) == plain.memories.index.text.search(query, limit=5)
    assert helped.memories.index_restored  # the helper's snapshot, checked against the files here
    cache = tmp_path / "helped" / "state" / "memories.cache"
    assert not cache.exists()  # the helper's caches are written on the first idle turn after start
    helped.memories.save_built_caches()
    helped.files.sync()
    assert cache.exists() and (tmp_path / "helped" / "state" / "search.index").exists()
    assert (tmp_path / "helped" / "state" / "episodes.cache").exists() is False  # written at stop
