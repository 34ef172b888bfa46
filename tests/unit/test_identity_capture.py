"""identity.capture with one git process (plus a config-file read) names what git itself says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memoryd import identity


def git(*args: str, cwd: Path) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=30, check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def by_git(cwd: Path) -> tuple[str | None, str | None]:
    top = git("rev-parse", "--show-toplevel", cwd=cwd) or None
    if top is None:
        return None, None
    common = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=Path(top))
    remote = git("config", "--get", "remote.origin.url", cwd=Path(top))
    return top, common + (" " + remote if remote else "")


@pytest.mark.parametrize("url", ["git@github.com:acme/Billing-API.git", "https://x.test/a b;c.git", None])
def test_capture_matches_git_in_repos_subdirs_worktrees_and_outside(tmp_path: Path, url: str | None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_WORKTREE", raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    if url:
        git("remote", "add", "origin", url, cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "x", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=repo)
    (repo / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for cwd in (repo, repo / "sub", tmp_path / "wt", outside):
        found = identity.capture(str(cwd))
        assert (found["worktree"], found["repo"]) == by_git(cwd), cwd
