"""`memoryd import`, run as a user runs it, against a real daemon on a temp store: each format's
fixture (written by the real tool, tests/fixtures/import/README.md) lands in the store through the
write gates, search finds it, secrets are refused, a re-run adds nothing, a dry run writes nothing."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio

from harness import Env, call
from memoryd.cli.importing import Progress

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "import"
BETTERMEMORY = str(FIXTURES / "bettermemory" / "store")
GRAPH = str(FIXTURES / "server-memory" / "memory.jsonl")
NOTES = str(FIXTURES / "markdown")


def search(env: Env, query: str) -> list[dict[str, Any]]:
    return env.memoryd_json("memories", "search", query)["results"]  # type: ignore[no-any-return]


def total(env: Env) -> int:
    return env.memoryd_json("memories", "list")["total"]  # type: ignore[no-any-return]


def reasons(summary: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    return {(r["outcome"], r["reason"]): [i["origin"] for i in r["items"]] for r in summary["reasons"]}


def test_bettermemory_store_is_imported_verified_removed_and_a_rerun_adds_nothing(daemon: Env) -> None:
    first = daemon.memoryd_json("import", "bettermemory", BETTERMEMORY)
    assert first["counts"] == {"committed": 3, "removed": 1, "duplicate": 0, "pending": 1, "refused": 1, "failed": 0}
    why = reasons(first)
    assert why[("refused", "credential_warning")] == ["bettermemory:01M8QDMSPMF9H4FBAP86CVZWEM"]
    assert search(daemon, "legacy reporting job S3 access key") == []  # the secret never landed

    [hit] = [h for h in search(daemon, "deploys staging cluster production") if "staging cluster" in h["content"]]
    assert hit["scopes"] == ["projects:webapp", "import:bettermemory"] and hit["confidence"] == "high"
    shown = daemon.memoryd_json("memories", "show", hit["id"])
    assert shown["origin"]["client"].startswith("memoryd-import/")
    assert "2026-11-30T23:46:34.911Z" in shown["verification_note"] and shown["last_verified_at"]

    [tombstone] = daemon.memoryd_json("memories", "list", "--removed")["tombstones"]
    assert tombstone["first_line"].startswith("The search index is rebuilt nightly")
    assert tombstone["reason"].startswith("removed in bettermemory on 2026-11-30")
    [pending] = first["pending"]
    assert pending["origin"] == "bettermemory:01M8QDMSM6E0WA9GZGQ9ZH2NZQ"
    assert pending["pending_id"].startswith("pending-")

    count = total(daemon)
    again = daemon.memoryd_json("import", "bettermemory", BETTERMEMORY)
    assert again["counts"] == {"committed": 0, "removed": 0, "duplicate": 4, "pending": 1, "refused": 1, "failed": 0}
    assert set(reasons(again)) == {("duplicate", "duplicate"), ("duplicate", "previously_removed"),
                                   ("pending", "already pending from an earlier import"),
                                   ("refused", "credential_warning")}
    assert again["pending"][0]["pending_id"] == pending["pending_id"]  # not staged twice
    assert total(daemon) == count
    assert len(daemon.memoryd_json("pending")["pending"]) == 1


def test_server_memory_graph_is_searchable_per_entity_and_user_claims_confirmed_on_request(daemon: Env) -> None:
    first = daemon.memoryd_json("import", "server-memory", GRAPH, "--confirm-pending")
    assert first["counts"] == {"committed": 4, "removed": 0, "duplicate": 0, "pending": 0, "refused": 1, "failed": 0}
    assert reasons(first)[("refused", "credential_warning")] == ["memory.jsonl:4"]
    [api] = [h for h in search(daemon, "payments-api integration tests Postgres port") if "5433" in h["content"]]
    assert api["scopes"] == ["entities:payments-api", "import:server-memory"]
    assert "Alice Martin owns payments-api" in api["content"]
    [user] = [h for h in search(daemon, "Lisbon asynchronous meetings") if "Lisbon" in h["content"]]
    assert user["category"] == "user-inference"
    assert daemon.memoryd_json("pending")["pending"] == []

    again = daemon.memoryd_json("import", "server-memory", GRAPH, "--confirm-pending")
    assert again["counts"] == {"committed": 0, "removed": 0, "duplicate": 4, "pending": 0, "refused": 1, "failed": 0}
    assert total(daemon) == 4


def test_markdown_notes_get_the_scope_asked_for_and_warnings_pass_only_when_acknowledged(daemon: Env) -> None:
    first = daemon.memoryd_json("import", "markdown", NOTES, "--scope", "projects:inventory")
    assert first["counts"] == {"committed": 19, "removed": 0, "duplicate": 0, "pending": 0, "refused": 2, "failed": 0}
    assert reasons(first) == {("refused", "credential_warning"): ["CLAUDE.md:23"],
                              ("refused", "transient_warning"): ["notes/deploy.md:10"]}
    [rollback] = [h for h in search(daemon, "roll back previous digest") if "make rollback" in h["content"]]
    assert rollback["content"].startswith("Deploying: Roll back with")
    assert rollback["scopes"] == ["import:markdown", "projects:inventory"]
    assert daemon.memoryd_json("memories", "list", "--scope", "projects:inventory")["total"] == 19

    again = daemon.memoryd_json("import", "markdown", NOTES, "--scope", "projects:inventory",
                                "--acknowledge", "transient")
    assert again["counts"] == {"committed": 1, "removed": 0, "duplicate": 19, "pending": 0, "refused": 1, "failed": 0}
    assert total(daemon) == 20


def test_an_agent_finds_imported_memories_from_inside_a_repository(daemon: Env, tmp_path: Path) -> None:
    """The import runs outside any repo; an agent's default (auto-scoped) search through its
    bridge, with the official MCP client, still sees what was imported."""
    daemon.memoryd_json("import", "markdown", NOTES, "--scope", "projects:inventory")
    repo = tmp_path / "inventory"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    async def search_as_agent() -> dict[str, Any]:
        async with daemon.session(cwd=str(repo)) as session:
            return await call(session, "memory_search", query="money stored integer cents")

    found = anyio.run(search_as_agent)
    assert found["results"][0]["content"] == "Conventions: Money is stored as integer cents, never floats."


def test_the_table_summary_names_reasons_and_items(daemon: Env) -> None:
    result = daemon.memoryd("import", "server-memory", GRAPH)
    assert result.returncode == 0, result.stderr
    assert "3 committed, 0 removed, 0 duplicate, 1 pending, 1 refused, 0 failed" in result.stdout
    assert "refused: credential_warning (1)" in result.stdout and "memory.jsonl:4  legacy-reports" in result.stdout
    assert "memoryd pending confirm" in result.stdout
    assert "AKIAIOSFODNN7EXAMPLE" not in result.stdout  # titles are first lines; the key sits below
    assert result.stderr == ""  # not a terminal, a short import: no progress lines


def test_notes_inside_a_repository_are_scoped_to_its_project_unless_scopes_are_given(env: Env,
                                                                                     tmp_path: Path) -> None:
    repo = tmp_path / "inventory"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(Path(NOTES) / "AGENTS.md", repo / "AGENTS.md")
    result = env.memoryd("import", "markdown", str(repo / "AGENTS.md"), "--dry-run", "--json")
    assert result.returncode == 0 and "adding scope projects:inventory" in result.stderr
    assert json.loads(result.stdout)["by_scope"] == {"import:markdown": 5, "projects:inventory": 5}
    given = env.memoryd_json("import", "markdown", str(repo / "AGENTS.md"), "--dry-run", "--scope", "teams:infra")
    assert given["by_scope"] == {"import:markdown": 5, "teams:infra": 5}


def test_dry_run_needs_no_daemon_and_writes_nothing(env: Env) -> None:
    plan = env.memoryd_json("import", "markdown", NOTES, "--dry-run", "--scope", "projects:inventory")
    assert plan["dry_run"] and plan["total"] == 21 and plan["by_category"] == {"fact": 21}
    assert plan["by_scope"] == {"import:markdown": 21, "projects:inventory": 21}
    table = env.memoryd("import", "bettermemory", BETTERMEMORY, "--dry-run")
    assert table.returncode == 0 and "6 memories" in table.stdout and "nothing written" in table.stdout
    assert "1 removed in the source tool" in table.stdout
    assert not (env.home / "memories").exists() and env.status() is None  # no store, no daemon spawned


def test_exit_codes_daemon_down_and_unreadable_input(env: Env, tmp_path: Path) -> None:
    (env.base / "config.yaml").write_text("episode_ttl_dayz: 3\n")  # a daemon that cannot start
    down = env.memoryd("import", "markdown", NOTES)
    assert down.returncode == 3 and "could not be started" in down.stderr and down.stdout == "", down.stderr
    (env.base / "config.yaml").write_text("search_by_meaning: false\n")
    bad = tmp_path / "memory.jsonl"
    bad.write_text('{"type":"entity","name":"A","observations":["x"]}\n{oops\n')
    unreadable = env.memoryd("import", "server-memory", str(bad))
    assert unreadable.returncode == 2 and f"{bad}:2: not a JSON object" in unreadable.stderr
    assert env.memoryd("import", "mem0", NOTES).returncode == 2  # argparse: not a format


def test_a_write_the_daemon_refuses_with_an_error_is_reported_and_the_rest_goes_on(env: Env, tmp_path: Path) -> None:
    (env.base / "config.yaml").write_text("max_content_bytes: 1024\n")
    env.start_daemon()
    note = tmp_path / "n.md"
    note.write_text("## Big\n\n" + "word " * 300 + "\n\n## Small\n\n- Releases are cut on Tuesdays.\n")
    summary = env.memoryd_json("import", "markdown", str(note), "--scope", "projects:x", code=1)
    assert summary["counts"]["failed"] == 1 and summary["counts"]["committed"] == 1
    [failed] = [r for r in summary["reasons"] if r["outcome"] == "failed"]
    assert "content" in failed["reason"] and failed["items"][0]["origin"] == "n.md:3"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_a_few_lines_elsewhere() -> None:
    tty = Terminal()
    bar = Progress(4, tty)
    for _ in range(4):
        bar.step({"committed": 1, "duplicate": 0})
    bar.done()
    assert tty.getvalue().count("\r") == 4 and "4/4  committed 1" in tty.getvalue() and tty.getvalue().endswith("\n")
    pipe = io.StringIO()
    lines = Progress(200, pipe)
    for _ in range(200):
        lines.step({})
    lines.done()
    assert pipe.getvalue().splitlines() == [f"memoryd import: {n}/200" for n in (50, 100, 150, 200)]


def test_claude_code_folder_whose_transcript_names_another_repo_is_skipped_and_reported(daemon: Env) -> None:
    """Through the real CLI and daemon: the folder for repo `web` whose transcript says its cwd is
    the existing repo `payments` imports nothing under payments' scope; the report names it."""
    from memoryd.importers import claude_code

    payments = daemon.base / "payments"
    (payments / ".git").mkdir(parents=True)
    (payments / ".git" / "config").write_text('[remote "origin"]\n\turl = git@example.com:acme/payments.git\n')
    root = daemon.base / "projects"
    web = root / claude_code._NOT_ALNUM.sub("-", str(daemon.base / "web"))
    (web / "memory").mkdir(parents=True)
    (web / "memory" / "deploy.md").write_text("Deploys of web go through the staging cluster first.\n")
    (web / "s1.jsonl").write_text(json.dumps({"type": "user", "cwd": str(payments)}) + "\n")
    done = daemon.memoryd("import", "claude-code", str(root), "--json")
    shown = done.stdout + done.stderr
    assert str(web) in shown and "not the path the folder is named for" in shown, shown
    assert search(daemon, "deploys of web staging cluster") == []
