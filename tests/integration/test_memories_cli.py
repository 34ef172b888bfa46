"""`memoryd memories|pending|sessions`, run as a user runs them, against a real daemon on a temp
store: tables for people, `--json` for scripts, exit codes 0 ok / 1 refused / 2 usage / 3 down."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness import Env
from memoryd.client.connection import Connection


class Agent:
    """An agent's connection straight to the daemon's wire (what a bridge forwards)."""

    def __init__(self, env: Env, worktree: str = "/w/proj", project: str = "proj") -> None:
        self.conn = Connection({"client": "agent/1", "worktree": worktree, "project": project},
                               endpoint=f"ipc://{env.runtime}/memoryd.sock", autospawn=False)
        self.conn.connect()

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.conn.call("call", {"tool": tool, "arguments": arguments})  # type: ignore[no-any-return]

    def write(self, content: str, **extra: Any) -> dict[str, Any]:
        return self.call("memory_write", content=content, scopes=extra.pop("scopes", ["projects:proj"]), **extra)


@pytest.fixture
def agent(daemon: Env) -> Iterator[Agent]:
    a = Agent(daemon)
    try:
        yield a
    finally:
        a.conn.close()


def as_json(env: Env, *args: str) -> Any:
    result = env.memoryd(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_list_shows_a_table_and_json_and_filters_by_scope_project_category(daemon: Env, agent: Agent) -> None:
    deploy = agent.write("Deploys go through the staging cluster first.")["id"]
    other = agent.write("The billing service retries webhooks three times.", scopes=["projects:billing"],
                        acknowledge_scope_mismatch=True)["id"]  # a project new to the store
    table = daemon.memoryd("memories", "list")
    assert table.returncode == 0, table.stderr
    def short(memory_id: str) -> str:  # tables show short ids, as the hooks do
        return "m" + memory_id[-8:].lower()
    assert "FIRST LINE" in table.stdout and short(deploy) in table.stdout and short(other) in table.stdout
    assert "2 of 2 memories" in table.stdout
    listed = as_json(daemon, "memories", "list", "--project", "billing")
    assert [m["id"] for m in listed["memories"]] == [other]
    assert as_json(daemon, "memories", "list", "--scope", "projects:proj")["total"] == 1
    assert as_json(daemon, "memories", "list", "--category", "handoff")["total"] == 0


def test_search_ranks_across_repos_and_says_staleness(daemon: Env, agent: Agent) -> None:
    hit = agent.write("Deploys go through the staging cluster first.")["id"]
    agent.write("The billing service retries webhooks three times.")
    found = as_json(daemon, "memories", "search", "staging deploy")
    assert found["results"][0]["id"] == hit and found["results"][0]["staleness_verdict"] == "fresh"
    table = daemon.memoryd("memories", "search", "staging deploy")
    assert "m" + hit[-8:].lower() in table.stdout and "fresh" in table.stdout  # its short id
    nothing = as_json(daemon, "memories", "search", "kubernetes", "--project", "proj")
    assert nothing["results"] == []


def test_show_gives_fields_provenance_links_and_history_and_unknown_is_1(daemon: Env, agent: Agent) -> None:
    base = agent.write("Deploys go through the staging cluster first.")["id"]
    linked = agent.write("Staging has its own database replica.", links=[{"type": "extends", "target_id": base}])["id"]
    shown = daemon.memoryd("memories", "show", base)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "(live)" in out and "staleness   fresh" in out and "/w/proj" in out
    assert f"link        {linked} -> extends this" in out and "history" in out and "write (committed)" in out
    data = as_json(daemon, "memories", "show", linked)
    assert data["links"]["outgoing"][0]["target_id"] == base
    assert [e["kind"] for e in data["history"]][:1] == ["write"]
    missing = daemon.memoryd("memories", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert missing.returncode == 1 and "unknown memory" in missing.stderr
    bad = daemon.memoryd("memories", "show", "not-an-id")
    assert bad.returncode == 2 and "'id'" in bad.stderr


def test_rm_then_restore_and_a_restore_that_would_duplicate_is_refused(daemon: Env, agent: Agent) -> None:
    memory = agent.write("Deploys go through the staging cluster first.")["id"]
    removed = daemon.memoryd("memories", "rm", memory, "--reason", "obsolete")
    assert removed.returncode == 0 and f"removed {memory}" in removed.stdout
    assert as_json(daemon, "memories", "list")["total"] == 0
    tombs = as_json(daemon, "memories", "list", "--removed")
    assert tombs["tombstones"][0]["id"] == memory and tombs["tombstones"][0]["reason"] == "obsolete"
    assert "(removed)" in daemon.memoryd("memories", "show", memory).stdout
    assert as_json(daemon, "memories", "restore", memory)["status"] == "restored"
    assert as_json(daemon, "memories", "list")["total"] == 1
    # Removed again, and the same fact written anew: restoring would duplicate it.
    assert daemon.memoryd("memories", "rm", memory).returncode == 0
    agent.write("Deploys go through the staging cluster first.", force=True)
    refused = daemon.memoryd("memories", "restore", memory)
    assert refused.returncode == 1 and "duplicate" in refused.stdout
    never = daemon.memoryd("memories", "restore", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert never.returncode == 1


def test_pending_lists_every_session_and_the_operator_confirms_and_cancels(daemon: Env, agent: Agent) -> None:
    first = agent.write("The user prefers tabs over spaces.", category="user-inference")
    second = agent.write("The user works late at night.", category="user-inference")
    assert first["status"] == second["status"] == "pending"
    listed = daemon.memoryd("pending")
    assert listed.returncode == 0 and first["pending_id"] in listed.stdout and "tabs over spaces" in listed.stdout
    rows = as_json(daemon, "pending")["pending"]
    assert {r["pending_id"] for r in rows} == {first["pending_id"], second["pending_id"]}
    assert rows[0]["session_id"] != "" and rows[0]["content"] == "The user prefers tabs over spaces."
    confirmed = as_json(daemon, "pending", "confirm", first["pending_id"])
    assert confirmed["status"] == "committed" and confirmed["owner_session_id"] == agent.conn.session_id
    assert as_json(daemon, "memories", "show", confirmed["id"])["category"] == "user-inference"
    cancelled = daemon.memoryd("pending", "cancel", second["pending_id"])
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    assert as_json(daemon, "pending")["total"] == 0
    again = daemon.memoryd("pending", "confirm", first["pending_id"])
    assert again.returncode == 1 and "unknown pending" in again.stderr
    assert daemon.memoryd("pending", "confirm").returncode == 2
    kinds = [e for e in daemon.events() if e["kind"] == "operator_resolve"]
    assert [(e["decision"], e["owner"]) for e in kinds] == [("confirm", agent.conn.session_id),
                                                            ("cancel", agent.conn.session_id)]
    assert all(e["session"] != agent.conn.session_id for e in kinds)  # the operator's own session


def test_sessions_show_how_each_ended_and_its_handoff_per_worktree(daemon: Env) -> None:
    here = Agent(daemon, worktree=str(daemon.base))
    session = here.conn.session_id
    here.call("episode_write", body="worked on the deploy script", takeaway="deploy script half done")
    here.call("memory_session_finish", session_id=session, summary="deploy work",
              handoff="Next: finish the rollback step of the deploy script.")
    here.conn.close()
    elsewhere = Agent(daemon, worktree="/w/other")
    elsewhere.call("episode_write", body="elsewhere")
    elsewhere.conn.close()
    table = daemon.memoryd("sessions", str(daemon.base))
    assert table.returncode == 0, table.stderr
    assert session in table.stdout and "finished" in table.stdout and "rollback step" in table.stdout
    assert "/w/other" not in table.stdout
    rows = as_json(daemon, "sessions")["sessions"]
    by_id = {r["session_id"]: r for r in rows}
    assert by_id[session]["ended"] == "finished" and by_id[session]["episodes"] == 1
    assert by_id[session]["handoff"]["text"].startswith("Next: finish the rollback")
    assert elsewhere.conn.session_id in by_id
    assert not any((r["client"] or "").startswith("memoryd-") for r in rows)
    assert not any((r["client"] or "").startswith("memoryd-") for r in as_json(daemon, "sessions", "--all")["sessions"])
    daemon.memoryd("memories", "list")  # a tool call: the CLI's one shared session now exists
    daemon.memoryd("memories", "list")
    everything = as_json(daemon, "sessions", "--all")["sessions"]
    assert [r["client"].split("/")[0] for r in everything if r["client"].startswith("memoryd-")] == ["memoryd-cli"]


def test_every_verb_starts_the_daemon_and_says_3_when_it_cannot_start(env: Env) -> None:
    listed = env.memoryd("memories", "list")  # nothing runs: the verb starts the daemon, as a bridge does
    assert listed.returncode == 0, listed.stderr
    assert env.status() is not None and "0 of 0 memories" in listed.stdout
    assert env.memoryd("stop").returncode == 0
    (env.base / "config.yaml").write_text("episode_ttl_dayz: 3\n")  # a daemon that cannot start
    for args in (["memories", "search", "x"], ["memories", "rm", "01ARZ3NDEKTSV4RRFFQ69G5FAV"],
                 ["memories", "edit", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--content", "x"],
                 ["pending", "confirm", "pending-1"], ["sessions"], ["sync", "status"],
                 ["ui", "--no-open"]):
        result = env.memoryd(*args)
        assert result.returncode == 3, (args, result.stderr)
        assert "could not be started" in result.stderr and "episode_ttl_dayz" in result.stderr, result.stderr
    assert env.status() is None
    assert env.memoryd("memories").returncode == 2
    assert env.memoryd("memories", "frob").returncode == 2


def test_stored_escape_sequences_are_shown_not_sent_to_the_terminal(daemon: Env, agent: Agent) -> None:
    memory = agent.write("Colours \x1b[31mred\x1b[0m and a bell \x07 in a note.")["id"]
    for args in (["memories", "list"], ["memories", "show", memory]):
        out = daemon.memoryd(*args).stdout
        assert "\x1b" not in out and "\x07" not in out and "\\x1b[31mred" in out
    raw = daemon.memoryd("memories", "show", memory, "--json").stdout
    assert "\x1b" not in raw and json.loads(raw)["content"].startswith("Colours \x1b[31m")


def test_the_admin_op_refuses_bad_arguments_with_typed_errors(daemon: Env, agent: Agent) -> None:
    from memoryd.errors import MemorydError

    bad = [({"action": "frob"}, "bad_request"), ({"action": "sessions", "limit": 0}, "invalid_params"),
           ({"action": "sessions", "worktree": ["x"]}, "invalid_params"), ({"action": "history"}, "invalid_params"),
           ({"action": "session", "session_id": "sess-999"}, "unknown_session"),
           ({"action": "resolve", "pending_id": "pending-9", "decision": "maybe"}, "invalid_params"),
           ({"action": "resolve", "pending_id": "pending-9", "decision": "confirm"}, "unknown_pending")]
    for args, kind in bad:
        with pytest.raises(MemorydError) as caught:
            agent.conn.call("admin", args)
        assert caught.value.kind == kind, args
    assert agent.conn.call("admin", {"action": "conflicts"})["total"] == 0
    first = agent.write("Releases are cut every Friday afternoon.")["id"]
    second = agent.write("Releases are cut on Monday mornings only.",
                         links=[{"type": "contradicts", "target_id": first}])["id"]
    found = agent.conn.call("admin", {"action": "conflicts"})["conflicts"]
    assert [(c["id"], c["target_id"]) for c in found] == [(second, first)]
