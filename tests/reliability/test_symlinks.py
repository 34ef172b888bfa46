"""Nothing under the store follows a symbolic link.

Real daemons on real files: a symlinked `episodes/<session>` folder whose target is an outside
folder of expired episodes is neither indexed nor pruned (its files survive the TTL reaper); a
symlinked memory, tombstone or episode file is reported as a bad file and never served; a
symlinked temp file is neither rolled forward nor deleted; a symlinked top-level store directory
stops the start; `memoryd export` leaves links out.
"""

from __future__ import annotations

import json
import signal
import tarfile
from pathlib import Path
from typing import Any

import anyio
from ulid import ULID

from harness import Env, call, call_error
from memoryd.daemon.memories import records
from memoryd.daemon.storage import frontmatter

WT = {"MEMORYD_WORKTREE": "/w/links"}
OUTSIDE_TEXT = "OUTSIDE zebra quartz secret plan for the billing webhook"
UNKNOWN_MEMORY = -32002


def episode_file(episode_id: str, session: str, created: str, body: str) -> str:
    return (f"---\nschema_version: 1\nid: {episode_id}\ncreated: '{created}'\nsession_id: {session}\n"
            f"scopes: []\ntakeaway: {body}\nswarm_id: null\nworktree: /w/links\n---\n{body}\n")


def memory_file(memory_id: str, created: str) -> str:
    return (f"---\nschema_version: 1\nid: {memory_id}\ncreated: '{created}'\nupdated: '{created}'\n"
            "session_id: sess-1\nscopes: [projects:links]\ncategory: fact\nconfidence: high\nsource: test\n"
            "origin: {}\nlast_verified_at: null\nverified_paths: []\nverified_commits: []\nlinks: []\n"
            f"tainted: false\ntaint: []\n---\n{OUTSIDE_TEXT}\n")


def assert_valid_memory(path: Path) -> None:
    """The planted target is a record the daemon would serve if it followed the link."""
    meta, body = frontmatter.parse(path.read_bytes())
    records.from_meta(meta, body, meta["id"])


def old_ulid() -> str:
    return str(ULID.from_timestamp(946_684_800))  # 2000-01-01


def outside_dir(env: Env) -> Path:
    folder = env.base / "outside"
    folder.mkdir(exist_ok=True)
    return folder


def bad_paths(health: dict[str, Any]) -> set[str]:
    return {row["path"] for row in health["bad_files"]["items"]}


def test_a_symlinked_session_folder_is_neither_read_nor_reaped(env: Env) -> None:
    (env.base / "config.yaml").write_text("episode_ttl_days: 1\n")
    outside = outside_dir(env)
    planted = [old_ulid() for _ in range(3)]
    for episode_id in planted:
        (outside / f"{episode_id}.md").write_text(
            episode_file(episode_id, "sess-7", "2000-01-01T00:00:00.000Z", OUTSIDE_TEXT))
    (env.home / "episodes").mkdir(parents=True)
    link = env.home / "episodes" / "sess-7"
    link.symlink_to(outside, target_is_directory=True)
    env.start_daemon()
    pruned = env.memoryd("episodes", "prune")  # the TTL pass, on demand (it also runs at start)
    assert pruned.returncode == 0, pruned.stderr
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            out["search"] = await call(s, "episode_search", auto_scope=False, include_bodies=True)
            out["by_id"] = await call(s, "episode_search", ids=planted, include_bodies=True)
            out["health"] = await call(s, "memory_health")
            out["session"] = (await call(s, "memory_digest"))["current_session"]["id"]
    anyio.run(main)

    assert sorted(p.name for p in outside.iterdir()) == sorted(f"{i}.md" for i in planted), "files were deleted"
    assert link.is_symlink()
    assert out["search"]["episodes"] == [] and out["by_id"]["episodes"] == []
    assert str(link) in bad_paths(out["health"])
    assert int(out["session"].split("-")[1]) > 7, "a new session reused the linked folder's id"


