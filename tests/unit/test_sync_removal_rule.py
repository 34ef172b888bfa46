"""When a pulled tombstone may take the place of this machine's live memory (`admission.buries`):
the version both had, removed; or a newer removal of an edit made here, once that edit is kept in
the shared tree as a conflict. Anything else would put someone else's text in the memory's name."""

from __future__ import annotations

from dataclasses import replace

from memoryd.daemon.memories.records import Memory
from memoryd.daemon.sync.admission import buries

ID = "01JAAAAAAAAAAAAAAAAAAAAAAA"
AGREED = Memory(id=ID, content="Staging runs Postgres 15 on port 5433.", scopes=("projects:x",), category="fact",
                confidence="medium", source="explicit-statement", created="2026-01-01T00:00:00.000Z",
                updated="2026-01-01T00:00:00.000Z", session_id="sess-1", origin={})
EDITED = replace(AGREED, content="Staging runs Postgres 17 on port 5435.", updated="2026-01-02T00:00:00.000Z")
EDITED_SHA = "e" * 64


def removed(memory: Memory, at: str) -> Memory:
    return replace(memory, removed_at=at, removed_reason="obsolete")


def test_the_version_both_had_removed_is_taken_and_a_live_version_always() -> None:
    assert buries("tomb", removed(AGREED, "2026-01-03T00:00:00.000Z"), AGREED, "a" * 64, ())
    assert buries("live", EDITED, AGREED, "a" * 64, ())
    assert buries("tomb", removed(AGREED, "2026-01-03T00:00:00.000Z"), None, None, ())  # nothing live here


def test_a_newer_removal_of_an_edit_kept_as_a_conflict_is_taken() -> None:
    newer = removed(AGREED, "2026-01-03T00:00:00.000Z")
    assert buries("tomb", newer, EDITED, EDITED_SHA, [EDITED_SHA])
    assert buries("tomb", removed(AGREED, EDITED.updated), EDITED, EDITED_SHA, [EDITED_SHA])  # a tie


def test_other_text_is_refused_without_the_edit_kept_or_when_the_removal_is_older() -> None:
    newer = removed(AGREED, "2026-01-03T00:00:00.000Z")
    assert not buries("tomb", newer, EDITED, EDITED_SHA, ())  # the edit would be lost
    assert not buries("tomb", newer, EDITED, EDITED_SHA, ["f" * 64])  # another version kept, not this one
    older = removed(AGREED, "2026-01-01T12:00:00.000Z")
    assert not buries("tomb", older, EDITED, EDITED_SHA, [EDITED_SHA])
    assert not buries("tomb", removed(AGREED, "not a stamp"), EDITED, EDITED_SHA, [EDITED_SHA])
