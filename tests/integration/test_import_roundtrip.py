"""`memoryd import claude-code` and `memoryd import memoryd-export`, run as a
user runs them against real daemons on temp stores.

The Claude Code fixture is written by the real CLI (2.1.197, tests/scripted_claude.py's scripted
model, offline): the model reads the memory folder its system prompt names and writes topic files
and the MEMORY.md index there with the CLI's own Write tool, so the folder, its name and the
transcript beside it are exactly what Claude Code makes.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_hooks import claude_binary

from harness import Env, call
from scripted_claude import Request, run_claude

SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"
TOPICS = {
    "deploy_staging.md": ("deploy-staging", "Deploys go through staging-2 before production", "project",
                          ("Every deploy goes to staging-2 first and waits for the smoke tests.\n"
                           "**Why:** a direct deploy broke checkout in March.\n**How to apply:** never skip it.")),
    "user_role.md": ("user-role", "The user is the team's database specialist", "user",
                     "They know Postgres internals well; explain application code in database terms."),
    "legacy_job.md": ("legacy-job", "The legacy reporting job's credentials", "reference",
                      f"It reads the bucket with the key {SECRET} (rotate it)."),
}
INDEX = "".join(f"- [{name}]({file}) — {desc}\n" for file, (name, desc, _, _) in TOPICS.items())


# -- claude-code ---------------------------------------------------------------------------------------

def _system(request: Request) -> str:
    system = request.get("system")
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def write_with_claude_code(home: Path, repo: Path, env: dict[str, str]) -> Path:
    """Run the real Claude Code in `repo` with a model that writes TOPICS and the index into the
    memory folder Claude Code names in its system prompt; return that folder."""
    folder: dict[str, str] = {}

    def write(file: str, text: str | None = None) -> Any:
        def step(request: Request, requests: list[Request]) -> tuple[Any, ...]:
            if not folder:
                found = re.search(r"persistent file-based memory at `([^`]+)`", _system(request))
                assert found, "the CLI named no memory folder"
                folder["path"] = found.group(1)
            if text is None:
                name, desc, kind, body = TOPICS[file]
                content = f"---\nname: {name}\ndescription: {desc}\nmetadata:\n  type: {kind}\n---\n\n{body}\n"
            else:
                content = text
            return ("tool", "Write", {"file_path": str(Path(folder["path"]) / file), "content": content})
        return step

    steps = [*(write(f) for f in TOPICS), write("MEMORY.md", INDEX), ("text", "Saved.")]
    run = run_claude("remember how we deploy", repo, env, home, steps, claude=claude_binary(), allowed_tools="Write")
    assert run.proc.returncode == 0 and not run.errors, (run.proc.stderr[-800:], run.errors)
    return Path(folder["path"])


@pytest.fixture
def claude_memory(daemon: Env) -> Iterator[tuple[Env, Path, Path]]:
    home = daemon.base / "home"
    home.mkdir()
    repo = daemon.base / "work" / "orders_service.git-checkout"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/orders-service.git"],
                   check=True)
    folder = write_with_claude_code(home, repo, daemon.environ())
    yield daemon, home, folder


def test_claude_codes_own_memory_folder_is_imported_for_its_project(claude_memory: tuple[Env, Path, Path]) -> None:
    env, home, folder = claude_memory
    repo = env.base / "work" / "orders_service.git-checkout"  # the folder is named after it, lossily
    assert folder == home / ".claude" / "projects" / re.sub(r"[^a-zA-Z0-9]", "-", str(repo)) / "memory"
    assert sorted(p.name for p in folder.iterdir()) == ["MEMORY.md", *sorted(TOPICS)]
    (folder / "passwd.md").symlink_to("/etc/passwd")

    first = env.memoryd_json("import", "claude-code", HOME=str(home))  # no PATH: every project under ~/.claude
    assert first["counts"] == {"committed": 1, "removed": 0, "duplicate": 0, "pending": 1, "refused": 1, "failed": 0}
    [refused] = [r for r in first["reasons"] if r["outcome"] == "refused"]
    assert refused["reason"] == "credential_warning" and SECRET not in json.dumps(first)
    assert refused["items"][0]["origin"].endswith("/memory/legacy_job.md:1")
    assert first["skipped"] == [{"path": str(folder / "passwd.md"), "reason": "a symbolic link (not followed)"}]
    [memory] = env.memoryd_json("memories", "list", "--scope", "import:claude-code")["memories"]
    shown = env.memoryd_json("memories", "show", memory["id"])
    assert shown["scopes"] == ["projects:orders-service", "import:claude-code"]
    assert shown["content"].startswith("Deploys go through staging-2 before production\n\nEvery deploy goes")
    assert "MEMORY.md" not in json.dumps(first) and "[deploy-staging](" not in shown["content"]  # the index: skipped
    [pending] = env.memoryd_json("pending")["pending"]
    assert pending["category"] == "user-inference" and "database specialist" in pending["content"]

    again = env.memoryd_json("import", "claude-code", str(folder.parent), HOME=str(home))  # a project folder as PATH
    assert again["counts"] == {"committed": 0, "removed": 0, "duplicate": 1, "pending": 1, "refused": 1, "failed": 0}

    (folder / "broken.md").write_text("---\nname: &a x\ntype: project\n---\nbody\n")
    bad = env.memoryd("import", "claude-code", str(folder), HOME=str(home))
    assert bad.returncode == 2 and f"{folder / 'broken.md'}:2: frontmatter: YAML anchors" in bad.stderr
    assert env.memoryd_json("memories", "list")["total"] == 1  # nothing more written


# -- memoryd-export ------------------------------------------------------------------------------------

FACTS = ["Releases are cut on Tuesdays after the freeze.", "The payments API pins stripe-python to 7.x.",
         "Search uses BM25 with the Snowball stemmer."]


def fill(env: Env) -> dict[str, str]:
    """Three memories, one verified, one removed, written as an agent would."""
    async def main() -> dict[str, str]:
        async with env.session() as agent:
            ids = {}
            for text, scopes in zip(FACTS, (["projects:web"], ["projects:payments", "teams:core"], ["user"])):
                ids[text] = (await call(agent, "memory_write", content=text, scopes=scopes))["id"]
            await call(agent, "memory_verify", id=ids[FACTS[1]], note="checked requirements.txt")
            await call(agent, "memory_remove", id=ids[FACTS[2]], reason="we moved to a vector index")
            return ids
    return anyio.run(main)


def contents(env: Env) -> tuple[set[tuple[str, tuple[str, ...]]], set[str]]:
    live = env.memoryd_json("memories", "list")["memories"]
    removed = env.memoryd_json("memories", "list", "--removed")["tombstones"]
    return ({(m["first_line"], tuple(s for s in m["scopes"] if not s.startswith("import:"))) for m in live},
            {t["first_line"] for t in removed})


def test_an_export_comes_back_through_import_whole_and_once(env: Env, tmp_path: Path) -> None:
    env.start_daemon()
    fill(env)
    archive = tmp_path / "store.tar.gz"
    assert env.memoryd("export", str(archive)).returncode == 0
    fresh = Env()
    try:
        fresh.start_daemon()
        first = fresh.memoryd_json("import", "memoryd-export", str(archive))
        assert first["counts"] == {"committed": 2, "removed": 1, "duplicate": 0, "pending": 0, "refused": 0,
                                   "failed": 0}
        assert contents(fresh) == contents(env)
        [verified] = [m for m in fresh.memoryd_json("memories", "list")["memories"] if "stripe" in m["first_line"]]
        assert fresh.memoryd_json("memories", "show", verified["id"])["last_verified_at"]
        again = fresh.memoryd_json("import", "memoryd-export", str(archive))
        assert again["counts"]["committed"] == again["counts"]["removed"] == 0 and again["counts"]["duplicate"] == 3
        assert contents(fresh) == contents(env)
    finally:
        fresh.cleanup()


def _tar(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    return path


def test_an_archive_with_a_link_or_a_climbing_member_is_refused_naming_it(daemon: Env, tmp_path: Path) -> None:
    climbing = tarfile.TarInfo("memories/../../x")
    climbing.size = 1
    link = tarfile.TarInfo("memories/01JAAAAAAAAAAAAAAAAAAAAAAA.md")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    device = tarfile.TarInfo("events/zero")
    device.type = tarfile.CHRTYPE
    for name, member, words in (("climb", climbing, "'memories/../../x' names a path outside"),
                                ("link", link, "'memories/01JAAAAAAAAAAAAAAAAAAAAAAA.md' is a link (to '/etc/passwd')"),
                                ("device", device, "'events/zero' is a device or FIFO")):
        archive = _tar(tmp_path / f"{name}.tar.gz", member)
        refused = daemon.memoryd("import", "memoryd-export", str(archive))
        assert refused.returncode == 2 and f"{archive}: member {words}" in refused.stderr, refused.stderr
    not_tar = tmp_path / "notes.tar.gz"
    not_tar.write_text("just text")
    refused = daemon.memoryd("import", "memoryd-export", str(not_tar))
    assert refused.returncode == 2 and "not a readable tar.gz archive" in refused.stderr
    assert daemon.memoryd_json("memories", "list")["total"] == 0
