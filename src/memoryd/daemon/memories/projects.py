"""The project scopes a write names, held against the writer's own: renamed when they name this
repository by a folder, refused when no one has used them (docs/tools.md, "Project scopes").

Import contract: core, memories.index (the scope's project name) and identity; no tier internals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from memoryd.daemon.core import Call
from memoryd.daemon.identity.scopes import unique
from memoryd.daemon.memories.index import PROJECT_PREFIX, project_scope_name
from memoryd.identity import project_name

UNKNOWN_HINT = ("No worktree or memory has used project {name!r}; this repo's memories are scoped {own}. Use "
                "that, or pass acknowledge_scope_mismatch=true to start project {name!r}.")


@dataclass
class Checked:
    """The scopes to store, the renames made, and the refusal when an unknown project is named."""

    scopes: list[str]
    resolved: list[dict[str, str]] = field(default_factory=list)
    refusal: dict[str, Any] | None = None


def check_project_scopes(call: Call, scopes: list[str], acknowledged: bool) -> Checked:
    own, repo, worktree = _writer(call)
    named = {n for s in scopes if (n := project_scope_name(s)) is not None and n != own}
    if own is None or not named:
        return Checked(scopes)
    aliases, worktree_projects = _view(call, repo, worktree, own)
    out, resolved = [], []
    for scope in scopes:
        name = project_scope_name(scope)
        if name in aliases:
            canonical = f"{PROJECT_PREFIX}{own}{scope[len(PROJECT_PREFIX) + len(name or ''):]}"
            resolved.append({"from": scope, "to": canonical, "why": f"{name!r} is this repo's folder name"})
            scope = canonical
        out.append(scope)
    memory_projects = call.core.memories.known_projects()
    unknown = [s for s in unique(out) if (n := project_scope_name(s)) not in (None, own)
               and n not in memory_projects and n not in worktree_projects]
    if unknown and not acknowledged:
        suggested = f"{PROJECT_PREFIX}{own}"
        return Checked(out, resolved, {
            "status": "scope_mismatch",
            "matches": [{"kind": "unknown_project", "evidence": s, "suggested_scope": suggested} for s in unknown],
            "suggested_scopes": [suggested],
            "hint": UNKNOWN_HINT.format(name=project_scope_name(unknown[0]), own=suggested)})
    return Checked(unique(out), resolved)


def _view(call: Call, repo: str | None, worktree: str | None, own: str) -> tuple[frozenset[str], frozenset[str]]:
    """This writer's aliases and the projects worktrees are named, from every worktree's latest
    session; kept with the session table until one of those changes (measurably cheaper per write)."""
    sessions = call.core.sessions
    key = ("project scopes", repo, worktree, own)
    view: tuple[frozenset[str], frozenset[str]] | None = sessions.derived.get(key)
    if view is None:
        worktrees = sessions.latest_identities()
        # This repository's worktree folders as a project would be named after them, except a
        # name that is another repository's project.
        folders = {worktree} | {w for w, (r, _) in worktrees.items() if repo is not None and r == repo}
        aliases = {n for f in folders if f and (n := project_name(None, os.path.join(f, ".git")))}
        aliases -= {p for r, p in worktrees.values() if p and r != repo} | {own}
        view = sessions.derived[key] = (frozenset(aliases), frozenset(p for _, p in worktrees.values() if p))
    return view


def _writer(call: Call) -> tuple[str | None, str | None, str | None]:
    """The writer's (project, repo, worktree): its session's, else its connection's identity."""
    session, identity = call.session, call.identity
    def pick(key: str) -> Any:
        value = getattr(session, key, None)
        return value if value is not None else identity.get(key)
    return pick("project"), pick("repo"), pick("worktree")

