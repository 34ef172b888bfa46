"""The import parsers on fixtures the real tools wrote (tests/fixtures/import/README.md): what each
format maps to, and bad input refused with a typed error naming the file and line. No daemon."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memoryd import importers
from memoryd.errors import BadImportInput, MemorydError
from memoryd.importers import markdown

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "import"
BETTERMEMORY = FIXTURES / "bettermemory" / "store"
GRAPH = FIXTURES / "server-memory" / "memory.jsonl"
NOTES = FIXTURES / "markdown"


def by_origin(drafts: list[importers.Draft]) -> dict[str, importers.Draft]:
    return {d.origin: d for d in drafts}


# -- bettermemory ---------------------------------------------------------------------------------

def test_bettermemory_store_maps_every_memory_and_the_tombstone() -> None:
    drafts = by_origin(importers.read("bettermemory", BETTERMEMORY))
    assert len(drafts) == 6
    deploy = drafts["bettermemory:01M8QDMSFPQ15TTMKB9TXMDBZX"]
    assert deploy.content.startswith("Deploys of the web app go through the staging cluster first")
    assert deploy.scopes == ("projects:webapp", "import:bettermemory")
    assert (deploy.category, deploy.confidence, deploy.source) == ("fact", "high", "explicit-statement")
    assert deploy.verified_at == "2026-11-30T23:46:34.911Z" and deploy.removed_reason is None
    pytest_note = drafts["bettermemory:01M8QDMSK9276V277FEPBCT8PH"]
    assert pytest_note.scopes == ("projects:billing", "tools:pytest", "import:bettermemory")
    assert (pytest_note.source, pytest_note.verified_at) == ("inferred", None)
    assert drafts["bettermemory:01M8QDMSM6E0WA9GZGQ9ZH2NZQ"].category == "user-inference"
    assert drafts["bettermemory:01M8QDMSNBKAHCRFA8SV8VDJN5"].category == "ambient"
    assert drafts["bettermemory:01M8QDMSPMF9H4FBAP86CVZWEM"].source == "user-correction"
    removed = drafts["bettermemory:01M8QDMSR2XN5B6QR1HGWNQN6M"]
    assert removed.removed_reason == ("removed in bettermemory on 2026-11-30: the batch host was decommissioned; "
                                      "the index rebuild moved to the queue worker")


def test_bettermemory_drafts_come_oldest_first_and_ignore_caches_and_logs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(BETTERMEMORY, store)
    (store / ".index.sqlite").write_bytes(b"SQLite format 3\x00")
    (store / ".events.15.jsonl").write_text('{"kind": "write"}\n')
    (store / "notes.md.lock").write_text("")
    (store / "episodes" / "sess_1").mkdir(parents=True)
    (store / "episodes" / "sess_1" / "01M8QDMSFPQ15TTMKB9TXMDBZA.md").write_text("---\nid: x\n---\nrun state\n")
    drafts = importers.read("bettermemory", store)
    assert [d.origin for d in drafts] == [d.origin for d in importers.read("bettermemory", BETTERMEMORY)]
    assert drafts[0].origin.endswith("01M8QDMSFPQ15TTMKB9TXMDBZX")  # the first one written


def test_bettermemory_skips_the_files_it_quarantined_itself(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(BETTERMEMORY, store)
    pulled = "2026-11-30-pulled-01m8qdmsfpq15ttmkb9txmdbzb.md"
    (store / pulled).write_text("not even frontmatter")
    (store / ".quarantine.json").write_text(json.dumps({"version": 1, "files": {pulled: {"reason": "unparseable"}}}))
    assert len(importers.read("bettermemory", store)) == 6


def test_bettermemory_extra_scope_is_added_to_every_draft() -> None:
    drafts = importers.read("bettermemory", BETTERMEMORY, ["projects:legacy"])
    assert all(d.scopes[-1] == "projects:legacy" for d in drafts)


def _store_with(tmp_path: Path, text: str) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    (store / "2026-01-01-broken-01m8qdmsfpq15ttmkb9txmdbzx.md").write_text(text)
    return store


def test_bettermemory_bad_frontmatter_names_the_file_and_line(tmp_path: Path) -> None:
    store = _store_with(tmp_path, "---\nid: 01M8QDMSFPQ15TTMKB9TXMDBZX\nscopes: [projects:x\n---\n\nbody\n")
    with pytest.raises(BadImportInput) as caught:
        importers.read("bettermemory", store)
    assert caught.value.path.endswith("broken-01m8qdmsfpq15ttmkb9txmdbzx.md")
    assert caught.value.line == 4 and "not YAML" in caught.value.message
    assert isinstance(caught.value, MemorydError) and caught.value.data["line"] == 4


@pytest.mark.parametrize(("text", "line", "words"), [
    ("no frontmatter here\n", 1, "no YAML frontmatter"),
    ("---\nid: X\n", 1, "no closing"),
    ("---\nid: X\ncategory: opinion\n---\nbody\n", 3, "category 'opinion'"),
    ("---\nid: X\nscopes:\n- Not A Scope\n---\nbody\n", 3, "not a list of scopes"),
    ("---\nid: X\nschema_version: 2\n---\nbody\n", 3, "schema_version 2 is newer"),
    ("---\nscopes: []\n---\nbody\n", 2, "no 'id'"),
])
def test_bettermemory_wrong_shapes_are_refused_by_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    with pytest.raises(BadImportInput) as caught:
        importers.read("bettermemory", _store_with(tmp_path, text))
    assert caught.value.line == line and words in caught.value.message


def test_a_folder_without_memories_is_not_a_bettermemory_store(tmp_path: Path) -> None:
    with pytest.raises(BadImportInput, match="no bettermemory memory files"):
        importers.read("bettermemory", tmp_path)


# -- server-memory --------------------------------------------------------------------------------

def test_server_memory_graph_is_one_memory_per_entity_with_relations_both_ways() -> None:
    drafts = by_origin(importers.read("server-memory", GRAPH))
    assert list(drafts) == [f"memory.jsonl:{n}" for n in range(1, 6)]
    api = drafts["memory.jsonl:2"]
    assert api.content.splitlines() == [
        "payments-api (service)",
        "- Written in Go 1.22",
        "- Deployed to the eu-west-1 Kubernetes cluster",
        "- Its integration tests need a local Postgres 16 on port 5433",
        "- Releases are cut every other Tuesday",
        "Relations:",
        "- Alice Martin owns payments-api",
        "- payments-api stores data in Postgres",
    ]
    assert api.scopes == ("entities:payments-api", "import:server-memory")
    assert (api.category, api.confidence, api.source) == ("fact", "medium", "inferred")
    assert drafts["memory.jsonl:1"].scopes[0] == "entities:alice-martin"
    user = drafts["memory.jsonl:5"]
    assert user.category == "user-inference" and "Lisbon" in user.content
    assert "default_user reports to Alice Martin" in user.content


def test_server_memory_reads_a_folder_the_legacy_name_and_read_graph_output(tmp_path: Path) -> None:
    shutil.copy(GRAPH, tmp_path / "memory.json")
    assert len(importers.read("server-memory", tmp_path)) == 5
    graph = ('{"entities": [{"name": "CI", "entityType": "system", "observations": ["Runs on every push"]}], '
             '"relations": []}')
    (tmp_path / "graph.json").write_text(graph)
    [ci] = importers.read("server-memory", tmp_path / "graph.json")
    assert ci.content == "CI (system)\n- Runs on every push" and ci.scopes[0] == "entities:ci"


def test_server_memory_merges_repeated_entities_and_skips_empty_ones(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text('{"type":"entity","name":"Redis","entityType":"cache","observations":["Port 6380"]}\n'
                    '{"type":"entity","name":"Redis","entityType":"cache","observations":["Port 6380","No AOF"]}\n'
                    '{"type":"entity","name":"Lonely","entityType":"thing","observations":[]}\n'
                    '{"type":"entity","name":"東京","entityType":"city","observations":["Office"]}\n')
    drafts = importers.read("server-memory", path)
    assert [d.content.splitlines()[0] for d in drafts] == ["Redis (cache)", "東京 (city)"]
    assert drafts[0].content.count("Port 6380") == 1 and "No AOF" in drafts[0].content
    assert drafts[1].scopes[0].startswith("entities:e-")  # no a-z0-9 letters: a hash, still a valid scope


@pytest.mark.parametrize(("lines", "line", "words"), [
    ('{"type":"entity","name":"A","observations":[]}\nnot json\n', 2, "not a JSON object"),
    ('[1, 2]\n', 1, "not a JSON object"),
    ('{"type":"entity","observations":["x"]}\n', 1, "without a name"),
    ('{"type":"entity","name":"A","observations":"x"}\n', 1, "observations a list"),
    ('\n\n{"type":"relation","from":"A","to":""}\n', 3, "needs from, to and relationType"),
    ('{"type":"note","text":"x"}\n', 1, "neither 'entity' nor 'relation'"),
])
def test_server_memory_bad_lines_are_named(tmp_path: Path, lines: str, line: int, words: str) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text(lines)
    with pytest.raises(BadImportInput) as caught:
        importers.read("server-memory", path)
    assert (caught.value.path, caught.value.line) == (str(path), line) and words in caught.value.message


# -- markdown -------------------------------------------------------------------------------------

def test_claude_md_is_one_memory_per_bullet_and_per_section_of_prose() -> None:
    drafts = by_origin(importers.read("markdown", NOTES / "CLAUDE.md"))
    assert len(drafts) == 10
    assert drafts["CLAUDE.md:3"].content.startswith("This file gives Claude Code guidance")  # no context
    assert drafts["CLAUDE.md:7"].content == ("Build and test: Install with `uv sync --all-extras`; the lock file "
                                             "is the source of truth, never edit it by hand.")
    architecture = drafts["CLAUDE.md:13"].content
    assert architecture.startswith("Architecture: The service is a FastAPI app")
    assert "eventually consistent" in architecture  # both paragraphs, one memory
    assert drafts["CLAUDE.md:22"].content.startswith("Architecture › Database: Migrations live in")
    flags = drafts["CLAUDE.md:29"].content
    assert flags.startswith("Conventions: Feature flags") and flags.endswith("takes up to half a minute to apply.")
    assert all(d.scopes == ("import:markdown",) and d.category == "fact" for d in drafts.values())
    assert all(d.source == "explicit-statement" for d in drafts.values())


def test_a_notes_folder_keeps_real_titles_as_context_and_skips_frontmatter() -> None:
    drafts = by_origin(importers.read("markdown", NOTES))
    assert len(drafts) == 21
    assert {o.split(":")[0] for o in drafts} == {"AGENTS.md", "CLAUDE.md", "notes/deploy.md", "notes/oncall.md"}
    deploy = drafts["notes/deploy.md:6"].content
    assert deploy.startswith("Deploying: Production deploys are triggered") and "```sh" in deploy  # code kept
    assert "tags:" not in deploy
    assert drafts["notes/oncall.md:5"].content.startswith("On-call › Alerts: `StockFeedLag` fires")
    assert drafts["notes/oncall.md:10"].content.startswith("On-call › Escalation: Page the inventory team lead")


def test_markdown_never_reads_structure_inside_code_and_keeps_nested_bullets(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("## Release\n\n- Tag it:\n  - `git tag v1`\n  - `git push --tags`\n\n"
                    "```md\n# not a heading\n- not a bullet\n```\n")
    drafts = importers.read("markdown", note)
    assert [d.content for d in drafts] == [
        "Release: Tag it:\n- `git tag v1`\n- `git push --tags`",
        "Release: ```md\n# not a heading\n- not a bullet\n```",
    ]


def test_a_long_section_is_cut_at_paragraph_breaks(tmp_path: Path) -> None:
    paragraph = "Word " * 300  # ~1500 chars
    note = tmp_path / "long.md"
    note.write_text(f"# Guide\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n")
    drafts = importers.read("markdown", note)
    assert [d.origin for d in drafts] == ["long.md:3", "long.md:5", "long.md:7"]
    assert all(d.content.startswith("Guide: Word") for d in drafts)
    assert all(len(d.content) <= markdown.MAX_SECTION_CHARS + 20 for d in drafts)


def test_markdown_bad_input_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_bytes(b"# ok\n\n- fine\n- \xff\xfe broken\n")
    with pytest.raises(BadImportInput) as caught:
        importers.read("markdown", tmp_path / "bad.md")
    assert caught.value.line == 4 and "not UTF-8" in caught.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadImportInput, match="no .md files"):
        importers.read("markdown", empty)


# -- common ---------------------------------------------------------------------------------------

def test_unknown_format_missing_path_and_bad_scope_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(BadImportInput, match="unknown format"):
        importers.read("mem0", tmp_path)
    with pytest.raises(BadImportInput, match="no such file"):
        importers.read("markdown", tmp_path / "missing.md")
    with pytest.raises(BadImportInput, match="not a scope"):
        importers.read("markdown", NOTES / "AGENTS.md", ["Projects:Foo"])


def test_every_draft_of_every_fixture_fits_the_write_contract() -> None:
    for fmt, path in (("bettermemory", BETTERMEMORY), ("server-memory", GRAPH), ("markdown", NOTES)):
        for draft in importers.read(fmt, path, ["projects:inventory"]):
            assert draft.content.strip() == draft.content and draft.content
            assert all(importers.draft.valid_scope(s) for s in draft.scopes)
            assert f"import:{fmt}" in draft.scopes
            assert draft.category in importers.draft.CATEGORIES
            assert draft.confidence in importers.draft.CONFIDENCES and draft.source in importers.draft.SOURCES
