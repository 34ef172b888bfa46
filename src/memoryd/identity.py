"""The caller identity a bridge captures once at start (worktree, repo, project, pid, swarm id, the
client's session id). Import contract: stdlib only (it runs on the bridge's fast path)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any


def git_output(args: list[str], cwd: str, timeout: float = 2) -> str | None:
    """What `git ARGS` prints in `cwd`, stripped; None when it fails, prints nothing or takes over `timeout` s."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def _origin_url(common: str, worktree: str) -> str | None:
    """remote.origin.url, read from the repo's config file when it is plain, else from `git config`."""
    try:
        text = Path(common, "config").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = "[include"
    section, url = None, None
    for line in map(str.strip, text.splitlines()):
        if line.startswith("["):
            section = " ".join(line.strip("[]").split()).lower()
        elif section == 'remote "origin"' and "=" in line and line.split("=", 1)[0].strip().lower() == "url":
            url = line.split("=", 1)[1].strip()
    if "[include" in text.lower() or (url is not None and any(c in url for c in '"\\#;')):
        return git_output(["config", "--get", "remote.origin.url"], worktree)
    return url or None


def project_name(remote: str | None, common_dir: str | None) -> str | None:
    """The project a repo with this origin URL and git dir is named (as `capture` names it)."""
    if remote:
        tail = remote.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return _sanitize_project(tail[:-4] if tail.endswith(".git") else tail)
    if common_dir:
        parent = Path(common_dir)
        return _sanitize_project((parent.parent if parent.name == ".git" else parent).name)
    return None


_OWN: dict[str, Any] = {}


def own() -> dict[str, Any]:
    """`capture()` of this process, taken once (its cwd does not change)."""
    if not _OWN:
        _OWN.update(capture())
    return dict(_OWN)


def capture(cwd: str | None = None) -> dict[str, Any]:
    """Identity of a bridge started in `cwd`; `MEMORYD_WORKTREE` overrides the git lookup."""
    worktree = override = os.environ.get("MEMORYD_WORKTREE")
    if override is not None:
        common = git_output(["rev-parse", "--path-format=absolute", "--git-common-dir"], override) if override else None
    else:
        # One git process for both paths: hooks capture an identity on every prompt.
        lines = (git_output(["rev-parse", "--show-toplevel", "--path-format=absolute", "--git-common-dir"],
                            cwd or os.getcwd()) or "").splitlines()
        worktree, common = (lines[0], lines[1]) if len(lines) == 2 else (None, None)
    remote = _origin_url(common, worktree) if worktree and common else None
    if worktree and not common and override is not None:
        common = worktree  # an override outside git still names one repo
    return {"worktree": worktree or None, "repo": (common + (" " + remote if remote else "")) if common else None,
            "project": project_name(remote, common), "project_from_origin": remote is not None, "client": None,
            "pid": os.getpid(), "swarm_id": os.environ.get("MEMORYD_SWARM_ID") or None,
            # Claude Code's session id, which its hooks get too: the daemon joins them into one session.
            "client_session": os.environ.get("CLAUDE_CODE_SESSION_ID", "").strip()[:256] or None}


def _sanitize_project(name: str) -> str | None:
    """A project name usable in the scope `projects:<name>` (lowercase, [a-z0-9-]); None when nothing is left."""
    cleaned = "".join(c if c.isalnum() else "-" for c in name.lower())
    return "-".join(part for part in cleaned.split("-") if part) or None
