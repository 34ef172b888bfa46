"""Fast tests of the durable tier's pure rules: gate-chain order and overrides, staleness verdicts,
cursors, snippets, record files, argument rules, indexes — and the pending TTL with an injected
clock on an in-process core (no daemon, no sleeping)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from memoryd.config import Config
from memoryd.daemon.core import Core
from memoryd.daemon.memories.args import (
    check_links,
    check_scope_list,
    check_verified,
    check_write_scopes,
)
from memoryd.daemon.memories.chain import GATES, Draft, Gate, run_gates
from memoryd.daemon.memories.index import LiveIndex, TombIndex, project_scope_name
from memoryd.daemon.memories.reads import decode_cursor, encode_cursor, hit_content
from memoryd.daemon.memories.records import (
    Memory,
    PendingWrite,
    decode_pending,
    encode_pending,
    from_meta,
    render_memory,
)
from memoryd.daemon.memories.staleness import (
    FRESH,
    RECOMMENDED,
    REQUIRED,
    GitProbe,
    resolve_cited,
    verdict,
)
from memoryd.daemon.memories.tier import attach
from memoryd.daemon.search import SearchIndex
from memoryd.daemon.storage import frontmatter
from memoryd.errors import InvalidParams, ResourceState
from token_sets import token_set

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def memory(memory_id: str = "01J0000000000000000000000A", content: str = "A durable fact.", **extra: Any) -> Memory:
    fields: dict[str, Any] = {
        "id": memory_id, "content": content, "scopes": ("projects:memoryd",), "category": "fact",
        "confidence": "medium", "source": "explicit-statement", "created": "2026-01-01T00:00:00.000Z",
        "updated": "2026-01-01T00:00:00.000Z", "session_id": "sess-1",
        "origin": {"worktree": "/w/a", "repo": "/w/a", "project": "memoryd", "branch": None, "commit": None,
                   "client": None},
    }
    fields.update(extra)
    return Memory(**fields)


class FakeTier:
    """The TierView the gates read, over plain dicts and real indexes."""

    def __init__(self, live: list[Memory] = (), removed: list[Memory] = (),  # type: ignore[assignment]
                 projects: dict[str, str | None] | None = None) -> None:
        self.live = {m.id: m for m in live}
        self.tombstones = {m.id: m for m in removed}
        self.projects = projects or {}
        self._live, self._tomb = SearchIndex(), SearchIndex()
        for m in live:
            self._live.add(m.id, m.content, m.scopes, m.updated)
        for m in removed:
            self._tomb.add(m.id, m.content, m.scopes, m.removed_at or "")

    def known_projects(self) -> dict[str, str | None]:
        return self.projects

    def similar_live(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        return self._live.similar(tokens, threshold)

    def similar_removed(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]:
        return self._tomb.similar(tokens, threshold)


def status(tier: FakeTier, content: str, **flags: bool) -> str | None:
    fired = run_gates(tier, Draft(content=content, scopes=["projects:memoryd"], flags=flags))  # type: ignore[arg-type]
    return fired[1]["status"] if fired else None


# -- the gate chain ------------------------------------------------------------------------------

def test_the_chain_runs_in_the_documented_order() -> None:
    assert [g.kind for g in GATES] == ["credential", "durability", "scope_mismatch", "groundedness", "duplicate",
                                       "previously_removed"]
    assert [g.override for g in GATES] == ["acknowledge_credential", "acknowledge_transient",
                                           "acknowledge_scope_mismatch", "acknowledge_ungrounded", "force", "force"]


def test_the_first_firing_gate_decides_and_an_override_skips_only_its_gate() -> None:
    calls: list[str] = []

    def gate(name: str, fires: bool) -> Gate:
        def check(tier: Any, draft: Draft) -> dict[str, Any] | None:
            calls.append(name)
            return {"evidence": name} if fires else None
        return Gate(name, f"{name}_status", f"skip_{name}", check, f"hint {name}")

    chain = [gate("a", False), gate("b", True), gate("c", True)]
    gate_b, result = run_gates(FakeTier(), Draft(content="x", scopes=[]), chain)  # type: ignore[misc,arg-type]
    assert gate_b.kind == "b" and result == {"status": "b_status", "evidence": "b", "hint": "hint b"}
    assert calls == ["a", "b"]
    fired = run_gates(FakeTier(), Draft(content="x", scopes=[], flags={"skip_b": True}), chain)  # type: ignore[arg-type]
    assert fired is not None and fired[0].kind == "c"
    assert run_gates(FakeTier(), Draft(content="x", scopes=[], flags={"skip_b": True, "skip_c": True}), chain) is None  # type: ignore[arg-type]


def test_a_secret_that_is_also_transient_is_a_credential_warning() -> None:
    text = f"We currently deploy with {SECRET} today."
    assert status(FakeTier(), text) == "credential_warning"
    assert status(FakeTier(), text, acknowledge_credential=True) == "transient_warning"
    assert status(FakeTier(), text, acknowledge_credential=True, acknowledge_transient=True) is None


def test_scope_mismatch_needs_a_known_project_the_scopes_do_not_cover() -> None:
    tier = FakeTier(projects={"webshop": "/src/webshop", "memoryd": None})
    assert status(tier, "The webshop cart uses Redis sessions.") == "scope_mismatch"
    assert status(tier, "The memoryd daemon uses Redis nowhere.") is None  # covered by the scopes
    assert status(tier, "Config lives in /src/webshop/conf/app.yaml for deploys.") == "scope_mismatch"


def test_duplicate_fires_before_previously_removed_and_force_skips_both() -> None:
    live = memory(content="The cache TTL for rendered pages is ten minutes.")
    gone = memory("01J0000000000000000000000B", "The cache TTL for rendered pages is ten minutes.",
                  removed_at="2026-01-02T00:00:00.000Z", removed_reason="wrong")
    assert status(FakeTier([live], [gone]), live.content) == "duplicate"
    assert status(FakeTier([], [gone]), live.content) == "previously_removed"
    assert status(FakeTier([live], [gone]), live.content, force=True) is None


def test_groundedness_runs_only_when_asked_and_given_a_transcript() -> None:
    claim = "Postgres replicas lag behind primaries during nightly vacuum jobs."
    asked = Draft(content=claim, scopes=["db"], flags={"groundedness_check": True}, transcript="we talked about css")
    fired = run_gates(FakeTier(), asked)  # type: ignore[arg-type]
    assert fired is not None and fired[1]["status"] == "ungrounded"
    assert run_gates(FakeTier(), Draft(content=claim, scopes=["db"], transcript="css")) is None  # type: ignore[arg-type]


def test_draft_similarity_is_computed_once_and_survives_a_round_trip() -> None:
    draft = Draft(content="alpha beta gamma", scopes=["x"], flags={"force": True}, transcript="t")
    assert draft.tokens == token_set("alpha beta gamma")
    again = Draft(**draft.to_dict())
    assert again.to_dict() == draft.to_dict() and again.overrides() == ["force"]


# -- staleness ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("days", "missing", "commits", "expected"), [
    (0, 0, 0, FRESH), (29.9, 0, 19, FRESH), (30, 0, 0, RECOMMENDED), (1, 0, 20, RECOMMENDED),
    (59, 0, 0, RECOMMENDED), (60, 0, 0, REQUIRED), (0, 1, 0, REQUIRED), (0, 0, 200, REQUIRED),
])
def test_staleness_verdict_from_its_three_signals(days: float, missing: int, commits: int, expected: str) -> None:
    assert verdict(days, missing, commits, stale_days=30) == expected


def test_cited_paths_resolve_only_inside_the_worktree() -> None:
    assert resolve_cited("src/app.py", "/w/a") == "/w/a/src/app.py"
    assert resolve_cited("./src/app.py", "/w/a/") == "/w/a/src/app.py"
    assert resolve_cited("/w/a/docs/x.md", "/w/a") == "/w/a/docs/x.md"
    for outside in ("/w/ab/x.py", "/etc/passwd", "../x/y.py", "a/../../y.py", "~/notes/x.md"):
        assert resolve_cited(outside, "/w/a") is None, outside


def test_git_probe_counts_commits_since_a_time_and_reads_head(tmp_path: Path) -> None:
    def git(*args: str, date: str = "2030-01-01T00:00:00Z") -> None:
        env = {"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date, "PATH": "/usr/bin:/bin"}
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=tmp_path, env=env,
                       check=True, capture_output=True)
    git("init", "-q", "-b", "trunk")
    for day in ("2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z", "2030-01-03T00:00:00Z"):
        git("commit", "-q", "--allow-empty", "-m", day, date=day)
    probe = GitProbe()
    assert probe.commits_since(str(tmp_path), 1893456000.0) == 2  # strictly after 2030-01-01T00:00:00Z
    branch, commit = probe.head(str(tmp_path))
    assert branch == "trunk" and commit is not None and len(commit) == 40
    assert probe.head("/no/such/dir") == (None, None) and probe.commits_since("/no/such/dir", 0) == 0


# -- cursors, snippets ----------------------------------------------------------------------------

def test_cursors_round_trip_and_foreign_cursors_are_invalid_params() -> None:
    cursor = encode_cursor("m", ["01J0000000000000000000000A"])
    assert decode_cursor("m", cursor) == ["01J0000000000000000000000A"] and decode_cursor("m", None) is None
    for bad in (encode_cursor("t", ["a", "b"]), "!!!", "bm90LWpzb24", "W10"):
        with pytest.raises(InvalidParams) as err:
            decode_cursor("m", bad)
        assert err.value.data["param"] == "cursor"


def test_long_content_becomes_a_window_around_the_first_query_term() -> None:
    assert hit_content("short", ["x"]) == ("short", False)
    text = "a" * 3000 + " needle " + "b" * 3000
    snippet, cut = hit_content(text, ["needle"])
    assert cut and "needle" in snippet and snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= 1002


# -- record files ----------------------------------------------------------------------------------

def test_a_memory_file_round_trips_through_render_and_parse() -> None:
    original = memory(links=({"type": "extends", "target_id": "01J0000000000000000000000B"},), tainted=True,
                      taint=("role-prefix",), last_verified_at="2026-02-01T00:00:00.000Z", verified_paths=("a/b.py",))
    meta, body = frontmatter.parse(render_memory(original))
    assert from_meta(meta, body, original.id) == original


def test_a_hand_written_file_with_bare_yaml_timestamps_still_loads() -> None:
    data = (b"---\nid: 01J0000000000000000000000A\ncreated: 2026-11-30T07:02:31.575Z\n"
            b"updated: 2026-11-30T07:02:31.575Z\ncategory: fact\nconfidence: high\nsource: inferred\n"
            b"scopes: [infra]\n---\nBody text\n")
    loaded = from_meta(*frontmatter.parse(data), "01J0000000000000000000000A")
    assert loaded.created == "2026-11-30T07:02:31.575Z" and loaded.content == "Body text\n"


def test_a_file_whose_id_does_not_match_its_name_is_rejected() -> None:
    meta, body = frontmatter.parse(render_memory(memory()))
    with pytest.raises(ValueError):
        from_meta(meta, body, "01J0000000000000000000000Z")


def test_pending_snapshot_round_trips_and_a_damaged_one_reads_as_empty() -> None:
    row = PendingWrite(id="pending-3", session_id="sess-2", preview="p", created="c", expires_at=12.5,
                       source_episode_id=None, reason="r", draft={"content": "x", "scopes": ["a"]}, origin={})
    assert decode_pending(encode_pending([row])) == [row]
    assert decode_pending(b"{not json") == [] and decode_pending(b'{"pending": [{"id": 1}]}') == []


# -- argument rules --------------------------------------------------------------------------------

def test_scope_and_link_and_verification_rules() -> None:
    assert check_scope_list("scopes", ["a", "b:c", "a"]) == ["a", "b:c"]
    for bad in (["A"], ["a b"], ["a::b"], ["x" * 129]):
        with pytest.raises(InvalidParams):
            check_scope_list("scopes", bad)
    with pytest.raises(InvalidParams):
        check_write_scopes([], cap=64)
    target = "01J0000000000000000000000A"
    live = {target: object()}
    extends = {"type": "extends", "target_id": target}
    assert check_links(live, [extends] * 2) == [extends]
    with pytest.raises(InvalidParams):
        check_links(live, [{"type": "extends", "target_id": target}], self_id=target)
    with pytest.raises(InvalidParams):
        check_verified(None, ["XYZ"])
    assert check_verified(["a.py"], ["abc1234"]) == (("a.py",), ("abc1234",))


# -- indexes ----------------------------------------------------------------------------------------

def test_live_index_pages_newest_first_and_learns_projects_and_backlinks() -> None:
    index = LiveIndex()
    a = memory("01J000000000000000000000AA")
    b = memory("01J000000000000000000000BB", scopes=("projects:web:ui",),
               links=[{"type": "extends", "target_id": "01J000000000000000000000AA"}])
    index.add(b)
    index.add(a)
    assert list(index.ids_descending()) == [b.id, a.id] and list(index.ids_descending(b.id)) == [a.id]
    assert index.projects == {"memoryd": "/w/a", "web": None}
    assert index.backlinks[a.id] == {b.id: "extends"}
    index.remove(b)
    assert list(index.ids_descending()) == [a.id] and index.backlinks[a.id] == {}
    assert project_scope_name("projects:web:ui") == "web" and project_scope_name("infra") is None


def test_tomb_index_orders_by_removal_time() -> None:
    index = TombIndex()
    first = memory("01J000000000000000000000BB", removed_at="2026-01-01T00:00:00.000Z")
    second = memory("01J000000000000000000000AA", removed_at="2026-01-02T00:00:00.000Z")
    index.add(first)
    index.add(second)
    keys = list(index.keys_descending())
    assert [k[1] for k in keys] == [second.id, first.id]
    assert [k[1] for k in index.keys_descending(keys[0])] == [first.id]


# -- the pending TTL with an injected clock --------------------------------------------------------------

def test_pending_ttl_expires_with_an_injected_clock_and_keeps_expired_ids_known(tmp_path: Path) -> None:
    clock = [1_000_000.0]
    core = Core(tmp_path, Config(pending_ttl_seconds=60), clock=lambda: clock[0])
    tier = attach(core)
    core.open()
    session = core.start_session({"worktree": "/w/a"}, "conn-1")
    pending = PendingWrite(id=tier.next_pending_id(), session_id=session.id, preview="p", created=core.now(),
                           expires_at=clock[0] + 60, source_episode_id=None, reason="user-inference",
                           draft={"content": "The user likes tea.", "scopes": ["user"]}, origin={})
    tier.stage(pending)
    core.record("write", session, status="pending", gate="pending", pending_id=pending.id)
    assert tier.next_pending_expiry() == clock[0] + 60
    assert tier.pending_pass(clock[0] + 59) == []
    assert tier.owned_pending(pending.id, session) is pending
    clock[0] += 61
    with pytest.raises(ResourceState) as err:
        tier.owned_pending(pending.id, session)
    assert err.value.kind == "expired_pending"
    assert tier.pending_pass(clock[0]) == [pending.id] and tier.pending == {}
    with pytest.raises(ResourceState) as err:
        tier.owned_pending(pending.id, session)
    assert err.value.kind == "expired_pending" and tier.pending_expired_total == 1
    assert tier.next_pending_id() == "pending-2"
    core.sync()
    core.log.close()
