"""The claude-code and memoryd-export parsers on hand-made inputs (the real CLI's folder and a real
export are in tests/integration/test_import_roundtrip.py): old shapes, missing transcripts, and the
archive members an import must refuse."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from memoryd.errors import BadImportInput
from memoryd.importers import claude_code, memoryd_export, read

ID = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def test_claude_code_reads_old_and_bare_topic_files_and_needs_a_transcript_for_the_project(tmp_path: Path) -> None:
    folder = tmp_path / "-home-me-gone-app" / "memory"
    (folder / "team").mkdir(parents=True)
    (folder / "MEMORY.md").write_text("- [Old](old.md) — an older file\n")
    (folder / "old.md").write_text(
        "---\nname: old\ndescription: Tabs, not spaces\ntype: feedback\n---\nIn Makefiles.\n")
    (folder / "team" / "bare.md").write_text("The CI cache key includes the lockfile hash.\n")
    (folder / "empty.md").write_text("---\nname: empty\n---\n\n")
    skipped: list[tuple[str, str]] = []
    drafts = read("claude-code", tmp_path, skipped=skipped)
    assert [(d.content, d.scopes, d.category) for d in drafts] == [
        ("Tabs, not spaces\n\nIn Makefiles.", ("import:claude-code",), "fact"),
        ("The CI cache key includes the lockfile hash.", ("import:claude-code",), "fact")]
    assert skipped == [(str(folder / "empty.md"), "an empty memory file")]
    (folder.parent / "s1.jsonl").write_text(json.dumps({"type": "user", "cwd": "/home/me/gone_app"}) + "\n")
    assert claude_code.project_scopes(folder.parent, []) == ("projects:gone-app",)  # the cwd's name: it is gone


def test_a_transcript_naming_another_repo_than_its_folder_gets_the_folder_skipped(tmp_path: Path) -> None:
    """The folder for /home/me/web says its cwd is /home/me/payments (which exists, with its own
    origin): the memories are not given payments' scope; the folder is skipped and reported."""
    payments = tmp_path / "home" / "me" / "payments"
    (payments / ".git").mkdir(parents=True)
    (payments / ".git" / "config").write_text('[remote "origin"]\n\turl = git@example.com:acme/payments.git\n')
    root = tmp_path / "projects"
    web = root / claude_code._NOT_ALNUM.sub("-", str(tmp_path / "home" / "me" / "web"))
    (web / "memory").mkdir(parents=True)
    (web / "memory" / "deploy.md").write_text("Deploys of web go through staging first.\n")
    (web / "s1.jsonl").write_text(json.dumps({"type": "user", "cwd": str(payments)}) + "\n")
    skipped: list[tuple[str, str]] = []
    assert read("claude-code", root, skipped=skipped) == []
    assert skipped and skipped[0][0] == str(web) and "not the path the folder is named for" in skipped[0][1]
    own = root / claude_code._NOT_ALNUM.sub("-", str(payments))  # the same transcript in its own folder
    (own / "memory").mkdir(parents=True)
    (own / "memory" / "cards.md").write_text("Card data never leaves the payments service.\n")
    (own / "s1.jsonl").write_text(json.dumps({"type": "user", "cwd": str(payments)}) + "\n")
    [draft] = read("claude-code", own, skipped=[])
    assert draft.scopes == ("projects:payments", "import:claude-code")  # from .git/config, no git run


def _archive(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _record(memory_id: str = ID, category: str = "fact") -> bytes:
    return (f'---\nid: "{memory_id}"\ncreated: "2026-01-01T00:00:00.000Z"\nscopes: ["projects:web"]\n'
            f'category: "{category}"\nconfidence: "high"\nsource: "inferred"\n---\nDeploys go through staging.\n'
            ).encode()


@pytest.mark.parametrize("name,words", [("/memories/x.md", "outside the archive"),
                                        ("memories/..\\x.md", "outside the archive")])
def test_an_export_member_named_outside_the_archive_is_refused(tmp_path: Path, name: str, words: str) -> None:
    archive = _archive(tmp_path / "a.tar.gz", (tarfile.TarInfo(name), b"x"))
    with pytest.raises(BadImportInput, match=words):
        memoryd_export.read(archive, [])


def test_an_export_record_must_name_its_own_id_and_handoffs_are_passed_over(tmp_path: Path) -> None:
    hard = tarfile.TarInfo(f"tombstones/{ID}.md")
    hard.type, hard.linkname = tarfile.LNKTYPE, f"memories/{ID}.md"
    with pytest.raises(BadImportInput, match="is a link"):
        memoryd_export.read(_archive(tmp_path / "h.tar.gz", (hard, b"")), [])
    wrong = _archive(tmp_path / "w.tar.gz",
                     (tarfile.TarInfo(f"memories/{ID}.md"), _record("01JBBBBBBBBBBBBBBBBBBBBBBB")))
    with pytest.raises(BadImportInput, match=r"\[memories/01JA.*\.md\]:2: its id"):
        memoryd_export.read(wrong, [])
    skipped: list[tuple[str, str]] = []
    other = "01JCCCCCCCCCCCCCCCCCCCCCCC"
    both = _archive(tmp_path / "b.tar.gz", (tarfile.TarInfo(f"memories/{ID}.md"), _record()),
                    (tarfile.TarInfo(f"memories/{other}.md"), _record(other, "handoff")))
    [draft] = memoryd_export.read(both, skipped)
    assert draft.scopes == ("projects:web", "import:memoryd-export") and draft.confidence == "high"
    assert skipped == [(f"memories/{other}.md", "a session handoff (it stays with the exporting machine's sessions)")]
