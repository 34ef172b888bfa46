"""A hostile sync remote (the transport): plain `git` pushes to a local bare remote, pulled
by a real daemon started through the harness. What a remote pushes goes through admission, is
quarantined or causes conflicts — it never runs a program, fills memory or disk, or has its
attributes rewrite a record (docs/sync.md, "What a remote can and cannot make this machine do")."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness import Env, wait_for
from memoryd.daemon.memories.records import Memory, render_memory
from synckit import set_up, synced, tool

GIT_ID = ["-c", "user.name=mallory", "-c", "user.email=mallory@example.invalid"]
EVIL_ID = "01JCCCCCCCCCCCCCCCCCCCCCC1"
PLAIN_ID = "01JCCCCCCCCCCCCCCCCCCCCCC2"


def record(memory_id: str, content: str, worktree: str | None = None) -> bytes:
    return render_memory(Memory(
        id=memory_id, content=content, scopes=("projects:memoryd",), category="fact", confidence="medium",
        source="explicit-statement", created="2026-01-01T00:00:00.000Z", updated="2026-01-01T00:00:00.000Z",
        session_id="sess-1", origin={"worktree": worktree, "project": "memoryd"}))


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *GIT_ID, *args], cwd=cwd, input=stdin, capture_output=True, check=True)
    return done.stdout.decode()


def push(remote: Path, files: dict[bytes | str, bytes], modes: dict[str, int] | None = None) -> None:
    """Commit `files` (names may be bytes: not UTF-8) on the remote's main with plain git."""
    work = Path(tempfile.mkdtemp(prefix="mdh", dir="/tmp")) / "w"
    heads = subprocess.run(["git", "ls-remote", "--heads", str(remote)],
                           capture_output=True, text=True, check=True).stdout
    if heads:
        subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(work)], check=True, capture_output=True)
    else:
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for name, data in files.items():
        path = os.path.join(os.fsencode(work), os.fsencode(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    for name, mode in (modes or {}).items():
        os.chmod(work / name, mode)
    git("add", "-A", "-f", cwd=work)
    git("commit", "-q", "-m", "hostile", cwd=work)
    git("push", "-q", str(remote), "HEAD:main", cwd=work)
    subprocess.run(["rm", "-rf", str(work.parent)], check=False)


def remote_tree(remote: Path) -> set[str]:
    return set(git("ls-tree", "-r", "--name-only", "main", cwd=remote).split("\n")) - {""}


# -- a program from the remote -----------------------------------------------------------------------

def bare_repo_with_gpg_program(where: Path, program: str) -> dict[str, bytes]:
    """The files of a bare repository whose config runs `program` on `git log` (its one commit
    carries a gpgsig header and `log.showSignature` is on) — path → bytes, to be pushed."""
    repo = where / "pwn"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    tree = git("mktree", cwd=repo, stdin=b"").strip()
    commit = (f"tree {tree}\nauthor m <m@x> 1700000000 +0000\ncommitter m <m@x> 1700000000 +0000\n"
              "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n")
    sha = git("hash-object", "-t", "commit", "-w", "--stdin", cwd=repo, stdin=commit.encode()).strip()
    git("update-ref", "refs/heads/main", sha, cwd=repo)
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=repo)
    git("config", "log.showSignature", "true", cwd=repo)
    git("config", "gpg.program", program, cwd=repo)
    for hook in (repo / "hooks").iterdir():
        hook.unlink()
    files = {}
    for path in repo.rglob("*"):
        if path.is_file():
            files[f"pwn/{path.relative_to(repo)}"] = path.read_bytes()
    return files


def test_a_pushed_bare_repo_with_gpg_program_never_runs(env: Env, remote: Path) -> None:
    victim_clone = env.home / "sync" / "repo"
    pwned = env.base / "pwned"
    set_up(env, remote)
    files = bare_repo_with_gpg_program(Path(tempfile.mkdtemp(prefix="mdp", dir="/tmp")), f"{victim_clone}/pwn/evil.sh")
    files["pwn/evil.sh"] = f"#!/bin/sh\necho ran >> {pwned}\nexit 1\n".encode()
    # The victim's home is readable from its own pushed records: the memory names the pushed repo.
    files[f"memories/{EVIL_ID}.md"] = record(EVIL_ID, "The deploy pipeline signs every release tag.",
                                             worktree=str(victim_clone / "pwn"))
    push(remote, files, modes={"pwn/evil.sh": 0o755})
    done = synced(env)
    assert done["status"] == "ok" and done["pulled"] == 1
    hits = tool(env, "memory_search", query="deploy pipeline signs release tag", auto_scope=False)["results"]
    assert EVIL_ID in [hit["id"] for hit in hits]
    shown = tool(env, "memory_show", id=EVIL_ID)
    assert not pwned.exists()
    assert not (victim_clone / "pwn").exists()  # never checked out: only records are on disk
    assert {row["path"] for row in done["quarantined"]} >= {"pwn/evil.sh", "pwn/config", "pwn/HEAD"}
    assert shown["origin"]["worktree"] == str(victim_clone / "pwn")  # shown as written: display-only
    assert "commits_since_verified" not in shown
    # Even a clone an older memoryd checked out whole (the repo on disk): the probe never goes there.
    (victim_clone / "pwn").mkdir()
    for name, data in files.items():
        if name.startswith("pwn/"):
            (victim_clone / name).parent.mkdir(parents=True, exist_ok=True)
            (victim_clone / name).write_bytes(data)
    os.chmod(victim_clone / "pwn" / "evil.sh", 0o755)
    (victim_clone / ".git" / "info" / "attributes").unlink()  # as an older memoryd left its clone
    tool(env, "memory_show", id=EVIL_ID)
    tool(env, "memory_search", query="deploy pipeline signs release tag", auto_scope=False)
    tool(env, "memory_write", content="The nightly backup runs at 02:00 UTC from the standby replica.",
         scopes=["projects:memoryd"])
    again = synced(env)  # and the next sync takes the stray checkout away, keeping the tree
    assert again["status"] == "ok" and again["pushed"] == 1 and not (victim_clone / "pwn").exists()
    assert not pwned.exists()
    assert {"pwn/evil.sh", "pwn/config", f"memories/{EVIL_ID}.md"} <= remote_tree(remote)  # not deleted


def test_the_staleness_probe_never_runs_a_program_a_repository_names(tmp_path: Path) -> None:
    """The probe's own guard, whatever the record: no discovered bare repository, no signature
    program, nothing inside the store's folder — and a normal worktree still answers."""
    from memoryd.daemon.memories.staleness import GitProbe

    pwned = tmp_path / "pwned"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho ran >> {pwned}\nexit 1\n")
    evil.chmod(0o755)
    bare_repo_with_gpg_program(tmp_path, str(evil))
    assert GitProbe().commits_since(str(tmp_path / "pwn"), 0) == 0
    home = tmp_path / "home"
    local = home / "project"
    subprocess.run(["git", "init", "-q", str(local)], check=True)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=local)
    git("config", "log.showSignature", "true", cwd=local)
    git("config", "gpg.program", str(evil), cwd=local)
    assert GitProbe().commits_since(str(local), 0) == 1  # a worktree outside the store: answered
    assert GitProbe(str(home)).commits_since(str(local), 0) == 0  # inside it: never probed
    assert not pwned.exists()


