"""Many bridges (separate processes) writing at once against one daemon: nothing lost or doubled."""

from __future__ import annotations

import json
from typing import Any

import anyio

from harness import Env, RawBridge, call

BRIDGES = 16
WRITES_PER_BRIDGE = 20
WAIT_S = 150


async def read_back(env: Env, wanted: list[str]) -> dict[str, dict[str, Any]]:
    """Every wanted id through episode_search(ids=…), 200 at a time (the cap)."""
    found: dict[str, dict[str, Any]] = {}
    async with env.session(MEMORYD_WORKTREE="/w/reader") as reader:
        for start in range(0, len(wanted), 200):
            chunk = wanted[start:start + 200]
            result = await call(reader, "episode_search", ids=chunk, max_results=200)
            assert result["total"] == len(chunk)
            found.update({e["id"]: e for e in result["episodes"]})
    return found


def test_sixteen_bridges_writing_concurrently_lose_nothing_and_share_no_ids(served: Env) -> None:
    env = served
    acks: list[tuple[int, dict[str, Any], str]] = []

    async def agent(n: int, ready: anyio.Event, go: anyio.Event, started: list[int]) -> None:
        async with env.session(MEMORYD_WORKTREE=f"/w/agent{n}") as s:
            started.append(n)
            if len(started) == BRIDGES:
                ready.set()
            await go.wait()  # all bridges are up: the writes really overlap
            for i in range(WRITES_PER_BRIDGE):
                body = f"agent {n} write {i}"
                result = await call(s, "episode_write", body=body, takeaway=f"a{n}w{i}",
                                    scopes=[f"agent-{n}"])
                assert result["status"] == "committed"
                acks.append((n, result, body))

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            ready, go, started = anyio.Event(), anyio.Event(), []
            async with anyio.create_task_group() as tg:
                for n in range(BRIDGES):
                    tg.start_soon(agent, n, ready, go, started)
                await ready.wait()
                go.set()
            assert len(acks) == BRIDGES * WRITES_PER_BRIDGE
            found = await read_back(env, [r["id"] for _, r, _ in acks])
        for n, result, body in acks:
            row = found[result["id"]]
            assert row["body"] == body and row["session_id"] == result["session_id"]
            assert row["worktree"] == f"/w/agent{n}" and row["provenance"] == "local"
            assert (env.home / "episodes" / result["session_id"] / f"{result['id']}.md").is_file()

    anyio.run(main)
    episode_ids = [r["id"] for _, r, _ in acks]
    assert len(set(episode_ids)) == len(episode_ids), "an id was handed out twice"
    sessions_by_agent: dict[int, set[str]] = {}
    for n, result, _ in acks:
        sessions_by_agent.setdefault(n, set()).add(result["session_id"])
    assert all(len(s) == 1 for s in sessions_by_agent.values())
    all_sessions = [next(iter(s)) for s in sessions_by_agent.values()]
    assert len(set(all_sessions)) == BRIDGES, "two bridges were given the same session"
    logged = [e["episode_id"] for e in env.events() if e["kind"] == "episode_write"]
    assert sorted(logged) == sorted(episode_ids), "the log and the acknowledgements disagree"
    on_disk = {p.stem for p in (env.home / "episodes").rglob("*.md")}
    assert on_disk == set(episode_ids)
    verify = env.memoryd("log", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_one_bridge_with_many_calls_in_flight_answers_each_caller_with_its_own_reply(served: Env) -> None:
    env = served
    replies: dict[int, dict[str, Any]] = {}

    async def main() -> None:
        with anyio.fail_after(WAIT_S):
            async with env.session(MEMORYD_WORKTREE="/w/busy") as s:
                # The SDK lists tools before validating its first result; listing them up front
                # keeps this test about calls (tools/list among calls has its own test below).
                await s.list_tools()

                async def one(i: int) -> None:
                    replies[i] = await call(s, "episode_write", body=f"in flight {i}", takeaway=f"t{i}")

                async with anyio.create_task_group() as tg:
                    for i in range(60):
                        tg.start_soon(one, i)
                found = await call(s, "episode_search", ids=[r["id"] for r in replies.values()],
                                   max_results=200)
        rows = {e["id"]: e for e in found["episodes"]}
        assert len(replies) == 60 and len(rows) == 60
        for i, reply in replies.items():
            assert reply["takeaway"] == f"t{i}"  # matched to its own request, not a neighbour's
            assert rows[reply["id"]]["body"] == f"in flight {i}"
        assert len({r["session_id"] for r in replies.values()}) == 1

    anyio.run(main)


def test_a_tools_list_among_calls_in_flight_does_not_lose_their_replies(served: Env) -> None:
    env = served
    bridge = RawBridge(env, MEMORYD_WORKTREE="/w/list")
    bridge.initialize()
    burst = [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "episode_write", "arguments": {"body": f"call {i}"}}} for i in range(30)]
    burst.append({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
    bridge.send_line(b"\n".join(json.dumps(m).encode() for m in burst))  # one write: they arrive together
    answered = {bridge.reply(timeout_s=30)["id"] for _ in burst}
    assert answered == {m["id"] for m in burst}
    bridge.close()
    events = env.events()
    # Every answer came on the first try: the bridge never had to give up, reconnect and resend.
    assert [e for e in events if e["kind"] == "session_attach"] == []
