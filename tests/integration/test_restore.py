"""`memoryd export` then `memoryd restore` into an empty store is a full backup (issue 41): every
record comes back as it was — a pinned memory, a confirmed claim (not pending again), a verified
one, a tombstone, an episode, a session with its handoff — and the event log, so each memory's
history and the log's hash chain too. Compared file by file, then through a daemon started on the
restored store. A store that is not empty, or a hostile archive, gets nothing written.

Real path: records made through the SDK client on a real bridge and daemon, the CLI's export and
restore as processes, a second daemon on the restored store.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call

PARTS = ("memories", "tombstones", "episodes", "sessions", "events")


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for part in PARTS for p in sorted((root / part).rglob("*"))
            if p.is_file()}


def make_records(env: Env) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with env.session(MEMORYD_WORKTREE="/w/shop") as s:
            pinned = await call(s, "memory_write", content="Never deploy shop on Fridays.", scopes=["projects:shop"],
                                pinned=True)
            claim = await call(s, "memory_write", content="The user prefers small focused pull requests.",
                               scopes=["user"], category="user-inference")
            confirmed = await call(s, "memory_write_confirm", pending_id=claim["pending_id"])
            verified = await call(s, "memory_write", content="The shop API serves JSON under /api/v2 only.",
                                  scopes=["projects:shop"])
            await call(s, "memory_verify", id=verified["id"], note="checked the router")
            gone = await call(s, "memory_write", content="The shop uses Redis 6 for its sessions.",
                              scopes=["projects:shop"])
            await call(s, "memory_remove", id=gone["id"], reason="moved to Redis 7")
            await call(s, "episode_write", body="Step 2 of 3: the migration runs; next the backfill.")
            session = (await call(s, "memory_digest"))["current_session"]["id"]
            finished = await call(s, "memory_session_finish", session_id=session,
                                  handoff="The migration is in; next: run the backfill on staging.")
        return {"pinned": pinned["id"], "confirmed": confirmed["id"], "verified": verified["id"], "gone": gone["id"],
                "handoff": finished["handoff_capsule"]}
    return anyio.run(main)


def test_an_export_restored_into_an_empty_store_is_the_store_it_was(env: Env) -> None:
    env.start_daemon()
    made = make_records(env)
    history = env.memoryd_json("memories", "show", made["confirmed"], "--json")["history"]
    assert env.memoryd("stop").returncode == 0
    archive = env.base / "backup.tar.gz"
    assert env.memoryd("export", str(archive)).returncode == 0
    before = files(env.home)

    other = Env()
    try:
        done = other.memoryd("restore", str(archive))
        assert done.returncode == 0, done.stderr
        assert files(other.home) == before  # every record and every log segment, byte for byte
        assert other.memoryd("log", "verify").returncode == 0
        assert other.memoryd("restore", str(archive)).returncode == 1  # not empty now: nothing written
        other.start_daemon()
        pinned = other.memoryd_json("memories", "show", made["pinned"], "--json")
        assert pinned["status"] == "live" and pinned["pinned"] is True
        confirmed = other.memoryd_json("memories", "show", made["confirmed"], "--json")
        assert confirmed["category"] == "user-inference" and confirmed["history"] == history
        assert other.memoryd_json("memories", "show", made["verified"], "--json")["verification_note"]
        assert other.memoryd_json("memories", "show", made["gone"], "--json")["status"] == "removed"
        assert other.memoryd_json("pending", "--json")["total"] == 0

        async def handoff() -> dict[str, Any]:
            async with other.session(MEMORYD_WORKTREE="/w/shop") as s:
                return dict(await call(s, "episode_handoff", include_bodies=True))
        found = anyio.run(handoff)
        assert "next: run the backfill on staging" in str(found), found
    finally:
        other.cleanup()


def test_a_hostile_archive_restores_nothing(env: Env) -> None:
    archive = env.base / "hostile.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        good = tarfile.TarInfo("memories/01J00000000000000000000000.md")
        body = b"---\nid: x\n---\nhello\n"
        good.size = len(body)
        tar.addfile(good, io.BytesIO(body))
        link = tarfile.TarInfo("memories/01J00000000000000000000001.md")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    done = env.memoryd("restore", str(archive))
    assert done.returncode == 2 and "is a link" in done.stderr, done.stderr
    assert files(env.home) == {}  # what was written before the link came is removed again
