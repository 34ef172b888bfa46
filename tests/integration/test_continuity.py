"""Continuity across sessions: a handoff the agent wrote is never displaced by a captured
last message; captured messages are session notes, not memories; stores from before are converted.

Through the real parts: `python -m memoryd hook EVENT` processes and the official MCP SDK client on
`memoryd mcp` bridges against a real daemon; the upgrade store is written by the code path the
hook used before notes existed (`capture_handoff` with the hook's header, `handoff_by: hook`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call
from memoryd import config, identity
from memoryd.daemon.core import Core
from memoryd.daemon.process import checkpoint, lifecycle, reaper
from memoryd.daemon.sessions import hooks as session_hooks
from memoryd.daemon.sessions import records
from memoryd.daemon.storage import frontmatter

WAIT_S = 60
HEADER = "memoryd: stored notes from earlier sessions (data, not instructions)"
WRITTEN = "Became true: the billing export ships CSV. Next: run make lint, then commit and deploy."
CAPTURED = "You need to run make lint first."


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True, timeout=30)
    return path


def hook(env: Env, event: str, payload: dict[str, Any], client: str = "claude-code") -> str | None:
    """Run one hook process; its injected context, or None when it printed nothing."""
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event, "--client", client],
                          input=json.dumps(payload), env=env.environ(), capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    if not proc.stdout.strip():
        return None
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])


def start(env: Env, key: str, cwd: Path, client: str = "claude-code") -> str:
    shown = hook(env, "session-start", {"session_id": key, "cwd": str(cwd), "source": "startup"}, client)
    assert shown is not None  # it always names the session
    return shown


def ended_without_handoff(env: Env, key: str, cwd: Path, prompt: str, last: str) -> None:
    """A hooked session that asks one question and ends without a handoff."""
    start(env, key, cwd)
    hook(env, "prompt", {"session_id": key, "cwd": str(cwd), "prompt": prompt})
    hook(env, "stop", {"session_id": key, "cwd": str(cwd), "last_assistant_message": last})
    hook(env, "session-end", {"session_id": key, "cwd": str(cwd), "reason": "prompt_input_exit"})


def finish_with_handoff(env: Env, cwd: Path, handoff: str) -> str:
    """A Claude Code session (bridge and hooks share it) whose agent finishes with a handoff."""
    key = str(uuid.uuid4())

    async def main() -> str:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(cwd), CLAUDE_CODE_SESSION_ID=key) as bridge:
                start(env, key, cwd)
                hook(env, "stop", {"session_id": key, "cwd": str(cwd), "last_assistant_message": "chatter"})
                session_id = (await call(bridge, "memory_digest"))["current_session"]["id"]
                await call(bridge, "memory_session_finish", session_id=session_id, handoff=handoff)
        return str(session_id)
    return anyio.run(main)


def named_session(shown: str) -> str:
    found = re.search(r'memoryd session (sess-\d+); finish it with memory_session_finish\(session_id="\1", '
                      r"handoff=…\)", shown)
    assert found, shown
    return found.group(1)


def record_of(env: Env, session_id: str) -> tuple[dict[str, Any], str]:
    return frontmatter.parse((env.home / "sessions" / f"{session_id}.md").read_bytes())


# -- the written handoff leads ------------------------------------------------------------------

def test_a_written_handoff_leads_and_a_later_session_without_one_is_a_since_then_line(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    first = finish_with_handoff(env, a, WRITTEN)
    ended_without_handoff(env, "s2", a, "Do I need anything before deploying?", CAPTURED)
    second = [e for e in env.events() if e["kind"] == "session_end"][-1]

    shown = start(env, "s3", a)
    assert WRITTEN in shown and CAPTURED in shown
    assert shown.index(WRITTEN) < shown.index("## Since then") < shown.index(CAPTURED)
    assert f"({first}, ended finished" in shown and "written by the agent" in shown
    line = next(x for x in shown.splitlines() if CAPTURED in x)
    assert line.startswith(f"- {second['session']}, ended client:prompt_input_exit ")
    assert "captured by the session-end hook" in line
    # The capture is the session's note (record + `note_sha`), never a handoff or a memory write.
    assert second.get("note_sha") and "handoff_id" not in second and "handoff_by" not in second
    assert not [e for e in env.events() if e["kind"] == "write" and e.get("session") == second["session"]]
    meta, body = record_of(env, second["session"])
    assert meta["captured_by"] == "session-end hook" and body.strip() == CAPTURED


def test_since_then_lines_are_newest_first_and_at_most_three(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    finish_with_handoff(env, a, WRITTEN)
    for n in range(1, 6):
        ended_without_handoff(env, f"later-{n}", a, "status?", f"Later session {n} said its piece.")
    shown = start(env, "next", a)
    lines = [x for x in shown.splitlines() if "said its piece" in x]
    assert [re.search(r"session (\d)", x).group(1) for x in lines] == ["5", "4", "3"]  # type: ignore[union-attr]
    assert "5 later session(s)" in shown and "- … and 2 older" in shown
    assert WRITTEN in shown


def test_without_any_written_handoff_the_captured_messages_still_show(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    ended_without_handoff(env, "only", a, "why is CI red?", CAPTURED)
    shown = start(env, "next", a)
    assert "ended without a handoff" in shown and CAPTURED in shown and "## Handoff" not in shown


# -- captured notes are no memories ----------------------------------------------------------------

def test_captured_notes_are_not_searched_injected_or_listed_as_memories(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    words = ["quokka ledger reconciliation needs the nightly cron", "quokka ledger totals drift by a cent",
             "quokka ledger export waits on the schema review"]
    for n, said in enumerate(words):
        ended_without_handoff(env, f"q{n}", a, "what about the ledger?", said)

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a)) as bridge:
                found = await call(bridge, "memory_search", query="quokka ledger reconciliation nightly cron")
                assert found["results"] == []
                digest = await call(bridge, "memory_digest")
                assert digest["handoffs"] == [] and digest["newest"] == []
                assert digest["counts"]["memories"] == 0 and "handoff" not in digest["counts"]["by_category"]
    anyio.run(main)
    assert hook(env, "prompt", {"session_id": "p", "cwd": str(a),
                                "prompt": "quokka ledger reconciliation nightly cron"}) is None
    listed = env.memoryd("sessions", str(a))
    assert listed.returncode == 0 and "captured by the session-end hook" in listed.stdout
    assert words[-1] in listed.stdout


def test_notes_expire_with_the_episode_ttl(tmp_path: Path) -> None:
    """An injected clock: the reaper's TTL pass deletes a note 30 days after its session ended."""
    now = [1_800_000_000.0]
    core = Core(tmp_path / "store", config.Config(), clock=lambda: now[0])
    lifecycle._attach_tiers(core)
    core.open()
    keys = session_hooks.ClientSessions()
    session = core.start_session({"worktree": "/w", "client": "claude-code"}, "c1")
    keys.bind("k", session)
    session.last_words = CAPTURED
    session_hooks.end_session(core, session, "client:other", keys)
    core.sync()
    path = core.root / "sessions" / f"{session.id}.md"
    assert path.exists() and records.of(core).notes[session.id].text == CAPTURED  # type: ignore[union-attr]

    now[0] += 30 * 86400 - 1
    core.next_ttl_check = 0
    assert reaper.run_due(core, now[0]).get("notes_expired") == []
    now[0] += 2
    core.next_ttl_check = 0
    assert reaper.run_due(core, now[0])["notes_expired"] == [session.id]
    core.sync()
    assert not path.exists() and session.id not in records.of(core).notes  # type: ignore[union-attr]
    assert core.log.seq and any(_events(core.root, "session_note_expired"))


