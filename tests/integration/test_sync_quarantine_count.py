"""The quarantined count says what is still refused: once a version of a quarantined record is
admitted — a stamp from a clock a little ahead, admitted after this clock caught up; a record over
this machine's size cap, admitted after the cap was raised — its row leaves the quarantine and
`memoryd sync status`, `memory_health` and the job's summary stop counting it.

A real daemon, a local bare remote, and a second machine's push made with plain git.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from harness import Env, wait_for
from memoryd.daemon.memories.records import Memory, render_memory
from memoryd.daemon.storage.clock import iso
from memoryd.daemon.sync.merge import SKEW_MS
from synckit import set_up, synced, tool

GIT_ID = ["-c", "user.name=laptop", "-c", "user.email=laptop@example.invalid"]
AHEAD_S = 15  # past the skew margin: refused at the first sync, admitted once this clock has caught up
SKEWED_ID, LONG_ID = "01JCCCCCCCCCCCCCCCCCCCCCC1", "01JCCCCCCCCCCCCCCCCCCCCCC2"


def record(memory_id: str, content: str, stamp: str) -> bytes:
    return render_memory(Memory(id=memory_id, content=content, scopes=("projects:memoryd",), category="fact",
                                confidence="medium", source="explicit-statement", created=stamp, updated=stamp,
                                session_id="sess-1", origin={}))


def push(remote: Path, files: dict[str, bytes]) -> None:
    """Another machine's commit of `files` onto the remote's main, made with plain git."""
    work = Path(tempfile.mkdtemp(prefix="mdq", dir="/tmp")) / "w"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(work)], check=True, capture_output=True)
    for name, data in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
    subprocess.run(["git", *GIT_ID, "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", *GIT_ID, "commit", "-q", "-m", "laptop"], cwd=work, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=work, check=True, capture_output=True)


def counted(env: Env) -> tuple[int, int, int]:
    """The quarantined count as `sync status --json`, `sync status` (text) and memory_health say it."""
    status = env.memoryd_json("sync", "status")["quarantined"]
    text = env.memoryd("sync", "status").stdout
    line = next(x for x in text.splitlines() if x.startswith("quarantined:"))
    return status, int(line.split()[1]), tool(env, "memory_health")["sync"]["quarantined"]


def test_a_quarantined_record_admitted_later_is_no_longer_counted(env: Env, remote: Path) -> None:
    Path(env.vars["MEMORYD_CONFIG"]).write_text("search_by_meaning: false\nmax_content_bytes: 2048\n")
    set_up(env, remote)
    tool(env, "memory_write", content="Staging runs Postgres 15 on port 5433.", scopes=["projects:memoryd"])
    synced(env)  # the remote's main exists from here on
    ahead = iso(time.time() + SKEW_MS / 1000 + AHEAD_S)
    now = iso(time.time())
    push(remote, {f"memories/{SKEWED_ID}.md": record(SKEWED_ID, "Laptop clock ahead: release notes go out on Fridays.",
                                                      ahead),
                  f"memories/{LONG_ID}.md": record(LONG_ID, "Long runbook entry. " * 150, now)})
    first = synced(env)
    reasons = {row["path"]: row["reason"] for row in first["quarantined"]}
    assert reasons == {f"memories/{SKEWED_ID}.md": "created is in the future",
                       f"memories/{LONG_ID}.md": "content over max_content_bytes (2048)"}, reasons
    assert first["quarantined_total"] == 2 and counted(env) == (2, 2, 2)

    def admitted_once_caught_up() -> bool:
        return synced(env)["pulled"] == 1
    wait_for(admitted_once_caught_up, timeout=SKEW_MS / 1000 + AHEAD_S + 120, step=1,
             what="the skewed record being admitted")
    assert tool(env, "memory_show", id=SKEWED_ID)["content"].startswith("Laptop clock ahead")
    assert counted(env) == (1, 1, 1)  # only the long one is still refused
    last = env.memoryd_json("sync", "status")["last"]
    assert last["quarantined_total"] == 1, last

    Path(env.vars["MEMORYD_CONFIG"]).write_text("search_by_meaning: false\n")  # the default cap
    env.memoryd("stop")
    env.start_daemon()
    assert synced(env)["pulled"] == 1
    assert counted(env) == (0, 0, 0)
    kept = env.home / "sync" / "quarantine"
    assert list(kept.glob("*.bad")) == [] and (kept / "index.jsonl").read_text() == ""
    env.memoryd("stop")  # a restart reads the count from the folder: still nothing
    env.start_daemon()
    assert counted(env) == (0, 0, 0)
    assert json.loads(env.memoryd("sync", "--json").stdout)["quarantined_total"] == 0
