"""episode_search through real bridges: filters, ordering and caps, and wait_for fan-in.

Fan-in is the coordinator pattern of docs/tools.md: sub-agents write with the coordinator's
swarm_id and the coordinator parks one `episode_search(wait_for=N)` until N have reported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import yaml
from ulid import ULID

from harness import Env, call, call_error, wait_for_async

WAIT_S = 60  # bound on each test's async body






def iso_ms(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


async def write(session: Any, body: str, **extra: Any) -> dict[str, Any]:
    result = await call(session, "episode_write", body=body, **extra)
    assert result["status"] == "committed"
    return result


def ids(result: dict[str, Any]) -> list[str]:
    return [e["id"] for e in result["episodes"]]


# -- filters ------------------------------------------------------------------------------------

def test_swarm_id_defaults_from_the_environment_and_filters_across_worktrees(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/sub1", MEMORYD_SWARM_ID="swarm-a") as s:
                from_env = await write(s, "sub-agent 1 report", takeaway="sub 1 done")
                overridden = await write(s, "for another cohort", swarm_id="swarm-b")
            async with env.session(MEMORYD_WORKTREE="/w/sub2") as s:
                explicit = await write(s, "sub-agent 2 report", swarm_id="swarm-a")
                unlabelled = await write(s, "no cohort")
            async with env.session(MEMORYD_WORKTREE="/w/coordinator") as s:
                cohort_a = await call(s, "episode_search", swarm_id="swarm-a")
                cohort_b = await call(s, "episode_search", swarm_id="swarm-b")
                own_worktree = await call(s, "episode_search")
                err = await call_error(s, "episode_search", swarm_id="bad swarm!")
        assert from_env["swarm_id"] == "swarm-a" and overridden["swarm_id"] == "swarm-b"
        assert unlabelled["swarm_id"] is None
        assert ids(cohort_a) == [from_env["id"], explicit["id"]] and cohort_a["total"] == 2
        assert ids(cohort_b) == [overridden["id"]]
        rows = {e["id"]: e for e in cohort_a["episodes"]}
        assert rows[from_env["id"]]["worktree"] == "/w/sub1"
        assert rows[explicit["id"]]["worktree"] == "/w/sub2"
        assert rows[from_env["id"]]["session_id"] == from_env["session_id"]
        assert {r["swarm_id"] for r in rows.values()} == {"swarm-a"}
        assert all("body" not in r for r in rows.values()) and cohort_a["framing"] == "data"
        assert own_worktree["episodes"] == [] and own_worktree["total"] == 0
        assert err.code == -32602 and err.data["param"] == "swarm_id"
    anyio.run(main)


def test_session_id_filter_returns_only_that_sessions_episodes_from_any_worktree(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/one") as s:
                mine = [await write(s, f"one {i}") for i in range(3)]
            async with env.session(MEMORYD_WORKTREE="/w/two") as s:
                await write(s, "two 0")
                other = await call(s, "episode_search", session_id=mine[0]["session_id"])
                unknown = await call(s, "episode_search", session_id="sess-999")
                err = await call_error(s, "episode_search", session_id="../sess-1")
        assert ids(other) == [m["id"] for m in mine]
        assert {e["session_id"] for e in other["episodes"]} == {mine[0]["session_id"]}
        assert unknown == {"episodes": [], "total": 0, "framing": "data"}
        assert err.code == -32602 and err.data["param"] == "session_id"
    anyio.run(main)


def test_scope_filter_matches_nested_scopes_but_not_names_sharing_a_prefix(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/sc") as s:
                top = await write(s, "a", scopes=["projects:memoryd"])
                nested = await write(s, "b", scopes=["infra", "projects:memoryd:tests"])
                other = await write(s, "c", scopes=["projects:other"])
                lookalike = await write(s, "d", scopes=["projectsx"])
                await write(s, "e")
                projects = await call(s, "episode_search", scopes=["projects"])
                memoryd = await call(s, "episode_search", scopes=["projects:memoryd"])
                either = await call(s, "episode_search", scopes=["projects:memoryd", "projectsx"])
                deepest = await call(s, "episode_search", scopes=["projects:memoryd:tests"])
                nothing = await call(s, "episode_search", scopes=["nope"])
                err = await call_error(s, "episode_search", scopes=["Not A Scope"])
        assert ids(projects) == [top["id"], nested["id"], other["id"]]
        assert ids(memoryd) == [top["id"], nested["id"]]
        assert ids(either) == [top["id"], nested["id"], lookalike["id"]]
        assert ids(deepest) == [nested["id"]]
        assert nothing["total"] == 0
        assert err.code == -32602 and err.data["param"].startswith("scopes")
    anyio.run(main)


def test_since_accepts_relative_spans_and_iso_times(served: Env) -> None:
    env = served

    async def first() -> list[dict[str, Any]]:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/since") as s:
                return [await write(s, f"recent {i}") for i in range(3)]

    recent = anyio.run(first)
    # An episode from two hours ago can only be planted: stop, write the file, start again.
    stopped = env.memoryd("stop")
    assert stopped.returncode == 0, stopped.stderr
    created = time.time() - 2 * 3600
    old_id = str(ULID.from_timestamp(created))
    meta = {"schema_version": 1, "id": old_id, "created": iso_ms(created),
            "session_id": recent[0]["session_id"], "scopes": [], "takeaway": "two hours old",
            "swarm_id": None, "worktree": "/w/since"}
    path = env.home / "episodes" / recent[0]["session_id"] / f"{old_id}.md"
    path.write_text("---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\nold body")
    env.start_daemon()

    async def second() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/since") as s:
                everything = await call(s, "episode_search")
                half_hour = await call(s, "episode_search", since="30m")
                day = await call(s, "episode_search", since="24h")
                week = await call(s, "episode_search", since="7d")
                from_second = await call(s, "episode_search", since=recent[1]["created"])
                future = await call(s, "episode_search", since="2999-01-01T00:00:00Z")
                errors = [await call_error(s, "episode_search", since=bad)
                          for bad in ("yesterday", "30 minutes", "-5m", "2026-13-45T99:99:99Z")]
        recent_ids = [r["id"] for r in recent]
        assert ids(everything) == [old_id, *recent_ids]
        assert ids(half_hour) == recent_ids
        assert ids(day) == ids(week) == [old_id, *recent_ids]
        assert ids(from_second) == recent_ids[1:]  # `since` is inclusive
        assert future["total"] == 0
        assert all(e.code == -32602 and e.data["param"] == "since" for e in errors)
    anyio.run(second)


def test_since_far_in_the_past_matches_every_episode(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/far") as s:
                written = await write(s, "now")
                iso_far = await call(s, "episode_search", since="0999-01-01T00:00:00Z")
                span_far = await call(s, "episode_search", since="60000w")
        assert ids(iso_far) == [written["id"]]
        assert ids(span_far) == [written["id"]]
    anyio.run(main)


def test_ids_are_the_explicit_read_with_bodies_unless_refused(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/ids-a") as s:
                a = await write(s, "body of a\nsecond line", takeaway="a")
                b = await write(s, "body of b")
                await write(s, "body of c")
            async with env.session(MEMORYD_WORKTREE="/w/ids-b") as s:  # another worktree: ids ignore auto_scope
                absent = str(ULID())
                with_bodies = await call(s, "episode_search", ids=[b["id"], a["id"], absent])
                refused = await call(s, "episode_search", ids=[a["id"]], include_bodies=False)
                by_filter = await call(s, "episode_search", auto_scope=False, include_bodies=True)
                bad = await call_error(s, "episode_search", ids=["../../etc/passwd"])
                too_many = await call_error(s, "episode_search", ids=[str(ULID()) for _ in range(201)])
        assert ids(with_bodies) == [a["id"], b["id"]] and with_bodies["total"] == 2
        assert [e["body"] for e in with_bodies["episodes"]] == ["body of a\nsecond line", "body of b"]
        assert "body" not in refused["episodes"][0]
        assert [e["body"] for e in by_filter["episodes"]] == ["body of a\nsecond line", "body of b", "body of c"]
        assert bad.code == -32602 and too_many.code == -32602
        assert too_many.data["param"] == "ids"
    anyio.run(main)


def test_auto_scope_restricts_to_the_callers_worktree_unless_turned_off(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/a") as s:
                in_a = [await write(s, f"a{i}") for i in range(2)]
            async with env.session(MEMORYD_WORKTREE="/w/a-sibling") as s:
                in_sibling = await write(s, "sibling")
            async with env.session() as s:  # outside git: worktree None
                outside = await write(s, "outside")
                outside_view = await call(s, "episode_search")
            async with env.session(MEMORYD_WORKTREE="/w/a") as s:
                scoped = await call(s, "episode_search")
                unscoped = await call(s, "episode_search", auto_scope=False)
        assert ids(scoped) == [e["id"] for e in in_a]
        assert ids(outside_view) == [outside["id"]]
        assert ids(unscoped) == [*(e["id"] for e in in_a), in_sibling["id"], outside["id"]]
        assert unscoped["total"] == 4
    anyio.run(main)


def test_max_results_returns_the_most_recent_matches_oldest_first_with_the_total(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/cap") as s:
                written = [await write(s, f"step {i}", takeaway=f"t{i}") for i in range(7)]
                three = await call(s, "episode_search", max_results=3)
                one = await call(s, "episode_search", max_results=1)
                default = await call(s, "episode_search")
                err = await call_error(s, "episode_search", max_results=201)
        all_ids = [w["id"] for w in written]
        assert ids(three) == all_ids[-3:] and three["total"] == 7
        assert [e["takeaway"] for e in three["episodes"]] == ["t4", "t5", "t6"]
        assert ids(one) == all_ids[-1:] and one["total"] == 7
        assert ids(default) == all_ids and default["total"] == 7
        assert "timed_out" not in default
        assert err.code == -32602 and err.data["param"] == "max_results"
    anyio.run(main)


# -- wait_for fan-in ------------------------------------------------------------------------------

def test_wait_for_parks_until_three_sub_agents_have_reported(served: Env) -> None:
    env = served
    answer: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/coord") as coordinator:
                plan = await write(coordinator, "fan out to 3 sub-agents", takeaway="plan")
                swarm = plan["session_id"]  # a coordinator passes its own session id
                done = anyio.Event()

                async def gather() -> None:
                    answer.update(await call(coordinator, "episode_search", swarm_id=swarm,
                                             wait_for=3, timeout_s=20))
                    done.set()

                async def sub_agent(n: int, written: list[dict[str, Any]]) -> None:
                    async with env.session(MEMORYD_WORKTREE=f"/w/sub{n}", MEMORYD_SWARM_ID=swarm) as s:
                        written.append(await write(s, f"sub-agent {n} finished", takeaway=f"sub {n}"))

                written: list[dict[str, Any]] = []
                async with anyio.create_task_group() as tg:
                    tg.start_soon(gather)
                    await wait_for_async(lambda: env.logged("episode_search"), what="the search parking")
                    assert not done.is_set(), "the search answered before anything matched"
                    async with anyio.create_task_group() as subs:
                        for n in range(3):
                            subs.start_soon(sub_agent, n, written)
                    with anyio.fail_after(15):
                        await done.wait()
        assert answer["timed_out"] is False
        assert answer["total"] == 3
        assert sorted(ids(answer)) == sorted(w["id"] for w in written)
        assert {e["swarm_id"] for e in answer["episodes"]} == {swarm}
        assert len({e["session_id"] for e in answer["episodes"]}) == 3
        assert {e["takeaway"] for e in answer["episodes"]} == {"sub 0", "sub 1", "sub 2"}
    anyio.run(main)


def test_wait_for_that_times_out_returns_what_matched_and_says_so(served: Env) -> None:
    env = served

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/t", MEMORYD_SWARM_ID="slow-swarm") as s:
                only = await write(s, "the only report")
                timed_out = await call(s, "episode_search", swarm_id="slow-swarm", wait_for=2, timeout_s=1)
                already = await call(s, "episode_search", swarm_id="slow-swarm", wait_for=1, timeout_s=20)
                none = await call(s, "episode_search", swarm_id="nobody", wait_for=1, timeout_s=0)
                err = await call_error(s, "episode_search", swarm_id="x", wait_for=1, timeout_s=301)
        assert timed_out["timed_out"] is True
        assert ids(timed_out) == [only["id"]] and timed_out["total"] == 1
        assert already["timed_out"] is False and ids(already) == [only["id"]]
        assert none["timed_out"] is True and none["total"] == 0
        assert err.code == -32602 and err.data["param"] == "timeout_s"
    anyio.run(main)


def test_a_parked_search_does_not_hold_up_other_calls_on_the_same_bridge(served: Env) -> None:
    env = served
    answer: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/one-bridge") as s:
                parked_done = anyio.Event()

                async def parked() -> None:
                    answer.update(await call(s, "episode_search", swarm_id="late", wait_for=1, timeout_s=30))
                    parked_done.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(parked)
                    await wait_for_async(lambda: env.logged("episode_search"), what="the search parking")
                    for i in range(5):  # each answers while the search stays parked
                        with anyio.fail_after(10):
                            written = await write(s, f"meanwhile {i}")
                            handoff = await call(s, "episode_handoff")
                            found = await call(s, "episode_search", ids=[written["id"]])
                        assert found["total"] == 1 and "prior_session_id" in handoff
                        assert not parked_done.is_set()
                    wake = await write(s, "the awaited report", swarm_id="late")
                    with anyio.fail_after(10):
                        await parked_done.wait()
        assert answer["timed_out"] is False
        assert ids(answer) == [wake["id"]]
    anyio.run(main)


# -- a cold start of a store with many sessions --------------------------------------------------

PLANTED_SESSIONS = 600  # over the 500 at which a cold start forks a helper and shares the parse


def _plant_sessions(episodes: Path, now: float) -> list[str]:
    """Session folders made by hand before the log began (untracked), one episode each, in the
    cohort "swarm-cold"; returns their ids."""
    planted = []
    for n in range(PLANTED_SESSIONS):
        session, episode_id = f"sess-{900_000 + n}", str(ULID())
        folder = episodes / session
        folder.mkdir()
        meta = {"schema_version": 1, "id": episode_id, "created": iso_ms(now - 3600 - n), "session_id": session,
                "scopes": [], "takeaway": f"planted {n}", "swarm_id": "swarm-cold", "worktree": "/w/cold"}
        (folder / f"{episode_id}.md").write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\nbody {n}\n")
        planted.append(episode_id)
    (episodes / "sess-900007" / ("01" + "K" * 24 + ".md")).write_text("---\nnot: [closed\n---\nx\n")
    return planted


def test_a_cold_start_of_many_sessions_indexes_every_episode_once(env: Env) -> None:
    """With no state/ and over 500 session folders, the daemon and a forked helper share the
    episode parse (docs/storage.md): through a real bridge every episode is there once, the
    written ones and the planted ones, and the bad file is reported."""
    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/cold", MEMORYD_SWARM_ID="swarm-cold") as s:
                written = [(await write(s, f"written {i}"))["id"] for i in range(2)]
            assert env.memoryd("stop").returncode == 0
            planted = _plant_sessions(env.home / "episodes", time.time())
            for path in (env.home / "state").iterdir():
                if path.name != "pending.json":
                    path.unlink()
            async with env.session(MEMORYD_WORKTREE="/w/cold") as s:  # the bridge starts the daemon
                found = await call(s, "episode_search", swarm_id="swarm-cold", max_results=200,
                                   since="7d", include_bodies=False)
                digest = await call(s, "memory_digest")
                health = await call(s, "memory_health")
        assert found["total"] == len(written) + PLANTED_SESSIONS
        assert digest["counts"]["episodes"] == len(written) + PLANTED_SESSIONS
        shown = ids(found)
        assert len(set(shown)) == len(shown) == 200 and set(shown) <= set(written) | set(planted)
        assert health["bad_files"]["total"] == 1
        assert [e for e in env.events() if e["kind"] == "recovery"][-1]["episodes_untracked"] == PLANTED_SESSIONS
    anyio.run(main)