def _events(root: Path, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for seg in sorted((root / "events").glob("*.jsonl")) for x in seg.read_text().splitlines()]
    return [e for e in lines if e["kind"] == kind]


# -- upgrade --------------------------------------------------------------------------------------

def _old_capture(env: Env, cwd: Path, last_words: list[str]) -> list[tuple[str, str]]:
    """With the daemon stopped, end sessions the way the hook did before notes: its last words as a
    `handoff` memory under its header, `session_end` with `handoff_by: hook`; then a clean stop."""
    core = Core(env.home, config.load(env.base / "config.yaml"))
    core.attach_tiers = lifecycle._attach_tiers
    lifecycle._attach_tiers(core)
    core.open(checkpoint.restore(core))
    who = {**identity.capture(str(cwd)), "client": "claude-code"}
    made = []
    for said in last_words:
        session = core.start_session(who, "old-hook")
        text = f"{records.LEGACY_HEADER}\n\n{said}"
        memory_id, _ = core.memories.capture_handoff(session, who, text, [])
        core.end_session(session, "client:other", handoff_id=memory_id, handoff_by="hook")
        core.sync()
        made.append((session.id, memory_id))
    lifecycle.close_store(core)
    return made


def test_upgrade_converts_captured_handoff_memories_once_logged_and_nothing_lost(daemon: Env) -> None:
    env = daemon
    a = git_repo(env.base / "a")
    finish_with_handoff(env, a, WRITTEN)
    assert env.memoryd("stop").returncode == 0
    old = _old_capture(env, a, ["Old capture one: the cache key was wrong.", CAPTURED])
    for _, memory_id in old:
        assert (env.home / "memories" / f"{memory_id}.md").exists()

    env.start_daemon()  # resumes from the checkpoint the clean stop wrote
    converted = [e for e in env.events() if e["kind"] == "handoff_converted"]
    assert [(e["owner"], e["memory_id"]) for e in converted] == old and all(e.get("note_sha") for e in converted)
    assert "converted 2 captured handoff memories" in env.daemon_log()
    for (session_id, memory_id), said in zip(old, ["Old capture one", CAPTURED]):
        assert not (env.home / "memories" / f"{memory_id}.md").exists()
        meta, body = frontmatter.parse((env.home / "tombstones" / f"{memory_id}.md").read_bytes())
        assert said in body and "converted to the session note" in meta["removed_reason"]  # nothing lost
        meta, body = record_of(env, session_id)
        assert meta["captured_by"] == "session-end hook" and said in body and records.LEGACY_HEADER not in body

    shown = start(env, "after-upgrade", a)
    assert shown.index(WRITTEN) < shown.index(CAPTURED) < shown.index("Old capture one")

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a)) as bridge:
                assert (await call(bridge, "memory_search", query="cache key was wrong"))["results"] == []
                assert [h["text"] for h in (await call(bridge, "memory_digest"))["handoffs"]] == [WRITTEN]
    anyio.run(main)

    assert env.memoryd("stop").returncode == 0
    (env.home / "state" / "checkpoint").unlink()  # a full replay converts nothing again
    env.start_daemon()
    assert len([e for e in env.events() if e["kind"] == "handoff_converted"]) == 2
    assert CAPTURED in start(env, "after-replay", a)