def test_symlinked_record_files_are_bad_files_never_served(env: Env) -> None:
    outside = outside_dir(env)
    memory_id, tomb_id, episode_id = old_ulid(), old_ulid(), old_ulid()
    (outside / "m.md").write_text(memory_file(memory_id, "2000-01-01T00:00:00.000Z"))
    (outside / "t.md").write_text(memory_file(tomb_id, "2000-01-01T00:00:00.000Z")
                                  .replace("taint: []\n", "taint: []\nremoved_at: '2000-01-02T00:00:00.000Z'\n"
                                           "removed_reason: test\n"))
    (outside / "e.md").write_text(episode_file(episode_id, "sess-1", "2000-01-01T00:00:00.000Z", OUTSIDE_TEXT))
    assert_valid_memory(outside / "m.md")
    assert_valid_memory(outside / "t.md")
    for sub in ("memories", "tombstones", "episodes/sess-1"):
        (env.home / sub).mkdir(parents=True)
    links = [env.home / "memories" / f"{memory_id}.md", env.home / "tombstones" / f"{tomb_id}.md",
             env.home / "episodes" / "sess-1" / f"{episode_id}.md"]
    for link, target in zip(links, ("m.md", "t.md", "e.md"), strict=True):
        link.symlink_to(outside / target)
    env.start_daemon()
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            out["show"] = await call_error(s, "memory_show", id=memory_id)
            out["search"] = await call(s, "memory_search", query="zebra quartz billing webhook")
            out["tombs"] = await call(s, "memory_list_tombstones")
            out["episodes"] = await call(s, "episode_search", auto_scope=False,
                                         include_bodies=True)
            out["health"] = await call(s, "memory_health")
    anyio.run(main)

    assert out["show"].code == UNKNOWN_MEMORY
    assert OUTSIDE_TEXT not in json.dumps(out["search"]) + json.dumps(out["tombs"]) + json.dumps(out["episodes"])
    assert {str(link) for link in links} <= bad_paths(out["health"])
    assert all(link.is_symlink() for link in links) and len(list(outside.iterdir())) == 3


def test_a_symlinked_temp_file_is_neither_rolled_forward_nor_deleted(env: Env) -> None:
    outside = outside_dir(env)
    memory_id = old_ulid()
    target = outside / "draft.md"
    target.write_text(memory_file(memory_id, "2000-01-01T00:00:00.000Z"))
    (env.home / "memories").mkdir(parents=True)
    link = env.home / "memories" / f".tmp-{memory_id}.md.0badc0de"
    link.symlink_to(target)
    env.start_daemon()
    assert link.is_symlink() and target.exists()
    assert not (env.home / "memories" / f"{memory_id}.md").exists()


def test_a_symlinked_store_directory_stops_the_start(env: Env) -> None:
    outside = outside_dir(env)
    env.home.mkdir(parents=True)
    (env.home / "memories").symlink_to(outside, target_is_directory=True)
    proc = env.start_daemon(wait=False)
    assert proc.wait(timeout=20) == 3
    log = (env.base / "daemon.out").read_text()
    assert "memories" in log and "symbolic link" in log and "Traceback" not in log


def test_export_leaves_symlinks_out(env: Env) -> None:
    outside = outside_dir(env)
    (outside / "secret.md").write_text(OUTSIDE_TEXT)
    env.start_daemon()

    async def main() -> None:
        async with env.session(**WT) as s:
            await call(s, "episode_write", body="a genuine episode")
    anyio.run(main)
    (env.home / "memories" / f"{old_ulid()}.md").symlink_to(outside / "secret.md")
    (env.home / "episodes" / "sess-9").symlink_to(outside, target_is_directory=True)
    archive = env.base / "export.tar.gz"
    assert env.memoryd("export", str(archive)).returncode == 0
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert not any(member.issym() for member in tar.getmembers())
    assert any(name.startswith("episodes/sess-1/") for name in names)
    assert not any("sess-9" in name or name.startswith("memories/") for name in names), names
    env.kill_daemon(signal.SIGTERM)
