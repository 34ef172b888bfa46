"""Staleness of a memory: days since it was last known to hold, cited paths that vanished, commits since. git runs
only where this machine can vouch for the repository: never one a pulled record names, never inside the store,
always with `NO_PROGRAMS`. Import contract: stdlib, gates (cited paths), records, identity (git_output); sync.git
shares `NO_PROGRAMS`.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memoryd.daemon.memories.gates import cited_paths
from memoryd.daemon.memories.records import Memory
from memoryd.identity import git_output

# Passed with `-c` (outranking every config file), so no repository config runs a program (docs/sync.md).
NO_PROGRAMS = ("safe.bareRepository=explicit", "core.hooksPath=/dev/null", "core.fsmonitor=false",
               "log.showSignature=false", "gpg.program=", "gpg.openpgp.program=", "gpg.x509.program=",
               "gpg.ssh.program=")
GIT_CACHE_S = 5.0
GIT_TIMEOUT_S = 2.0
MAX_COMMITS_SCANNED = 1000
MAX_PATHS_CHECKED = 32
COMMITS_RECOMMEND = 20   # this many commits since verification: worth a look
COMMITS_REQUIRE = 200    # this many: the code it describes has likely moved
DAY_S = 86_400.0

FRESH = "fresh"
RECOMMENDED = "spot_check_recommended"
REQUIRED = "spot_check_required"


def verdict(days_since: float, missing_paths: int, commits_since: int, stale_days: float) -> str:
    """The staleness verdict from its three signals (pure; docs/tools.md memory_search)."""
    if missing_paths or days_since >= 2 * stale_days or commits_since >= COMMITS_REQUIRE:
        return REQUIRED
    if days_since >= stale_days or commits_since >= COMMITS_RECOMMEND:
        return RECOMMENDED
    return FRESH


@lru_cache(maxsize=4096)
def _cited(content: str) -> tuple[str, ...]:
    return tuple(cited_paths(content)[:MAX_PATHS_CHECKED])


def resolve_cited(path: str, worktree: str) -> str | None:
    """Where a cited path lives on disk under `worktree`, or None when it is not checkable there."""
    root = worktree.rstrip("/")
    if path.startswith("/"):
        return path if path == root or path.startswith(root + "/") else None
    if path.startswith(("~", "../")) or "/../" in path:
        return None
    return os.path.join(root, path.removeprefix("./"))


class GitProbe:
    """Cached answers about worktrees on disk: does it exist, its HEAD, its recent commit times."""

    def __init__(self, home: str | None = None) -> None:
        self._cache: dict[tuple[str, str], tuple[float, Any]] = {}
        self.home = os.path.realpath(home) if home else None  # MEMORYD_HOME: never probed
        self.pulled: set[str] = set()  # ids a sync pulled from another device (sync keeps it)

    def _probeable(self, worktree: str) -> bool:
        if not os.path.isdir(worktree):
            return False
        real = os.path.realpath(worktree)
        return self.home is None or not (real == self.home or real.startswith(self.home + os.sep))

    def _cached(self, kind: str, worktree: str, compute: Any) -> Any:
        now = time.monotonic()
        hit = self._cache.get((kind, worktree))
        if hit is not None and now - hit[0] < GIT_CACHE_S:
            return hit[1]
        value = compute(worktree)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[(kind, worktree)] = (now, value)
        return value

    def exists(self, worktree: str | None) -> bool:
        return bool(worktree) and self._cached("dir", worktree, self._probeable)  # type: ignore[arg-type]

    def head(self, worktree: str | None) -> tuple[str | None, str | None]:
        """(branch, commit) of the worktree's HEAD; (None, None) when unknown."""
        if not self.exists(worktree):
            return None, None
        return self._cached("head", worktree, _git_head)  # type: ignore[arg-type,no-any-return]

    def commits_since(self, worktree: str | None, since_epoch: float) -> int:
        """Commits on HEAD newer than `since_epoch` (capped at MAX_COMMITS_SCANNED); 0 when unknown."""
        if not self.exists(worktree):
            return 0
        times: list[int] = self._cached("log", worktree, _git_commit_times)  # type: ignore[arg-type]
        return len(times) - bisect.bisect_right(times, since_epoch)


def _git(worktree: str, *args: str) -> str | None:
    settings = [part for setting in NO_PROGRAMS for part in ("-c", setting)]
    return git_output(["--no-optional-locks", *settings, *args], worktree, GIT_TIMEOUT_S)


def _git_head(worktree: str) -> tuple[str | None, str | None]:
    out = _git(worktree, "rev-parse", "HEAD", "--abbrev-ref", "HEAD")  # sha, then the branch name
    lines = out.split() if out else []
    return (lines[1], lines[0]) if len(lines) == 2 else (None, None)


def _git_commit_times(worktree: str) -> list[int]:
    """Commit times of HEAD's latest commits, ascending (for bisect)."""
    out = _git(worktree, "log", "--no-show-signature", f"-n{MAX_COMMITS_SCANNED}", "--format=%ct", "HEAD")
    return sorted(int(t) for t in (out or "").split() if t.isdigit())


@dataclass
class Staleness:
    verdict: str
    age_days: float
    path_drift: dict[str, Any] | None
    commits_since: int


def assess(memory: Memory, now: float, probe: GitProbe, stale_days: float, parse_iso: Any) -> Staleness:
    """All three signals for one memory; paths and commits only when its worktree is on disk and was named here."""
    since = parse_iso(memory.verified_or_updated)
    days = max(0.0, (now - since) / DAY_S)
    worktree = None if memory.id in probe.pulled else memory.origin.get("worktree")
    drift, commits = None, 0
    if probe.exists(worktree):
        if "/" in memory.content:  # every cited path holds a slash: skip the regex walk cheaply
            drift = _path_drift(memory.content, worktree)  # type: ignore[arg-type]
        commits = probe.commits_since(worktree, since)
    missing = len(drift["missing"]) if drift else 0
    return Staleness(verdict(days, missing, commits, stale_days), round(days, 1), drift, commits)


def _path_drift(content: str, worktree: str) -> dict[str, Any] | None:
    checkable = [(path, where) for path in _cited(content) if (where := resolve_cited(path, worktree)) is not None]
    missing = [path for path, where in checkable if not os.path.exists(where)]
    return {"checked": len(checkable), "missing": missing} if checkable else None
