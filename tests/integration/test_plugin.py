"""The Claude Code plugin (issue 41): the checkout is a marketplace (`.claude-plugin/marketplace.json`)
listing `plugin/`, whose `.mcp.json` starts the bridge and whose `hooks/hooks.json` registers every
hook `init` registers — both made from the hook table (`hooks/table.py`), and held equal to it here.

Real path: the real `claude` CLI adds the checkout as a local marketplace under a throwaway HOME,
installs the plugin, lists its MCP server as connected, and a scripted session gets memoryd's tools
and its start context. `init` and the plugin never register memoryd twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from test_hooks import claude_binary, git_repo

from harness import Env
from memoryd.cli.clients import plugin_hooks, plugin_mcp
from scripted_claude import claude_environ, given_text, hook_context, run_claude

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugin_files_are_what_the_hook_table_makes() -> None:
    assert json.loads((ROOT / "plugin" / "hooks" / "hooks.json").read_text()) == plugin_hooks()
    assert json.loads((ROOT / "plugin" / ".mcp.json").read_text()) == plugin_mcp()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    manifest = json.loads((ROOT / "plugin" / ".claude-plugin" / "plugin.json").read_text())
    assert market["plugins"][0]["source"] == "./plugin" and market["plugins"][0]["version"] == version
    assert manifest["name"] == "memoryd" and manifest["version"] == version
    assert os.access(ROOT / "plugin" / "bin" / "memoryd", os.X_OK)


def test_without_memoryd_on_path_the_runner_says_so_in_one_line() -> None:
    runner = ROOT / "plugin" / "bin" / "memoryd"
    for args, code in ((["hook", "prompt", "--from-plugin"], 0), (["mcp"], 1)):
        done = subprocess.run([str(runner), *args], env={"PATH": "/nonexistent"}, input="{}", capture_output=True,
                              text=True, timeout=30, check=False)
        assert done.returncode == code and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "memoryd command is not on PATH" in done.stderr


def claude(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(claude_binary()), *args], env=claude_environ(env, home, "http://127.0.0.1:9"),
                          capture_output=True, text=True, timeout=120, check=False, cwd=str(home))


def test_claude_code_installs_the_plugin_from_the_checkout_and_a_session_gets_memoryd(served: Env) -> None:
    env = served
    home = env.base / "home"
    home.mkdir()
    environ = env.environ(PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    added = claude(home, environ, "plugin", "marketplace", "add", str(ROOT))
    assert added.returncode == 0, added.stdout + added.stderr
    installed = claude(home, environ, "plugin", "install", "memoryd@memoryd")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = claude(home, environ, "mcp", "list")
    assert "plugin:memoryd:memoryd" in listed.stdout and "Connected" in listed.stdout, listed.stdout

    repo = git_repo(env.base / "shop").resolve()
    run = run_claude("hello", repo, environ, home, [("text", "Done.")], claude=claude_binary())
    assert run.proc.returncode == 0 and run.turns, run.proc.stderr[-800:]
    first = run.turns[0]
    tools = [t["name"] for t in first.get("tools") or []]
    assert any("memoryd" in name and name.endswith("memory_search") for name in tools), tools
    started = hook_context(first, "SessionStart")
    assert any("memoryd session sess-" in c for c in started), given_text(first)[-2000:]

    # `init` sees the plugin and writes nothing; the plugin's hooks stand down where `init` wrote hooks.
    init = env.memoryd("init", "--client", "claude-code", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    assert init.returncode == 0 and "installed as a Claude Code plugin" in init.stdout, init.stdout + init.stderr
    assert " -m memoryd hook " not in (home / ".claude" / "settings.json").read_text()
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    settings["hooks"] = {"SessionStart": [{"hooks": [{"type": "command", "command": "python -m memoryd hook x"}]}]}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    stood_down = subprocess.run([sys.executable, "-m", "memoryd", "hook", "session-start", "--from-plugin"],
                                input=json.dumps({"session_id": "cc-p", "cwd": str(repo)}), capture_output=True,
                                text=True, timeout=30, check=False, env={**environ, "HOME": str(home)})
    assert stood_down.returncode == 0 and stood_down.stdout == "" and stood_down.stderr == ""
