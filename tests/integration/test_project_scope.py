"""The project named to the agent, and a write under another name for it (docs/tools.md "Project
scopes"): the session-start context and the bridge's instructions say which scope the worktree's
memories carry; a write scoped to the folder's name is stored under the canonical scope and the
reply says so; a project nobody has used is refused until acknowledged, naming the worktree's scope.

Real path: the official SDK client on a real bridge, real hook processes, the files on disk.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from test_hooks import git_repo, start

from harness import Env, call
from memoryd.daemon.storage import frontmatter

NOTE = "Invoices are numbered per tenant; the sequence lives in billing/numbering.py and never reuses a number."


def shop_clone(env: Env) -> Path:
    """A clone in a folder named `shop-folder` of a repository whose origin names it `shop`."""
    repo = git_repo(env.base / "shop-folder").resolve()
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/shop.git"], check=True)
    return repo


def longest_common(a: str, b: str) -> int:
    """The length of the longest substring of `a` that is also in `b`."""
    best = 0
    for at in range(len(a)):
        while at + best < len(a) and a[at:at + best + 1] in b:
            best += 1
    return best


def memory_files(env: Env) -> list[Path]:
    return sorted((env.home / "memories").glob("*.md"))


def test_the_start_context_and_the_instructions_name_the_scope_from_the_origin_url(served: Env) -> None:
    env = served
    repo = shop_clone(env)
    context = start(env, "cc-scope-1", repo)
    assert context is not None
    assert "This repo's memories are scoped projects:shop (from its origin URL)." in context

    async def instructions() -> str:
        async with stdio_client(env.bridge_params(cwd=str(repo))) as (read, write), \
                ClientSession(read, write) as session:
            result = await session.initialize()
            return result.instructions or ""
    said = anyio.run(instructions)
    assert "projects:shop (" in said and "origin URL)" in said and len(said) <= 800
    # What the agent reads twice: the instructions and the start context share no phrase (they
    # shared 833 chars); only the scope's name, which both must say.
    assert longest_common(said, context.replace("projects:shop", "")) < 40, longest_common(said, context)

    plain = git_repo(env.base / "notes").resolve()  # no origin remote: named after its folder
    assert "scoped projects:notes (from its folder name: it has no origin remote)" in (start(env, "cc-s2", plain) or "")


def test_a_folder_name_scope_resolves_and_an_unknown_project_is_refused_until_acknowledged(served: Env) -> None:
    env = served
    repo = shop_clone(env)

    async def writes() -> dict[str, Any]:
        async with env.session(cwd=str(repo)) as bridge:
            folder = await call(bridge, "memory_write", content=NOTE, scopes=["projects:shop-folder", "topic:billing"])
            before = memory_files(env)
            typo = await call(bridge, "memory_write", content="Refunds over 500 EUR need a second approver.",
                              scopes=["projects:shpo"])
            unchanged = memory_files(env) == before
            meant = await call(bridge, "memory_write", content="Refunds over 500 EUR need a second approver.",
                               scopes=["projects:shpo"], acknowledge_scope_mismatch=True)
            return {"folder": folder, "typo": typo, "unchanged": unchanged, "meant": meant}
    got = anyio.run(writes)

    folder = got["folder"]
    assert folder["status"] == "committed" and folder["scopes"] == ["projects:shop", "topic:billing"], folder
    assert folder["scopes_resolved"][0]["from"] == "projects:shop-folder"
    assert folder["scopes_resolved"][0]["to"] == "projects:shop"
    meta, _ = frontmatter.parse((env.home / "memories" / f"{folder['id']}.md").read_bytes())
    assert meta["scopes"] == ["projects:shop", "topic:billing"]
    context = start(env, "cc-scope-3", repo) or ""
    assert "Newest stored memories for project shop" in context and "Invoices are numbered per tenant" in context

    typo = got["typo"]
    assert typo["status"] == "scope_mismatch" and got["unchanged"], typo
    assert typo["matches"][0]["kind"] == "unknown_project" and typo["suggested_scopes"] == ["projects:shop"]
    assert "projects:shop" in typo["hint"] and "acknowledge_scope_mismatch" in typo["hint"]
    assert got["meant"]["status"] == "committed" and got["meant"]["scopes"] == ["projects:shpo"]


def test_a_project_another_repo_uses_is_accepted_and_never_renamed(served: Env) -> None:
    env = served
    web = git_repo(env.base / "web").resolve()
    shop = shop_clone(env)

    async def writes() -> tuple[dict[str, Any], dict[str, Any]]:
        async with env.session(cwd=str(web)) as bridge:
            own = await call(bridge, "memory_write", content="The web app builds with `pnpm build`.",
                             scopes=["projects:web"])
        async with env.session(cwd=str(shop)) as bridge:
            cross = await call(bridge, "memory_write", content="The shop checkout embeds the web app's cart widget.",
                               scopes=["projects:web", "projects:shop"])
        return own, cross
    own, cross = anyio.run(writes)
    assert own["status"] == "committed"
    assert cross["status"] == "committed" and "scopes_resolved" not in cross, cross
    assert cross["scopes"] == ["projects:web", "projects:shop"]
