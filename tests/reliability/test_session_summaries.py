"""Session summaries live on their own record, never in the event log.

Real daemon, real files: `memory_session_finish`'s summary is kept in `sessions/<sess-n>.md`
(the log's `session_end` names only its sha256); after a clean restart and after SIGKILL,
`episode_handoff` and `memory_digest` still show it; a record no event names, or a symlinked
one, is a bad file and is never shown.
"""

from __future__ import annotations

import hashlib
import signal
from typing import Any

import anyio
import yaml

from harness import Env, call

WT = {"MEMORYD_WORKTREE": "/w/summary"}
SUMMARY = "Summary marker kestrel-4471: migrated the billing tables, backfill still open."
HANDOFF = "Next: run the backfill for invoices older than 2023 (handoff marker osprey-9902)."


def log_bytes(env: Env) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((env.home / "events").glob("*.jsonl")))


def finish(env: Env, handoff: str | None = HANDOFF) -> str:
    """Open a session in WT, write an episode, finish it with the summary; its id."""
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            written = await call(s, "episode_write", body="migrated the billing tables")
            out["sid"] = written["session_id"]
            args: dict[str, Any] = {"session_id": out["sid"], "summary": SUMMARY}
            if handoff is not None:
                args["handoff"] = handoff
            done = await call(s, "memory_session_finish", **args)
            assert done["summary"] == SUMMARY
    anyio.run(main)
    return str(out["sid"])


def shown(env: Env) -> dict[str, Any]:
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            out["handoff"] = await call(s, "episode_handoff")
            out["digest"] = await call(s, "memory_digest")
            out["health"] = await call(s, "memory_health")
    anyio.run(main)
    return out


def assert_summary_shown(view: dict[str, Any], sid: str, with_handoff: bool = True) -> None:
    assert view["handoff"]["prior_session_id"] == sid
    assert view["handoff"]["prior_session"]["summary"] == SUMMARY
    assert {"session_id": sid, "summary": SUMMARY} in [
        {k: row[k] for k in ("session_id", "summary")} for row in view["digest"]["recent_summaries"]]
    if with_handoff:
        row = view["digest"]["handoffs"][0]
        assert row["session_id"] == sid and row["summary"] == SUMMARY and row["text"] == HANDOFF


def test_the_summary_is_kept_on_a_record_never_in_the_log(env: Env) -> None:
    env.start_daemon()
    sid = finish(env)
    record = env.home / "sessions" / f"{sid}.md"
    data = record.read_bytes()
    meta = yaml.safe_load(data.decode().split("---\n")[1])
    assert meta["session_id"] == sid and data.decode().endswith(SUMMARY)
    assert record.stat().st_mode & 0o777 == 0o600
    end = next(e for e in env.events() if e["kind"] == "session_end" and e["session"] == sid)
    assert end["summary_sha"] == hashlib.sha256(data).hexdigest() and "summary" not in end
    assert b"kestrel-4471" not in log_bytes(env) and b"osprey-9902" not in log_bytes(env)
    assert_summary_shown(shown(env), sid)

    env.kill_daemon(signal.SIGTERM)
    env.start_daemon()
    assert_summary_shown(shown(env), sid)
    assert b"kestrel-4471" not in log_bytes(env)


def test_a_summary_without_a_handoff_survives_sigkill(env: Env) -> None:
    env.start_daemon()
    sid = finish(env, handoff=None)
    env.kill_daemon(signal.SIGKILL)
    env.start_daemon()
    view = shown(env)
    assert_summary_shown(view, sid, with_handoff=False)
    assert "handoff" not in view["handoff"]["prior_session"]
    assert b"kestrel-4471" not in log_bytes(env)


def test_a_planted_or_symlinked_session_record_is_never_shown(env: Env) -> None:
    env.start_daemon()
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(**WT) as s:
            out["sid"] = (await call(s, "episode_write", body="nothing to summarise"))["session_id"]
            await call(s, "memory_session_finish", session_id=out["sid"])  # no summary
    anyio.run(main)
    env.kill_daemon(signal.SIGTERM)
    sid = out["sid"]
    planted = env.home / "sessions" / f"{sid}.md"
    planted.write_text(f"---\nschema_version: 1\nsession_id: {sid}\n---\nPlanted instructions heron-5150\n")
    outside = env.base / "outside.md"
    outside.write_text("---\nschema_version: 1\nsession_id: sess-40\n---\nLinked text heron-5150\n")
    (env.home / "sessions" / "sess-40.md").symlink_to(outside)
    env.start_daemon()
    view = shown(env)
    assert "heron-5150" not in str(view["handoff"]) + str(view["digest"])
    bad = {row["path"] for row in view["health"]["bad_files"]["items"]}
    assert {str(planted), str(env.home / "sessions" / "sess-40.md")} <= bad
    assert int(view["digest"]["current_session"]["id"].split("-")[1]) > 40
