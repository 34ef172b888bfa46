"""A cold start defers the live text index past its first reply (memories/index.LiveIndex.defer_text):
whatever reads or changes the index first builds it whole, so an answer never comes from half an
index, and changes made before the build land on the whole index."""

from __future__ import annotations

from memoryd.daemon.memories.index import LiveIndex
from memoryd.daemon.memories.records import Memory


def memory(memory_id: str, content: str) -> Memory:
    return Memory(id=memory_id, content=content, scopes=("topic:x",), category="fact", confidence="high",
                  source="agent", created="2026-01-01T00:00:00.000Z", updated="2026-01-01T00:00:00.000Z",
                  session_id="sess-1", origin={})


LOADED = [memory("01J0000000000000000000000A", "the deploy script pushes to staging first"),
          memory("01J0000000000000000000000B", "postgres migrations run before the web workers"),
          memory("01J0000000000000000000000C", "the cache is warmed by a cron job at night")]


def test_a_deferred_index_answers_like_one_built_at_start() -> None:
    eager, deferred = LiveIndex(), LiveIndex()
    eager.build_text(LOADED)
    deferred.defer_text(list(LOADED))
    assert deferred.text_pending
    for query in ("deploy staging", "migrations postgres", "cron cache night"):
        assert deferred.text.matching(query) == eager.text.matching(query)
    assert not deferred.text_pending and len(deferred.text) == 3


def test_changes_before_the_build_land_on_the_whole_index() -> None:
    deferred = LiveIndex()
    deferred.defer_text(list(LOADED))
    added = memory("01J0000000000000000000000D", "staging deploys need a green build")
    deferred.add_text(added)
    deferred.remove(LOADED[0])
    assert not deferred.text_pending
    assert deferred.text.matching("deploy staging") == {added.id}
    assert deferred.text.matching("migrations") == {LOADED[1].id}
    assert len(deferred.text) == 3


def test_finish_builds_once_and_a_restored_index_replaces_a_deferred_one() -> None:
    deferred = LiveIndex()
    deferred.defer_text(list(LOADED))
    deferred.finish_text()
    first = deferred.text
    deferred.finish_text()
    assert deferred.text is first
    restored = LiveIndex()
    restored.defer_text(list(LOADED))
    restored.text = first
    assert not restored.text_pending and restored.text is first
