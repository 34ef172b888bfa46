"""Session brackets, finish with a handoff, and the digest — through real bridges and a real daemon."""

from __future__ import annotations

import anyio

from harness import Env, call, call_error

WT = "/w/sessions"


def test_session_start_supersedes_the_previous_bracket(env: Env) -> None:
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE=WT) as s:
            first = (await call(s, "episode_write", body="in the first bracket"))["session_id"]
            started = await call(s, "memory_session_start")
            assert started["previous_session_id"] == first and started["session_id"] != first
            second = (await call(s, "episode_write", body="in the second bracket"))["session_id"]
            assert second == started["session_id"]
        async with env.session(MEMORYD_WORKTREE=WT) as later:
            handoff = await call(later, "episode_handoff", prior_session_id=first)
            assert handoff["prior_session"]["ended"] == "superseded"
    anyio.run(main)


def test_finish_closes_exactly_once_and_the_next_call_opens_a_new_session(env: Env) -> None:
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE=WT) as s:
            sid = (await call(s, "episode_write", body="work"))["session_id"]
            done = await call(s, "memory_session_finish", session_id=sid, summary="all done")
            assert done["session_id"] == sid and done["summary"] == "all done" and done["finished_at"]
            again = await call_error(s, "memory_session_finish", session_id=sid)
            assert again.code == -32002 and again.data == {"kind": "finished_session", "id": sid}
            unknown = await call_error(s, "memory_session_finish", session_id="sess-4242")
            assert unknown.code == -32002 and unknown.data == {"kind": "unknown_session", "id": "sess-4242"}
            bad = await call_error(s, "memory_session_finish", session_id="session-1")
            assert bad.code == -32602 and bad.data["param"] == "session_id"
            after = await call(s, "episode_write", body="after the finish")
            assert after["session_id"] != sid
    anyio.run(main)


def test_a_blank_handoff_fails_closed_and_a_retry_with_text_succeeds(env: Env) -> None:
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE=WT) as s:
            sid = (await call(s, "episode_write", body="work"))["session_id"]
            blank = await call_error(s, "memory_session_finish", session_id=sid, handoff="   \n")
            assert blank.code == -32602 and blank.data["param"] == "handoff"
            secret = await call_error(s, "memory_session_finish", session_id=sid,
                                      handoff="Next: deploy with AKIAIOSFODNN7EXAMPLE as the key")
            assert secret.code == -32602 and secret.data["param"] == "handoff"
            big = await call_error(s, "memory_session_finish", session_id=sid, handoff="x" * 70_000)
            assert big.code == -32602 and big.data["param"] == "handoff"
            done = await call(s, "memory_session_finish", session_id=sid,
                              handoff="Became true: X works. Open: Y. Next: run Z.")
            assert done["handoff_capsule"] and done["handoff_deduped"] is False
        async with env.session(MEMORYD_WORKTREE=WT) as fresh:
            handoff = await call(fresh, "episode_handoff")
            prior = handoff["prior_session"]
            assert handoff["prior_session_id"] == sid and prior["ended"] == "finished"
            assert prior["handoff"] == {"id": done["handoff_capsule"],
                                        "text": "Became true: X works. Open: Y. Next: run Z."}
    anyio.run(main)
    events = "".join(p.read_text() for p in (env.home / "events").glob("*.jsonl"))
    assert "AKIAIOSFODNN7EXAMPLE" not in events and "Became true" not in events


def test_identical_handoffs_collapse_onto_the_existing_record(env: Env) -> None:
    text = "Became true: the cache is warm. Next: measure."
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE=WT) as s:
            first = await call(s, "memory_session_finish",
                               session_id=(await call(s, "episode_write", body="a"))["session_id"], handoff=text)
            second = await call(s, "memory_session_finish",
                                session_id=(await call(s, "episode_write", body="b"))["session_id"], handoff=text)
            assert second["handoff_deduped"] is True
            assert second["handoff_capsule"] == first["handoff_capsule"]
    anyio.run(main)
    assert len(list((env.home / "memories").glob("*.md"))) == 1


def test_digest_leads_with_the_newest_handoff_per_project_callers_project_first(env: Env) -> None:
    async def finish(project: str, text: str) -> None:
        async with env.session(MEMORYD_WORKTREE=f"/w/{project}") as s:
            sid = (await call(s, "episode_write", body="work", scopes=[f"projects:{project}"]))["session_id"]
            await call(s, "memory_session_finish", session_id=sid, handoff=text)

    async def main() -> None:
        await finish("alpha", "alpha old handoff")
        await finish("alpha", "alpha new handoff")
        await finish("beta", "beta handoff")
        await finish("gamma", "gamma handoff")
        async with env.session(MEMORYD_WORKTREE="/w/alpha") as s:
            digest = await call(s, "memory_digest", headlines=2)
        keys = list(digest)
        assert keys.index("current_session") < keys.index("handoffs") < keys.index("counts") \
            < keys.index("newest") < keys.index("open_sessions") < keys.index("pending_writes") \
            < keys.index("recent_takeaways")
        assert digest["framing"] == "data"
        assert digest["handoffs_total"] == 3 and len(digest["handoffs"]) == 2
        texts = [h["text"] for h in digest["handoffs"]]
        assert texts[0] == "alpha new handoff"  # the caller's project first, and its newest handoff
        assert digest["handoffs"][0]["project"] == "alpha" and "alpha old handoff" not in texts
        for name in ("newest", "open_sessions", "pending_writes", "recent_takeaways"):
            assert f"{name}_total" in digest and len(digest[name]) <= 2
        assert digest["counts"]["by_category"].get("handoff") == 4
    anyio.run(main)


def test_digest_with_a_project_filter_and_a_disabled_scope_counts_only_what_is_visible(env: Env) -> None:
    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE="/w/alpha") as s:
            await call(s, "memory_write", content="Alpha builds with make and a pinned toolchain.",
                       scopes=["projects:alpha"])
            await call(s, "memory_write", content="Beta deploys through a blue green switch.",
                       scopes=["projects:beta"], acknowledge_scope_mismatch=True)  # a project new to the store
            everything = await call(s, "memory_digest")
            only_beta = await call(s, "memory_digest", project="beta")
            await call(s, "memory_scope_disable", scope="projects:alpha")
            hidden = await call(s, "memory_digest")
        assert everything["counts"]["memories"] == 2 and everything["newest_total"] == 2
        assert only_beta["counts"]["memories"] == 1 and only_beta["newest"][0]["scopes"] == ["projects:beta"]
        assert hidden["counts"]["memories"] == 1 and hidden["newest_total"] == 1
    anyio.run(main)
