"""The caller identity a bridge captures once at start: worktree, repo, project, pid, swarm id,
and the client's own session id when the client names one (`client_session`).

Import contract: stdlib only (it runs on the bridge's fast path).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any


def _git(args: list[str], cwd: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def _project_name(remote: str | None, common_dir: str | None) -> str | None:
    if remote:
        tail = remote.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return tail[:-4] if tail.endswith(".git") else tail
    if common_dir:
        parent = Path(common_dir)
        return (parent.parent if parent.name == ".git" else parent).name
    return None


def capture(cwd: str | None = None) -> dict[str, Any]:
    """Identity of a bridge started in `cwd`; `MEMORYD_WORKTREE` overrides the git lookup."""
    cwd = cwd or os.getcwd()
    override = os.environ.get("MEMORYD_WORKTREE")
    worktree = override if override is not None else _git(["rev-parse", "--show-toplevel"], cwd)
    common, remote = None, None
    if worktree:
        common = _git(["rev-parse", "--path-format=absolute", "--git-common-dir"], worktree)
        remote = _git(["config", "--get", "remote.origin.url"], worktree)
    if worktree and not common and override is not None:
        common = worktree  # an override outside git still names one repo
    project = _project_name(remote, common)
    return {
        "worktree": worktree or None,
        "repo": (common + (" " + remote if remote else "")) if common else None,
        "project": _sanitize_project(project),
        "client": None,
        "pid": os.getpid(),
        "swarm_id": os.environ.get("MEMORYD_SWARM_ID") or None,
        "client_session": client_session_from_env(),
    }


def client_session_from_env() -> str | None:
    """The client session this process belongs to, when its client says so.

    Claude Code gives the MCP servers it launches `CLAUDE_CODE_SESSION_ID`, the same value its
    hooks get as `session_id`; the daemon joins the bridge and those hooks into one session.
    """
    value = os.environ.get("CLAUDE_CODE_SESSION_ID", "").strip()
    return value[:256] or None


def _sanitize_project(name: str | None) -> str | None:
    """A project name usable in the scope `projects:<name>` (lowercase, [a-z0-9-])."""
    if not name:
        return None
    cleaned = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    while "--" in cleaned:
        cleaned = cleaned.replace("--", "-")
    return cleaned or None
