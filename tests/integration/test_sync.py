"""Sync through a git remote with two stores ("two machines"): two `MEMORYD_HOME`s, two real
daemons, one local bare repository. Sync runs through the CLI (`memoryd sync …`, which waits for
the daemon's job); tools are called through the operator client or a real MCP bridge."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call, wait_for
from synckit import operator, synced, tool

GIT_ID = ["-c", "user.name=test", "-c", "user.email=test@example.invalid"]


def admin(env: Env, action: str, **args: Any) -> dict[str, Any]:
    op = operator(env)
    try:
        return op.admin(action, **args)
    finally:
        op.close()


def sync(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return env.memoryd("sync", *args, timeout=120)


def set_up(remote: Path, *envs: Env) -> None:
    for env in envs:
        env.start_daemon()
        done = sync(env, "init", str(remote))
        assert done.returncode == 0, done.stderr


def write(env: Env, content: str) -> str:
    result = tool(env, "memory_write", content=content, scopes=["projects:memoryd"])
    assert result["status"] == "committed", result
    return str(result["id"])


def hits(env: Env, query: str) -> list[str]:
    return [r["id"] for r in tool(env, "memory_search", query=query, auto_scope=False)["results"]]


def kinds(env: Env, kind: str) -> list[dict[str, Any]]:
    return [e for e in env.events() if e["kind"] == kind]


FACT = "The staging database runs Postgres 15 on port 5433 behind pgbouncer."


def test_a_write_on_one_machine_is_found_on_the_other_after_both_sync(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    set_up(remote, a, b)
    for machine in (a, b):  # the sync folder holds the store's records: 0700 like the rest of it
        assert [oct((machine.home / p).stat().st_mode & 0o777) for p in ("sync", "sync/repo")] == ["0o700"] * 2
    memory_id = write(a, FACT)
    op = operator(a)  # a session handoff: it names local sessions, so it stays on its machine
    session_id = op.tool("memory_digest")["current_session"]["id"]
    handoff = op.tool("memory_session_finish", session_id=session_id,
                      handoff="Next: rotate the staging certificates.")["handoff_capsule"]
    op.close()
    first = synced(a)
    assert first["status"] == "ok" and first["pushed"] == 1
    assert not (a.home / "sync" / "repo" / "memories" / f"{handoff}.md").exists()
    second = synced(b)
    assert second["pulled"] == 1

    async def search_on_b() -> list[str]:
        async with b.session() as s:
            found = await call(s, "memory_search", query="staging postgres port", auto_scope=False)
            return [r["id"] for r in found["results"]]
    assert anyio.run(search_on_b) == [memory_id]  # indexed at once, through a real bridge
    shown = tool(b, "memory_show", id=memory_id)
    assert shown["content"] == FACT
    device_a = admin(a, "sync_status")["device"]
    assert shown["synced_from"] == device_a and "synced_from" not in tool(a, "memory_show", id=memory_id)
    pulls = kinds(b, "sync_pull")
    assert [(e["memory_id"], e["device"]) for e in pulls] == [(memory_id, device_a)]
    assert "content" not in json.dumps(pulls) and FACT not in json.dumps(b.events())
    # The same bytes on both machines, and the pulled file is accounted for after a restart.
    record = f"memories/{memory_id}.md"
    assert (a.home / record).read_bytes() == (b.home / record).read_bytes()
    b.memoryd("stop")
    b.start_daemon()
    health = tool(b, "memory_health")
    assert health["hand_edited"]["total"] == 0 and health["unaccounted"]["total"] == 0
    assert hits(b, "staging postgres port") == [memory_id]
    again = synced(b)
    assert again["pushed"] == 0 and again["pulled"] == 0


def test_a_removal_on_one_machine_reaches_the_other_as_a_tombstone(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    set_up(remote, a, b)
    memory_id = write(a, FACT)
    synced(a)
    synced(b)
    assert tool(b, "memory_remove", id=memory_id, reason="moved to the runbook")["status"] == "removed"
    assert synced(b)["pushed"] == 1
    assert synced(a)["pulled"] == 1
    assert (a.home / "tombstones" / f"{memory_id}.md").exists()
    assert not (a.home / "memories" / f"{memory_id}.md").exists()
    shown = tool(a, "memory_show", id=memory_id)
    assert shown["status"] == "removed" and shown["removed_reason"] == "moved to the runbook"
    assert hits(a, "staging postgres port") == []
    tombs = tool(a, "memory_list_tombstones")["tombstones"]
    assert [t["id"] for t in tombs] == [memory_id]
    assert [(e["memory_id"], e["state"]) for e in kinds(a, "sync_pull")] == [(memory_id, "tomb")]


def edited_on_both(remote: Path, a: Env, b: Env) -> tuple[str, str, str]:
    """One memory, synced to both machines, then changed on each (b's edit is the newer one)."""
    set_up(remote, a, b)
    memory_id = write(a, FACT)
    synced(a)
    synced(b)
    on_a = "The staging database runs Postgres 16 on port 5434 behind pgbouncer."
    on_b = "The staging database runs Postgres 17 on port 5435 behind pgbouncer."
    assert tool(a, "memory_update", id=memory_id, content=on_a)["status"] == "updated"
    time.sleep(0.01)  # the subject: b's edit carries a later stamp (ms) than a's
    assert tool(b, "memory_update", id=memory_id, content=on_b)["status"] == "updated"
    return memory_id, on_a, on_b


def test_the_same_memory_changed_on_both_keeps_the_newer_and_the_other_until_resolved(
        pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    memory_id, on_a, on_b = edited_on_both(remote, a, b)
    synced(a)
    merged = synced(b)
    assert [(d["id"], d["rule"]) for d in merged["conflicts_decided"]] == [(memory_id, "newer")]
    synced(a)
    for env in (a, b):  # one current version on both machines, the other kept, reported
        assert tool(env, "memory_show", id=memory_id)["content"] == on_b
        health = tool(env, "memory_health")["sync"]
        assert [row["id"] for row in health["conflicts"]["items"]] == [memory_id]
        kept = env.home / "sync" / "repo" / "conflicts" / memory_id
        assert [p.read_text().endswith(on_a) for p in kept.iterdir()] == [True]  # nothing lost
        assert tool(env, "memory_digest")["sync_conflicts"]["total"] == 1
        doctor = json.loads(env.memoryd("doctor", "--json").stdout)
        assert any(c["name"] == "sync conflicts" and c["status"] == "warn" for c in doctor["checks"])
    text = sync(a, "status").stdout
    assert memory_id in text and "resolve" in text
    # Settle it on A, keeping A's version: it becomes the current one everywhere.
    done = sync(a, "resolve", memory_id, "--keep", "other")
    assert done.returncode == 0, done.stderr
    assert tool(a, "memory_show", id=memory_id)["content"] == on_a
    assert "sync_conflicts" not in tool(a, "memory_digest")
    synced(a)
    synced(b)
    for env in (a, b):
        assert tool(env, "memory_show", id=memory_id)["content"] == on_a
        assert tool(env, "memory_health")["sync"]["conflicts"]["total"] == 0
    assert [e["keep"] for e in kinds(a, "sync_resolve")] == ["other"]
    # A restart rebuilds the same state: nothing hand-edited, unaccounted or in conflict.
    a.memoryd("stop")
    a.start_daemon()
    health = tool(a, "memory_health")
    assert health["hand_edited"]["total"] == 0 and health["unaccounted"]["total"] == 0
    assert health["sync"]["conflicts"]["total"] == 0
    assert synced(a)["pushed"] == 0


def test_a_remove_against_an_update_is_decided_by_the_same_rule(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    set_up(remote, a, b)
    memory_id = write(a, FACT)
    synced(a)
    synced(b)
    assert tool(a, "memory_remove", id=memory_id, reason="obsolete")["status"] == "removed"
    time.sleep(0.01)  # the subject: b's update carries a later stamp (ms) than a's remove
    newer = "The staging database runs Postgres 16 on port 5434 behind pgbouncer."
    assert tool(b, "memory_update", id=memory_id, content=newer)["status"] == "updated"
    synced(a)
    decided = synced(b)["conflicts_decided"]
    assert [d["id"] for d in decided] == [memory_id]
    synced(a)
    for env in (a, b):  # the update came after the removal: it is current, the tombstone kept
        shown = tool(env, "memory_show", id=memory_id)
        assert shown["status"] == "live" and shown["content"] == newer
        assert tool(env, "memory_health")["sync"]["conflicts"]["total"] == 1


# -- hostile files -------------------------------------------------------------------------------------

def record_bytes(memory_id: str, content: str, file_id: str | None = None) -> bytes:
    from memoryd.daemon.memories.records import Memory, render_memory

    memory = Memory(id=file_id or memory_id, content=content, scopes=("projects:memoryd",), category="fact",
                    confidence="medium", source="explicit-statement", created="2026-01-01T00:00:00.000Z",
                    updated="2026-01-01T00:00:00.000Z", session_id="sess-1", origin={})
    return render_memory(memory)


def push_by_hand(remote: Path, files: dict[str, bytes | str]) -> None:
    """Clone the remote with plain git, add `files` (bytes: a file; str: a symlink's target), push."""
    work = Path(tempfile.mkdtemp(prefix="mdh", dir="/tmp")) / "w"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(work)], check=True, capture_output=True)
    for name, value in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            os.symlink(value, path)
        else:
            path.write_bytes(value)
    subprocess.run(["git", *GIT_ID, "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", *GIT_ID, "commit", "-q", "-m", "hostile"], cwd=work, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=work, check=True, capture_output=True)


IDS = [f"01JBBBBBBBBBBBBBBBBBBBBBB{c}" for c in "0123456789"]


def test_hostile_pulled_files_are_quarantined_and_never_served(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    Path(b.vars["MEMORYD_CONFIG"]).write_text("max_content_bytes: 2048\nsearch_by_meaning: false\n")
    set_up(remote, a, b)
    write(a, FACT)
    synced(a)
    secret = "Deploy key for staging is AKIAABCDEFGHIJKLMNOP and it rotates monthly on Mondays."
    push_by_hand(remote, {
        f"memories/{IDS[0]}.md": "/etc/passwd",                                        # a symlink
        f"memories/{IDS[1]}.md": record_bytes(IDS[1], "Mismatched id record.", file_id=IDS[2]),
        "notes/readme.md": record_bytes(IDS[3], "Outside the synced folders."),         # wrong folder
        f"memories/{IDS[4]}.md": record_bytes(IDS[4], secret),                          # a credential
        f"memories/{IDS[5]}.md": record_bytes(IDS[5], "Oversize quarantine canary. " * 200),
        f"memories/{IDS[6]}.md": b"---\nid: [unclosed\n---\nUnparseable canary text.\n",
        f"tombstones/{IDS[7]}.md": record_bytes(IDS[7], "A tombstone without removed_at."),
        f"memories/{IDS[8]}.md": record_bytes(IDS[8], "The release train leaves every second Tuesday at noon."),
    })
    done = synced(b)
    reasons = {row["path"]: row["reason"] for row in done["quarantined"]}
    assert set(reasons) == {f"memories/{IDS[i]}.md" for i in (0, 1, 4, 5, 6)} | {
        "notes/readme.md", f"tombstones/{IDS[7]}.md"}, reasons
    assert reasons[f"memories/{IDS[0]}.md"] == "symbolic link"
    assert reasons[f"memories/{IDS[1]}.md"] == "id does not match the file name"
    assert "outside the synced folders" in reasons["notes/readme.md"]
    assert reasons[f"memories/{IDS[4]}.md"].startswith("holds a credential (aws_access_key")
    assert "max_content_bytes" in reasons[f"memories/{IDS[5]}.md"]
    assert reasons[f"memories/{IDS[6]}.md"].startswith("not a record")
    assert done["pulled"] == 2  # A's fact and the one good record of the hostile push
    assert hits(b, "release train tuesday") == [IDS[8]]
    for canary in ("canary", "AKIAABCDEFGHIJKLMNOP", "Mismatched", "Outside"):
        assert hits(b, canary) == []
    assert not any((b.home / "memories" / f"{IDS[i]}.md").exists() for i in (0, 1, 4, 5, 6))
    assert tool(b, "memory_health")["sync"]["quarantined"] == 7
    kept = b.home / "sync" / "quarantine"
    assert len(list(kept.glob("*.bad"))) == 7 and not any(p.is_symlink() for p in kept.iterdir())
    assert "AKIAABCDEFGHIJKLMNOP" not in json.dumps(b.events())
    again = synced(b)  # reported once, not at every sync
    assert again["quarantined"] == [] and again["quarantined_total"] == 7
    on_a = synced(a)  # A checks for itself: its size cap is the default, so the long one fits there
    assert on_a["pulled"] == 2 and on_a["quarantined_total"] == 6
    assert sorted(hits(a, "oversize quarantine canary")) == [IDS[5]]


# -- failures -------------------------------------------------------------------------------------------

def test_a_missing_remote_is_one_clear_error_and_the_daemon_keeps_serving(
        pair: tuple[Env, Env], remote: Path) -> None:
    a, _b = pair
    a.start_daemon()
    missing = remote.parent / "nowhere.git"
    done = sync(a, "init", str(missing))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "remote_unreachable" in done.stderr, done.stderr
    assert not (a.home / "sync" / "repo").exists()
    not_set_up = sync(a)
    assert not_set_up.returncode == 1 and "sync init" in not_set_up.stderr
    assert sync(a, "init", str(remote)).returncode == 0
    memory_id = write(a, FACT)
    remote.rename(missing)  # the remote goes away after set-up
    failed = sync(a)
    assert failed.returncode == 1 and "remote_unreachable" in failed.stderr and failed.stderr.count("\n") == 1
    assert hits(a, "staging postgres port") == [memory_id]  # the daemon is unaffected
    assert write(a, "The nightly backup runs at 02:00 UTC from the standby replica.")
    assert "sync failed" in sync(a, "status").stdout or "failed" in sync(a, "status").stdout
    missing.rename(remote)
    back = synced(a)
    assert back["status"] == "ok" and back["pushed"] == 2
    events = kinds(a, "sync")
    assert [e["status"] for e in events][-2:] == ["error", "ok"] and events[-2]["error"] == "remote_unreachable"


# -- a sync held at its push: kill the daemon there, or let another machine push first ---------------

HOLD_GIT = """#!/bin/sh
# Test stand-in for git: a push waits while the hold file exists (the test decides when it goes on).
case " $* " in
  *" push "*)
    if [ -e "$SYNC_TEST_HOLD" ]; then
      touch "$SYNC_TEST_HOLD.reached"
      while [ -e "$SYNC_TEST_HOLD" ]; do sleep 0.05; done
    fi;;
esac
exec {git} "$@"
"""


def hold_pushes(env: Env) -> Path:
    """Make `env`'s daemon run a git whose pushes wait on a hold file; returns the file (held)."""
    import shutil

    bin_dir = env.base / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(HOLD_GIT.format(git=shutil.which("git")))
    wrapper.chmod(0o755)
    hold = env.base / "hold"
    hold.touch()
    env.vars.update(PATH=f"{bin_dir}:{os.environ['PATH']}", SYNC_TEST_HOLD=str(hold))
    return hold


def background_sync(env: Env) -> subprocess.Popen[str]:
    import sys

    return subprocess.Popen([sys.executable, "-m", "memoryd", "sync", "--json"], env=env.environ(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_daemon_killed_mid_sync_is_consistent_after_restart(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    hold = hold_pushes(a)
    set_up(remote, a, b)
    ids = [write(a, f"Service {name} listens on port {port} behind the internal load balancer.")
           for name, port in (("alpha", 8101), ("bravo", 8102), ("charlie", 8103))]
    waiting = background_sync(a)
    wait_for(hold.with_name("hold.reached").exists, timeout=30, what="the push")  # exported, committed, pushing
    assert admin(a, "sync")["joined"] is True  # one sync at a time: a second request joins it
    assert admin(a, "sync_status")["running"]["phase"].startswith("fetching, merging, pushing")
    during = write(a, "Service delta listens on port 8104 behind the internal load balancer.")  # still serving
    a.kill_daemon()
    hold.unlink()  # the orphaned push may still finish: the remote may or may not have the commit
    assert waiting.wait(timeout=30) != 0  # the waiting CLI hears the daemon is gone
    wait_for(lambda: not a.processes(), timeout=30, what="the orphaned push ending")
    git_dir = a.home / "sync" / "repo" / ".git"
    (git_dir / "index.lock").write_text("")  # as if git itself had been killed mid-merge
    (git_dir / "MERGE_HEAD").write_text("0" * 40 + "\n")
    (a.home / "sync" / "repo" / "memories" / "stray.md").write_text("half-written export")
    a.start_daemon()
    health = tool(a, "memory_health")
    assert health["hand_edited"]["total"] == 0 and health["unaccounted"]["total"] == 0
    assert health["missing"]["total"] == 0
    again = synced(a)
    assert again["status"] == "ok" and "reset the clone" in again["repaired"]
    assert not (git_dir / "MERGE_HEAD").exists() and not (git_dir / "index.lock").exists()
    assert again["pushed"] == 4 and again["quarantined"] == []
    assert synced(b)["pulled"] == 4
    for memory_id in [*ids, during]:
        assert tool(b, "memory_show", id=memory_id)["status"] == "live"
    assert sorted(hits(b, "internal load balancer port")) == sorted([*ids, during])
    assert synced(a)["pushed"] == 0


def test_a_clone_file_a_crash_cut_short_is_written_again_and_never_reaches_a_store(
        pair: tuple[Env, Env], remote: Path) -> None:
    """The clone's working tree is written without fsync (a copy of the store and of git's blobs):
    what a power cut can leave of such a file — empty, or cut short — makes the tree dirty, and the
    next sync resets it from the last commit. Neither store ever takes the damaged bytes."""
    a, b = pair
    set_up(remote, a, b)
    pushed = write(a, FACT)
    assert synced(a)["pushed"] == 1 and synced(b)["pulled"] == 1
    a_copy = a.home / "sync" / "repo" / "memories" / f"{pushed}.md"
    b_copy = b.home / "sync" / "repo" / "memories" / f"{pushed}.md"
    whole = a_copy.read_bytes()
    assert b_copy.read_bytes() == whole  # the pull's checkout wrote the same bytes from the blob
    a_copy.write_bytes(b"")            # lost whole (delayed allocation, then a power cut)
    b_copy.write_bytes(whole[: len(whole) // 2])  # lost its tail
    for env in (a, b):
        again = synced(env)
        assert again["status"] == "ok" and "reset the clone" in again["repaired"], again
        assert again["pushed"] == 0 and again["pulled"] == 0 and again["quarantined"] == []
    assert a_copy.read_bytes() == whole and b_copy.read_bytes() == whole
    for env in (a, b):
        assert tool(env, "memory_show", id=pushed)["content"] == FACT
        assert tool(env, "memory_health")["hand_edited"]["total"] == 0


def test_the_records_a_sync_commits_go_into_one_pack_not_a_file_each(pair: tuple[Env, Env], remote: Path) -> None:
    a, _ = pair
    set_up(remote, a)
    facts = ["Invoices render with weasyprint.", "The cron host is batch-3.", "Redis runs on port 6380.",
             "Staging deploys from the develop branch.", "Feature flags live in LaunchDarkly.",
             "Logs ship to Loki through promtail.", "The API rate limit is 600 per minute.",
             "Terraform state sits in the infra-state bucket.", "Node 20 builds the web app.",
             "Alembic owns the reporting schema.", "Sentry samples a tenth of traces.", "Backups run at 02:00 UTC."]
    for fact in facts:
        write(a, fact)
    assert synced(a)["pushed"] == 12
    counted = subprocess.run(["git", "count-objects", "-v"], cwd=a.home / "sync" / "repo", check=True,
                             capture_output=True, text=True).stdout
    objects = dict(line.split(": ") for line in counted.splitlines())
    assert int(objects["in-pack"]) >= 12  # the blobs
    assert int(objects["count"]) <= 6     # loose: the commit and its few trees


def test_a_push_that_loses_a_race_pulls_merges_and_pushes_again(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    hold = hold_pushes(a)
    set_up(remote, a, b)
    hold.unlink()
    synced(a)  # the remote has a branch now
    hold.touch()
    on_a = write(a, "The release train leaves every second Tuesday at noon.")
    on_b = write(b, "The nightly backup runs at 02:00 UTC from the standby replica.")
    racing = background_sync(a)
    wait_for(hold.with_name("hold.reached").exists, timeout=30, what="the push")
    assert synced(b)["pushed"] == 1  # B pushes first
    hold.unlink()
    out, err = racing.communicate(timeout=60)
    assert racing.returncode == 0, err
    result = json.loads(out)
    assert result["attempts"] == 2 and result["pushed"] == 1 and result["pulled"] == 1
    assert synced(b)["pulled"] == 1
    for env in (a, b):
        assert {on_a, on_b} <= {m["id"] for m in tool(env, "memory_list")["memories"]}


def test_the_daemon_syncs_on_its_own_when_an_interval_is_set(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    Path(b.vars["MEMORYD_CONFIG"]).write_text("sync_interval_seconds: 1\nsearch_by_meaning: false\n")
    set_up(remote, a, b)
    memory_id = write(a, FACT)
    synced(a)
    wait_for(lambda: hits(b, "staging postgres port") == [memory_id], timeout=20, step=0.2,
             what="B syncing on its own")
    assert admin(b, "sync_status")["interval_seconds"] == 1


def test_a_rewritten_remote_history_is_merged_record_by_record(pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    set_up(remote, a, b)
    kept = [write(a, FACT), write(b, "The nightly backup runs at 02:00 UTC from the standby replica.")]
    synced(a)
    synced(b)
    synced(a)
    # Someone replaces the remote's history: one orphan commit with one new record, force-pushed.
    work = Path(tempfile.mkdtemp(prefix="mdh", dir="/tmp")) / "w"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "memories").mkdir()
    (work / "memories" / f"{IDS[9]}.md").write_bytes(
        record_bytes(IDS[9], "The release train leaves every second Tuesday at noon."))
    subprocess.run(["git", *GIT_ID, "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", *GIT_ID, "commit", "-q", "-m", "rewrite"], cwd=work, check=True)
    subprocess.run(["git", "push", "-q", "-f", str(remote), "HEAD:main"], cwd=work, check=True, capture_output=True)
    on_a = synced(a)
    assert on_a["status"] == "ok" and on_a["rewritten"] is True and on_a["pulled"] == 1
    on_b = synced(b)
    assert on_b["pulled"] == 1
    for env in (a, b):
        ids = {m["id"] for m in tool(env, "memory_list")["memories"]}
        assert {*kept, IDS[9]} <= ids
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", "main"], cwd=remote, capture_output=True,
                          text=True, check=True).stdout.split()
    assert {f"memories/{i}.md" for i in [*kept, IDS[9]]} <= set(tree)  # nothing dropped from the remote


def test_moving_to_a_new_remote_sends_every_record_there(pair: tuple[Env, Env], remote: Path) -> None:
    import shutil

    a, b = pair
    set_up(remote, a)
    memory_id = write(a, FACT)
    assert synced(a)["pushed"] == 1
    fresh = remote.parent / "fresh.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(fresh)], check=True)
    shutil.rmtree(a.home / "sync" / "repo")  # start over with another remote, as the error says
    assert sync(a, "init", str(fresh)).returncode == 0
    assert synced(a)["pushed"] == 1
    set_up(fresh, b)
    assert synced(b)["pulled"] == 1 and hits(b, "staging postgres port") == [memory_id]


def test_job_numbers_go_on_after_a_restart(pair: tuple[Env, Env], remote: Path) -> None:
    a, _b = pair
    set_up(remote, a)
    for _ in range(3):
        synced(a)
    before = admin(a, "sync_status")["last"]["job"]
    a.memoryd("stop")
    a.start_daemon()
    write(a, FACT)
    after = synced(a)  # its own result, not the last one kept from before the restart
    assert after["job"] > before and after["pushed"] == 1


def test_an_auth_failure_is_one_clear_error_and_never_a_prompt(pair: tuple[Env, Env]) -> None:
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib handler's name for GET
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="memoryd test"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    a, _b = pair
    a.start_daemon()
    try:
        done = sync(a, "init", f"http://127.0.0.1:{server.server_address[1]}/memories.git")
    finally:
        server.shutdown()
    assert done.returncode == 1 and "auth_failed" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert write(a, FACT)  # the daemon is unaffected


# -- a settled conflict, and a new remote's default branch --------------------------------------------

def doctor_warns_of_conflicts(env: Env) -> bool:
    report = json.loads(env.memoryd("doctor", "--json").stdout)
    return any(c["name"] == "sync conflicts" and c["status"] == "warn" for c in report["checks"])


def test_a_settled_conflict_stops_warning_at_once_leaves_no_folder_and_both_texts_can_be_read(
        pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    memory_id, on_a, on_b = edited_on_both(remote, a, b)
    synced(a)
    synced(b)
    synced(a)
    # Both sides' text, by a prefix as the other verbs take it: B's (current) and A's (kept).
    shown = sync(a, "status", "--show", memory_id[:8])
    assert shown.returncode == 0, shown.stderr
    current, kept = shown.stdout.split("== kept")
    assert "== current" in current and on_b in current and on_a not in current
    assert on_a in kept and "--keep other" in kept
    as_json = json.loads(sync(a, "status", "--show", memory_id, "--json").stdout)
    assert as_json["current"]["text"].strip() == on_b and [k["text"].strip() for k in as_json["kept"]] == [on_a]
    assert all(doctor_warns_of_conflicts(env) for env in (a, b))
    # Settled on A: doctor there stops warning at once (the clone still holds the file until the
    # next sync); the sync removes the file and its emptied folder, here and on B.
    assert sync(a, "resolve", memory_id[:10], "--keep", "current").returncode == 0
    assert not doctor_warns_of_conflicts(a)
    assert (a.home / "sync" / "repo" / "conflicts" / memory_id).is_dir()
    assert json.loads(sync(a, "status", "--show", memory_id, "--json").stdout)["kept"][0]["settled"]
    synced(a)
    synced(b)
    for env in (a, b):
        assert not (env.home / "sync" / "repo" / "conflicts" / memory_id).exists()
        assert not doctor_warns_of_conflicts(env)
        assert tool(env, "memory_show", id=memory_id)["content"] == on_b
    gone = sync(a, "status", "--show", memory_id)
    assert gone.returncode != 0 and "no kept conflict" in gone.stderr and gone.stderr.count("\n") == 1
    b.memoryd("stop")  # the daemon's view is rebuilt at start: still nothing to warn about
    b.start_daemon()
    assert not doctor_warns_of_conflicts(b)


def test_sync_init_on_a_new_bare_remote_follows_its_head_so_a_plain_clone_checks_out_the_memories(
        pair: tuple[Env, Env], remote: Path) -> None:
    a, b = pair
    fresh = remote.parent / "fresh.git"  # HEAD names master, as a plain `git init --bare` makes it
    subprocess.run(["git", "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(fresh)], check=True)
    set_up(fresh, a)
    assert admin(a, "sync_status")["branch"] == "master" and "branch master" in sync(a, "status").stdout
    memory_id = write(a, FACT)
    assert synced(a)["pushed"] == 1
    work = remote.parent / "plain-clone"
    done = subprocess.run(["git", "clone", "-q", str(fresh), str(work)], check=False, capture_output=True,
                          text=True)
    assert done.returncode == 0 and "nonexistent ref" not in done.stderr, done.stderr
    assert (work / "memories" / f"{memory_id}.md").read_text().endswith(FACT)
    set_up(fresh, b)  # another machine finds the same branch
    assert synced(b)["pulled"] == 1 and admin(b, "sync_status")["branch"] == "master"
    # A remote an earlier memoryd filled (its `main`, HEAD still naming master) stays on main.
    legacy = remote.parent / "legacy.git"
    subprocess.run(["git", "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(legacy)], check=True)
    subprocess.run(["git", "push", "-q", str(legacy), "master:main"], cwd=fresh, check=True, capture_output=True)
    c = Env()
    try:
        set_up(legacy, c)
        assert admin(c, "sync_status")["branch"] == "main" and hits(c, "staging postgres port") == []
        assert synced(c)["pulled"] == 1 and hits(c, "staging postgres port") == [memory_id]
    finally:
        c.cleanup()