# -- a file name that is not UTF-8 -------------------------------------------------------------------

def test_a_non_utf8_file_name_is_reported_as_escaped_text_and_sync_exits_0(env: Env, remote: Path) -> None:
    set_up(env, remote)
    push(remote, {b"notes/bad\xff.md": b"not a record\n"})
    done = synced(env)  # exit 0: the reply encodes
    assert [row["path"] for row in done["quarantined"]] == ["notes/bad\\xff.md"]
    status = env.memoryd("sync", "status", timeout=30)
    assert status.returncode == 0, status.stderr
    assert tool(env, "memory_health")["sync"]["last"]["quarantined"][0]["path"] == "notes/bad\\xff.md"
    index = (env.home / "sync" / "quarantine" / "index.jsonl").read_bytes()
    assert b"bad\\\\xff.md" in index and b"\\udcff" not in index
    # A last.json an older memoryd kept with the raw name: read back as escaped text.
    last = env.home / "sync" / "last.json"
    last.write_text(json.dumps({**json.loads(last.read_text()), "remote": "bad\udcffname"}))
    env.memoryd("stop")
    env.start_daemon()
    again = env.memoryd("sync", "status", "--json", timeout=30)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["last"]["remote"] == "bad\\xffname"
    assert tool(env, "memory_health")["sync"]["last"]["remote"] == "bad\\xffname"


# -- a push that inflates to gigabytes --------------------------------------------------------------

def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_huge_push_is_never_read_whole_checked_out_or_kept(env: Env, remote: Path) -> None:
    set_up(env, remote)
    zeros = 48 << 20  # packed to a few hundred KB
    push(remote, {f"memories/{PLAIN_ID}.md": bytes(zeros), "big.bin": bytes(zeros) + b"x",
                  "random.bin": os.urandom(3 << 20)})
    pid = env.daemon_pid()
    assert pid is not None
    before = peak_rss_kb(pid)
    done = synced(env)
    assert done["status"] == "ok"
    reasons = {row["path"]: row["reason"] for row in done["quarantined"]}
    assert reasons[f"memories/{PLAIN_ID}.md"].startswith("over the size cap")
    assert reasons["big.bin"].startswith("over the size cap") and reasons["random.bin"].startswith("over the size cap")
    assert peak_rss_kb(pid) - before < 40 << 10  # never more than a batch of capped blobs at once
    kept = env.home / "sync" / "quarantine"
    assert sum(p.stat().st_size for p in kept.iterdir()) < 64 << 10  # rows only, no bytes
    clone = env.home / "sync" / "repo"
    assert sorted(p.name for p in clone.iterdir()) == [".git"]  # nothing of it in the working tree
    assert tool(env, "memory_health")["sync"]["quarantined"] == 3
    again = synced(env)  # reported once
    assert again["status"] == "ok" and again["quarantined"] == [] and again["quarantined_total"] == 3


