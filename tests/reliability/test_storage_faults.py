"""Storage faults: an OSError in the commit path is a typed storage error, never a dead daemon,
and a call that got it was not applied (docs/storage.md, 'Reliability').

Real daemons on real files: the store on a 2 MiB tmpfs filled to the last byte (root only: the
test mounts it), `chattr +i` on a record, on `memories/` and on a temp file recovery must touch
(where chattr works). Each failing call answers -32002 with data {kind: "storage", path, errno,
error}; nothing it reported failed is on disk or in memory; reads keep working; writes resume
once the fault is gone; a start never crash-loops on a file it cannot touch. One in-process test
drives `Core.sync` past the log's reserve so the log flush itself fails, and checks the rollback.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import Env, call, call_error
from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.storage.eventlog import RESERVE_BYTES
from memoryd.errors import StorageError

WT = {"MEMORYD_WORKTREE": "/w/storage"}
FACT = "The billing service retries webhooks three times before it gives up."
STORAGE = -32002
TMPFS_BYTES = 2 * 1024 * 1024
PARTLY_FREE = 600 * 1024  # above the daemon's 256 KiB "out of space" line


# -- fixtures -------------------------------------------------------------------------------------

def _mount_tmpfs(where: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "tmpfs", str(where)],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def full_env(env: Env) -> Iterator[Env]:
    """`env` with its store on a fresh 2 MiB tmpfs, unmounted (after every process is killed)."""
    mount = env.base / "fs"
    _mount_tmpfs(mount)
    env.home = mount / "h"
    env.vars["MEMORYD_HOME"] = str(env.home)
    try:
        yield env
    finally:
        env.kill_daemon()
        for proc in env.procs:
            proc.kill()
        subprocess.run(["umount", str(mount)], check=False, capture_output=True)
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _chattr(flag: str, path: Path) -> None:
    done = subprocess.run(["chattr", flag, str(path)], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr {flag} does not work here: {done.stderr.strip()}")


@pytest.fixture
def pinned() -> Iterator[list[Path]]:
    """Paths the test makes immutable; `chattr -i` on each at teardown, so cleanup can delete them."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root (CAP_LINUX_IMMUTABLE)")
    paths: list[Path] = []
    yield paths
    for path in paths:
        subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)


def pin(pinned: list[Path], path: Path) -> None:
    _chattr("+i", path)
    pinned.append(path)


def unpin(path: Path) -> None:
    subprocess.run(["chattr", "-i", str(path)], check=True)


# -- helpers --------------------------------------------------------------------------------------

def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem is full (down to its last page); returns it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 4096, 512):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def assert_storage_error(error: Any, errno_name: str, path_part: str = "") -> None:
    assert error.code == STORAGE, error
    data = error.data or {}
    assert data.get("kind") == "storage" and data.get("error") == errno_name, data
    assert isinstance(data.get("errno"), int) and path_part in str(data.get("path")), data
    assert "internal error" not in error.message


