"""The session table's latest identity per worktree (what memory_write's project-scope check asks,
memories/projects.py) is kept as sessions start, act and reopen, and always equals what walking
every worktree's latest session gives."""

from __future__ import annotations

from typing import Any

from memoryd.daemon.identity.session_table import SessionTable


def walked(table: SessionTable) -> dict[str, tuple[Any, Any]]:
    out = {}
    for worktree, ids in table.by_worktree.items():
        latest = table.get(next(reversed(ids))) if worktree and ids else None
        if worktree and latest is not None:
            out[worktree] = (latest.repo, latest.project)
    return out


def start(table: SessionTable, n: int, worktree: str | None, repo: str, project: str, client: str = "cc") -> None:
    table.add({"session": f"sess-{n}", "worktree": worktree, "repo": repo, "project": project,
               "client": client, "ts": f"2026-01-01T00:00:{n:02d}.000Z"})


def test_latest_identities_follow_starts_touches_and_reopens_and_derived_views_are_dropped() -> None:
    table = SessionTable()
    start(table, 1, "/w/a", "/w/a", "a")
    start(table, 2, "/w/b", "/w/b", "b")
    assert table.latest_identities() == walked(table) == {"/w/a": ("/w/a", "a"), "/w/b": ("/w/b", "b")}
    table.derived["view"] = 1
    start(table, 3, "/w/a", "/w/a", "a")  # same identity: what was derived stands
    assert table.derived == {"view": 1}
    start(table, 4, "/w/a", "/w/other", "renamed")  # the worktree's latest now names another repo
    assert table.latest_identities() == walked(table) and table.derived == {}
    table.derived["view"] = 2
    first = table.get("sess-1")
    assert first is not None
    table.touch(first, "2026-01-01T00:01:00.000Z")  # the older session acts: it is the latest again
    assert table.latest_identities() == walked(table) and table.latest_identities()["/w/a"] == ("/w/a", "a")
    assert table.derived == {}
    fourth = table.get("sess-4")
    assert fourth is not None
    table.end(fourth, "closed", "2026-01-01T00:02:00.000Z")
    table.reopen(fourth, "2026-01-01T00:03:00.000Z")
    assert table.latest_identities() == walked(table) and table.latest_identities()["/w/a"] == ("/w/other", "renamed")
    start(table, 5, None, "", "", client="cc")  # no worktree: not a project's
    start(table, 6, "/w/c", "/w/c", "c", client="memoryd-cli/1")  # an operator: in no walk
    assert table.latest_identities() == walked(table)
    assert "/w/c" not in table.latest_identities()