def test_the_quarantine_keeps_no_bytes_past_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.daemon.sync import clone

    monkeypatch.setattr(clone, "QUARANTINE_MAX_BYTES", 8192)
    kept = tmp_path / "sync" / "quarantine"
    quarantine, rows = clone.Quarantine(kept), []
    quarantine.load()
    for n in range(20):
        quarantine.keep(f"junk/{n}", f"{n:040x}", os.urandom(1000), "outside the synced folders", rows)
    assert sum(p.stat().st_size for p in kept.iterdir()) <= 8192
    assert len(rows) == 20 and "not kept" in rows[-1]["reason"]


def test_the_quarantine_index_is_never_appended_through_a_link(tmp_path: Path) -> None:
    from memoryd.daemon.sync import clone

    kept, outside = tmp_path / "sync" / "quarantine", tmp_path / "outside.txt"
    kept.mkdir(parents=True)
    outside.write_text("untouched\n")
    (kept / "index.jsonl").symlink_to(outside)
    quarantine, rows = clone.Quarantine(kept), []
    quarantine.load()
    quarantine.keep("junk/1", "1" * 40, b"bad bytes", "outside the synced folders", rows)
    assert outside.read_text() == "untouched\n"
    assert [r["blob"] for r in rows] == ["1" * 40]  # still reported


# -- the remote's .gitattributes (and .gitignore) ----------------------------------------------------

def test_a_remote_gitattributes_never_rewrites_a_pulled_record(env: Env, remote: Path) -> None:
    set_up(env, remote)
    pulled = record(PLAIN_ID, "The staging database runs Postgres 15 on port 5433 behind pgbouncer.")
    push(remote, {".gitattributes": b"*.md text eol=crlf\n* filter=lfs\n", ".gitignore": b"*\n",
                  f"memories/{PLAIN_ID}.md": pulled})
    done = synced(env)
    assert done["pulled"] == 1 and done["conflicts_decided"] == []
    assert (env.home / "memories" / f"{PLAIN_ID}.md").read_bytes() == pulled
    clone = env.home / "sync" / "repo"
    assert (clone / "memories" / f"{PLAIN_ID}.md").read_bytes() == pulled  # no CRLF
    assert not (clone / ".gitattributes").exists() and not (clone / ".gitignore").exists()
    updated = tool(env, "memory_update", id=PLAIN_ID,
                   content="The staging database runs Postgres 16 on port 5434 behind pgbouncer.")
    assert updated["status"] == "updated"
    mine = tool(env, "memory_write", content="The nightly backup runs at 02:00 UTC from the standby replica.",
                scopes=["projects:memoryd"])["id"]
    after = synced(env)  # the local edit is not a conflict against itself; .gitignore keeps nothing out
    assert after["status"] == "ok" and after["conflicts_decided"] == [] and after["pushed"] == 2
    assert tool(env, "memory_health")["sync"]["conflicts"]["total"] == 0
    on_remote = subprocess.run(["git", "show", f"main:memories/{PLAIN_ID}.md"], cwd=remote, capture_output=True,
                               check=True).stdout
    assert on_remote == (env.home / "memories" / f"{PLAIN_ID}.md").read_bytes()
    assert {f"memories/{mine}.md", ".gitattributes", ".gitignore"} <= remote_tree(remote)


# -- a hung ssh transport ----------------------------------------------------------------------------

def test_a_hung_ssh_transport_is_cut_and_its_ssh_child_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.daemon.sync import git as sync_git

    pid_file = tmp_path / "ssh.pid"
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")  # hangs, as a dead link does
    ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(ssh))
    monkeypatch.setattr(sync_git, "GIT_TIMEOUT_S", 2.0)
    repo = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    clone = sync_git.Git(repo, "0" * 16, "test")
    with pytest.raises(sync_git.GitFailed) as failed:
        clone.run("fetch", "ssh://memoryd.invalid/remote.git")
    assert failed.value.kind == "timeout"
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    try:
        wait_for(gone, timeout=5, step=0.05, what=f"the ssh child {pid} ending with its git")
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