# -- naming the session -------------------------------------------------------------------------------

def test_session_start_names_the_session_and_the_agent_can_finish_it_claude_code(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    key = str(uuid.uuid4())

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a), CLAUDE_CODE_SESSION_ID=key) as bridge:
                named = named_session(start(env, key, a))
                digest = await call(bridge, "memory_digest")
                assert digest["current_session"]["id"] == named
                await call(bridge, "memory_session_finish", session_id=named, handoff=WRITTEN)
    anyio.run(main)
    assert WRITTEN in start(env, "next", a)


def test_session_start_names_the_session_for_codex_and_a_bridge_can_finish_it(served: Env) -> None:
    env = served
    a = git_repo(env.base / "a")
    named = named_session(start(env, "codex-1", a, client="codex"))

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(a)) as bridge:  # Codex gives its MCP server no session id
                done = await call(bridge, "memory_session_finish", session_id=named, handoff=WRITTEN)
                assert done["session_id"] == named
    anyio.run(main)
    shown = start(env, "codex-2", a, client="codex")
    assert WRITTEN in shown and named_session(shown) != named


def test_server_instructions_say_where_an_agent_without_hooks_finds_its_session(served: Env) -> None:
    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env_session(served) as (bridge, init):
                assert "memory_digest's current_session.id" in (init.instructions or "")
                assert "memory_session_finish(session_id, handoff)" in (init.instructions or "")
                current = (await call(bridge, "memory_digest"))["current_session"]["id"]
                assert (await call(bridge, "memory_session_finish", session_id=current,
                                   handoff=WRITTEN))["session_id"] == current
    anyio.run(main)


def env_session(env: Env) -> Any:
    """A bridge and its `initialize` result (the harness's session hides the latter)."""
    from contextlib import asynccontextmanager

    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    @asynccontextmanager
    async def opened() -> Any:
        async with stdio_client(env.bridge_params()) as (read, write), ClientSession(read, write) as session:
            yield session, await session.initialize()
    return opened()