def run(env: Env, scenario: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            await scenario(s, out)
    anyio.run(main)
    return out


def alive(env: Env, pid: int) -> None:
    assert env.daemon_pid() == pid, env.daemon_log()
    os.kill(pid, 0)


def stop(env: Env) -> None:
    env.kill_daemon(signal.SIGTERM)


def verify_log(env: Env) -> None:
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0, verify.stdout


def temp_files(env: Env) -> list[Path]:
    return [p for p in env.home.rglob(".tmp-*") if "quarantine" not in p.parts]


# -- full disk, immutable files, failing renames --------------------------------------------------

def test_a_full_disk_answers_a_storage_error_keeps_reads_and_writes_resume(full_env: Env) -> None:
    env = full_env
    proc = env.start_daemon()

    async def before(s: Any, out: dict[str, Any]) -> None:
        out["episode"] = (await call(s, "episode_write", body="step one", takeaway="one"))["id"]
        out["memory"] = (await call(s, "memory_write", scopes=["projects:storage"], content=FACT))["id"]
    made = run(env, before)
    filler = fill(env.home.parent)

    async def full(s: Any, out: dict[str, Any]) -> None:
        out["episode_error"] = await call_error(s, "episode_write", body="x" * 200_000, takeaway="lost")
        out["memory_error"] = await call_error(s, "memory_write", scopes=["projects:storage"],
                                               content="The deploy pipeline pins Python 3.12 in CI.")
        out["pending_error"] = await call_error(s, "memory_write", scopes=["projects:storage"],
                                                content="The user prefers small commits.",
                                                category="user-inference")
        out["search"] = await call(s, "memory_search", query="billing webhooks")
        out["episodes"] = await call(s, "episode_search", auto_scope=False)
        out["show"] = await call(s, "memory_show", id=made["memory"])
    seen = run(env, full)
    for key in ("episode_error", "memory_error", "pending_error"):
        assert_storage_error(seen[key], "ENOSPC")
    assert [h["id"] for h in seen["search"]["results"]][:1] == [made["memory"]], seen["search"]
    assert {e["id"] for e in seen["episodes"]["episodes"]} == {made["episode"]}
    alive(env, proc.pid)

    # Room for the up-front check, not for the write: it fails part-way and the pass is undone.
    os.truncate(filler, filler.stat().st_size - PARTLY_FREE)
    big = " ".join(f"detail{n}" for n in range(PARTLY_FREE // 8))

    async def partly(s: Any, out: dict[str, Any]) -> None:
        out["episode_error"] = await call_error(s, "episode_write", body="y" * (PARTLY_FREE + 300_000))
        out["pending_error"] = await call_error(s, "memory_write", scopes=["projects:storage"],
                                                content="The user prefers small commits: " + big,
                                                category="user-inference")
        out["search"] = await call(s, "memory_search", query="billing webhooks")
    seen = run(env, partly)
    for key in ("episode_error", "pending_error"):
        assert_storage_error(seen[key], "ENOSPC", ".tmp-")
    assert seen["search"]["results"][0]["id"] == made["memory"]
    alive(env, proc.pid)

    filler.unlink()

    async def after(s: Any, out: dict[str, Any]) -> None:
        out["episode"] = (await call(s, "episode_write", body="step two", takeaway="two"))["id"]
        out["pending"] = await call(s, "memory_write", scopes=["projects:storage"],
                                    content="The user prefers small commits.", category="user-inference")
        out["episodes"] = await call(s, "episode_search", auto_scope=False)
    resumed = run(env, after)
    # The failed pending write left no trace: its id is the first one, not the second.
    assert resumed["pending"]["pending_id"] == "pending-1", resumed["pending"]
    assert {e["id"] for e in resumed["episodes"]["episodes"]} == {made["episode"], resumed["episode"]}
    alive(env, proc.pid)
    stop(env)

    verify_log(env)
    kinds = [(e["kind"], e.get("status")) for e in env.events()]
    assert kinds.count(("episode_write", None)) == 2 and ("write", "committed") in kinds
    assert kinds.count(("write", "pending")) == 1, kinds
    on_disk = {p.stem for p in (env.home / "episodes").rglob("*.md")}
    assert on_disk == {made["episode"], resumed["episode"]}
    assert {p.stem for p in (env.home / "memories").glob("*.md")} == {made["memory"]}
    assert temp_files(env) == []


def test_an_immutable_record_or_directory_is_a_storage_error_not_a_crash(env: Env, pinned: list[Path]) -> None:
    proc = env.start_daemon()

    async def write(s: Any, out: dict[str, Any]) -> None:
        out["id"] = (await call(s, "memory_write", scopes=["projects:storage"], content=FACT))["id"]
    memory_id = run(env, write)["id"]
    record = env.home / "memories" / f"{memory_id}.md"
    before = record.read_bytes()
    pin(pinned, record)

    async def refused(s: Any, out: dict[str, Any]) -> None:
        out["update"] = await call_error(s, "memory_update", id=memory_id, confidence="low")
        out["remove"] = await call_error(s, "memory_remove", id=memory_id, reason="retired")
        out["show"] = await call(s, "memory_show", id=memory_id)
    seen = run(env, refused)
    assert_storage_error(seen["update"], "EPERM", record.name)
    assert_storage_error(seen["remove"], "EPERM", record.name)
    assert seen["show"]["confidence"] != "low" and record.read_bytes() == before
    assert not (env.home / "tombstones" / record.name).exists()
    alive(env, proc.pid)

    unpin(record)
    memories = env.home / "memories"
    pin(pinned, memories)

    async def dir_pinned(s: Any, out: dict[str, Any]) -> None:
        out["write"] = await call_error(s, "memory_write", scopes=["projects:storage"],
                                        content="The nightly backup job runs at 02:00 UTC on the db host.")
        out["search"] = await call(s, "memory_search", query="billing webhooks")
    seen = run(env, dir_pinned)
    assert_storage_error(seen["write"], "EPERM", "memories")
    assert seen["search"]["results"][0]["id"] == memory_id
    unpin(memories)

    async def resumed(s: Any, out: dict[str, Any]) -> None:
        out["update"] = await call(s, "memory_update", id=memory_id, confidence="low")
        out["remove"] = await call(s, "memory_remove", id=memory_id, reason="retired")
    done = run(env, resumed)
    assert done["update"]["status"] == "updated" and done["remove"]["status"] == "removed"
    alive(env, proc.pid)
    stop(env)
    verify_log(env)
    statuses = [(e["kind"], e.get("status")) for e in env.events() if e["kind"] in ("update", "remove", "write")]
    assert statuses == [("write", "committed"), ("update", "updated"), ("remove", "removed")], statuses
    assert (env.home / "tombstones" / record.name).exists() and not record.exists()


def test_recovery_reports_a_temp_file_it_cannot_touch_and_starts(env: Env, pinned: list[Path]) -> None:
    env.start_daemon()
    run(env, lambda s, out: call(s, "episode_write", body="before the stop"))
    stop(env)
    stray = env.home / "memories" / ".tmp-01J00000000000000000000000.md.deadbeef"
    stray.write_bytes(b"half a record")
    pin(pinned, stray)

    for _attempt in range(2):  # twice: a second start must not trip over the same file either
        proc = env.start_daemon()

        async def health(s: Any, out: dict[str, Any]) -> None:
            out["health"] = await call(s, "memory_health")
            out["write"] = await call(s, "episode_write", body="after the start")
        seen = run(env, health)
        bad = [item["path"] for item in seen["health"]["bad_files"]["items"]]
        assert str(stray) in bad, seen["health"]["bad_files"]
        assert seen["write"]["status"] == "committed"
        alive(env, proc.pid)
        stop(env)
    assert stray.exists()
    verify_log(env)


def test_a_log_flush_that_fails_rolls_the_whole_pass_back(tmp_path: Path) -> None:
    """In process, on a full tmpfs: more events than the log's reserve holds, so the flush
    itself fails (ENOSPC); the pass is cut from the log and the state rebuilt from disk."""
    mount = tmp_path / "fs"
    _mount_tmpfs(mount)
    core = None
    try:
        core = Core(mount / "store", Config())
        core.open()
        session = core.start_session({"worktree": "/w"}, "c1")
        core.sync()
        seq = core.log.seq
        segment = next((mount / "store" / "events").glob("*.jsonl"))
        durable = segment.stat().st_size
        fill(mount)
        with pytest.raises(StorageError) as failed:  # from the append's buffer or from the sync
            for n in range(RESERVE_BYTES // 100):  # ~100+ bytes each: well past the reserve
                core.record("scope_disable", session, scope=f"projects:p{n}")
            core.sync()
        assert failed.value.errno == errno.ENOSPC and failed.value.data["kind"] == "storage"
        assert segment.stat().st_size == durable and core.log.seq == seq
        assert core.aborts == 1 and core.sessions.get(session.id) is not None
        (mount / "filler").unlink()
        core.record("scope_enable", session, scope="projects:p0")
        core.sync()
        assert core.log.seq == seq + 1
        core.log.close()
        from memoryd.daemon.storage.logcheck import verify
        report = verify(mount / "store" / "events")
        assert report["ok"] and report["events"] == seq + 1, report
    finally:
        if core is not None:
            core.log._drop_file()  # an open segment would keep the mount busy
        subprocess.run(["umount", str(mount)], check=False, capture_output=True)
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def test_a_torn_tail_the_start_may_not_cut_is_refused_cleanly(env: Env, pinned: list[Path]) -> None:
    """A crash left a torn tail on a segment made append-only (`chattr +a`): the start cannot cut
    it and must not append after it, so it refuses (exit 3) with the file named — no traceback,
    no crash loop of tracebacks — and starts once the flag is gone."""
    env.start_daemon()
    run(env, lambda s, out: call(s, "episode_write", body="before the crash"))
    stop(env)
    segment = next((env.home / "events").glob("*.jsonl"))
    with open(segment, "ab") as handle:
        handle.write(b'{"seq": 99, "ts": "20')
    _chattr("+a", segment)
    pinned.append(segment)
    proc = env.start_daemon(wait=False)
    assert proc.wait(timeout=30) == 3, env.daemon_log()
    out = (env.base / "daemon.out").read_text(errors="replace")
    assert "Traceback" not in out and segment.name in out, out
    subprocess.run(["chattr", "-a", str(segment)], check=True)
    env.start_daemon()
    stop(env)
    verify_log(env)


def test_a_rename_that_fails_after_the_commit_is_retried_not_lost(tmp_path: Path, pinned: list[Path]) -> None:
    """The race the staging check cannot see: a record turns immutable between staging and
    publish. The change is committed (its event is durable), so publish must neither raise nor
    drop it: the temp file is served and renamed at a later commit; the move's delete waits."""
    from memoryd.daemon.storage.store import FileStore

    root = tmp_path / "store"
    (root / "memories").mkdir(parents=True)
    record, other = root / "memories" / "a.md", root / "memories" / "b.md"
    record.write_bytes(b"old")
    other.write_bytes(b"the other half of a move")
    files = FileStore(root)
    files.write_file(record, b"new")
    files.delete_file(other)
    files.recover_temp_files(set(), deep=False)  # a sweep while serving (`Core.verify_files`) ...
    pin(pinned, record)
    files.flush()  # ... left the staged file alone
    files.publish()  # EPERM on the rename: logged, kept
    files.recover_temp_files(set(), deep=False)  # and the one whose rename is to be retried
    assert record.read_bytes() == b"old" and files.read_bytes(record) == b"new" and files.exists(record)
    assert other.exists(), "a delete ran ahead of the rename it follows"
    unpin(record)
    files.flush()
    files.publish()
    assert record.read_bytes() == b"new" and not other.exists()
    assert not list((root / "memories").glob(".tmp-*"))


def test_the_ttl_reaper_keeps_an_episode_it_cannot_delete_and_keeps_serving(env: Env, pinned: list[Path]) -> None:
    """An expired episode made immutable: the TTL pass (at start, and on demand) keeps that
    session's folder whole and says so, instead of killing the daemon or half-pruning it."""
    from ulid import ULID

    Path(env.vars["MEMORYD_CONFIG"]).write_text("episode_ttl_days: 1\n")
    folder = env.home / "episodes" / "sess-7"
    folder.mkdir(parents=True)
    ids = [str(ULID.from_timestamp(946_684_800 + n)) for n in range(2)]  # 2000-01-01
    for episode_id in ids:
        (folder / f"{episode_id}.md").write_text(
            f"---\nschema_version: 1\nid: {episode_id}\ncreated: '2000-01-01T00:00:00.000Z'\n"
            "session_id: sess-7\nscopes: []\ntakeaway: old\nswarm_id: null\nworktree: /w/storage\n---\nold\n")
    pin(pinned, folder / f"{ids[1]}.md")
    proc = env.start_daemon()
    pruned = env.memoryd("episodes", "prune")
    assert pruned.returncode == 0, pruned.stderr
    assert sorted(p.stem for p in folder.glob("*.md")) == sorted(ids), "a pinned session was half-pruned"
    run(env, lambda s, out: call(s, "episode_write", body="still serving"))
    alive(env, proc.pid)
    unpin(folder / f"{ids[1]}.md")
    assert env.memoryd("episodes", "prune").returncode == 0
    assert not folder.exists()
    stop(env)
    verify_log(env)
