"""The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`), a second real client, drives the bridge.

The Inspector is installed once per session into a cache dir under the temp dir (reused when it is
already there). The test skips, saying why, only when npm is missing or the install fails for want
of a network; any other install failure fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Env
from memoryd.daemon.catalogue import CORE, TOOLS

CACHE = Path(tempfile.gettempdir()) / "memoryd-test-npm" / "inspector"
BIN = CACHE / "node_modules" / ".bin" / "mcp-inspector"
OFFLINE_MARKS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH",
                 "network", "offline")
MEMORYD = str(Path(sys.executable).parent / "memoryd")


@pytest.fixture(scope="module")
def inspector() -> Iterator[Path]:
    """The `mcp-inspector` executable, installed on first use (about half a minute)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm/node not installed: cannot install @modelcontextprotocol/inspector")
    if not BIN.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund",
                                   "@modelcontextprotocol/inspector"],
                                  capture_output=True, text=True, timeout=180, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install @modelcontextprotocol/inspector timed out after 180 s (offline?)")
        if done.returncode != 0 or not BIN.exists():
            output = (done.stdout + done.stderr)[-1500:]
            if any(mark in output for mark in OFFLINE_MARKS):
                pytest.skip(f"npm install @modelcontextprotocol/inspector failed, no network: {output[-300:]}")
            pytest.fail(f"npm install @modelcontextprotocol/inspector failed:\n{output}")
    yield BIN


def run_inspector(inspector: Path, env: Env, *args: str) -> dict[str, Any]:
    done = inspect(inspector, env, *args)
    assert done.returncode == 0, f"{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def inspect(inspector: Path, env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    """One `mcp-inspector --cli memoryd mcp ...` run; the store reaches the bridge only through `-e`.

    The Inspector's own environment has no MEMORYD_* and a throwaway HOME, so a bridge that did
    not get the `-e` values could not find (or spawn a daemon on) any real store.
    """
    own_env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "XDG_"))}
    own_env["HOME"] = str(env.base / "inspector-home")
    passed = [f"{key}={env.vars[key]}" for key in ("MEMORYD_HOME", "MEMORYD_RUNTIME_DIR", "MEMORYD_CONFIG")]
    command = [str(inspector), "--cli"]
    for pair in passed:
        command += ["-e", pair]
    command += [MEMORYD, "mcp", *args]
    return subprocess.run(command, env=own_env, cwd=str(env.base), capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_inspector_cli_lists_and_calls_tools_and_lists_resources(inspector: Path, served: Env) -> None:
    listed = run_inspector(inspector, served, "--method", "tools/list")
    names = [tool["name"] for tool in listed["tools"]]
    assert names == [name for name in TOOLS if name in CORE]  # the default profile

    called = run_inspector(inspector, served, "--method", "tools/call", "--tool-name", "episode_write",
                           "--tool-arg", "body=written by the MCP Inspector", "takeaway=the inspector works")
    result = called["structuredContent"]
    assert called["isError"] is False and result["status"] == "committed"
    # It landed in this test's store, so the `-e` values reached the bridge.
    assert list((served.home / "episodes").glob(f"*/{result['id']}.md"))

    resources = run_inspector(inspector, served, "--method", "resources/list")
    assert resources["resources"] == []  # episodes are not memories
    templates = run_inspector(inspector, served, "--method", "resources/templates/list")
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["memoryd://memories/{id}"]


def test_the_inspector_cli_reads_a_memory_as_a_resource(inspector: Path, served: Env) -> None:
    written = run_inspector(inspector, served, "--method", "tools/call", "--tool-name", "memory_write",
                            "--tool-arg", "content=The staging database lives in eu-west-1.",
                            "--tool-arg", 'scopes=["projects:inspector"]')
    memory_id = written["structuredContent"]["id"]
    uri = f"memoryd://memories/{memory_id}"
    listed = run_inspector(inspector, served, "--method", "resources/list")
    assert [r["uri"] for r in listed["resources"]] == [uri]
    assert listed["resources"][0]["name"] == "The staging database lives in eu-west-1."

    read = run_inspector(inspector, served, "--method", "resources/read", "--uri", uri)
    [content] = read["contents"]
    assert content["uri"] == uri and content["mimeType"] == "text/markdown"
    assert content["text"].endswith("The staging database lives in eu-west-1.")

    missing = inspect(inspector, served, "--method", "resources/read", "--uri", "memoryd://memories/nope")
    assert missing.returncode != 0 and "Resource not found: memoryd://memories/nope" in missing.stderr
