"""`memoryd init` merging client hooks, and the hook command's pure parts (no daemon)."""

from __future__ import annotations

import io
import json
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.cli import clients
from memoryd.hooks import common as hooks
from memoryd.hooks import stop

PY = "/opt/venv/bin/python"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return tmp_path


def init(name: str, hooks_on: bool = True) -> int:
    return clients.register_client(name, print_only=False, out=io.StringIO(), python=PY, hooks=hooks_on)


def test_claude_code_hooks_merge_beside_the_users_own_and_twice_changes_nothing(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "notify-send done"}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [mine]}],
                                                               "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]}}))
    assert init("claude-code") == 0
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [mine]}
    assert data["hooks"]["PreToolUse"][1] == {"matcher": "Read|Edit|Write|MultiEdit|Bash", "hooks": [
        {"type": "command", "command": f"{PY} -m memoryd hook pre-tool", "timeout": 3}]}
    assert data["hooks"]["Stop"][0] == {"hooks": [mine]}
    assert data["hooks"]["Stop"][1]["hooks"][0]["command"] == f"{PY} -m memoryd hook stop"
    assert set(data["hooks"]) == {"Stop", "PreToolUse", "SessionStart", "UserPromptSubmit", "SessionEnd"}
    assert settings.with_name("settings.json.bak").exists()
    first = settings.read_bytes()
    assert init("claude-code") == 0
    assert settings.read_bytes() == first


def test_a_new_interpreter_replaces_memoryds_hooks_instead_of_adding(home: Path) -> None:
    assert init("claude-code") == 0
    clients.register_client("claude-code", False, out=io.StringIO(), python="/new/python", hooks=True)
    data = json.loads((home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(commands) == 5 and all(c.startswith("/new/python -m memoryd hook ") for c in commands)


def test_no_hooks_registers_the_bridge_only(home: Path) -> None:
    assert init("claude-code", hooks_on=False) == 0
    assert (home / ".claude.json").exists() and not (home / ".claude" / "settings.json").exists()


def test_codex_gets_hooks_json_and_the_feature_flag(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o4"\n\n[features]\nweb_search = true\n')
    assert init("codex") == 0
    parsed = tomllib.loads(config.read_text())
    assert parsed["features"] == {"web_search": True, "codex_hooks": True} and parsed["model"] == "o4"
    data = json.loads((home / ".codex" / "hooks.json").read_text())
    assert set(data["hooks"]) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"}  # no SessionEnd in Codex
    assert data["hooks"]["PreToolUse"][0]["matcher"] == "Bash|apply_patch"
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("hook stop --client codex")
    assert clients.hooks_current("codex", PY)["current"]


def test_read_input_refuses_over_64_kib_and_non_objects() -> None:
    with pytest.raises(hooks.HookInputError, match="64 KiB"):
        hooks.read_input(io.BytesIO(b"{" + b" " * (64 * 1024) + b"}"))
    for raw in (b"[]", b"nope", b'{"session_id": ""}'):
        with pytest.raises(hooks.HookInputError):
            hooks.read_input(io.BytesIO(raw))
    assert hooks.read_input(io.BytesIO(b'{"session_id": "s"}')) == {"session_id": "s"}


def test_fit_keeps_the_budget() -> None:
    out = hooks.fit(["header", "a" * 500, "b" * 5000], 1000)
    assert len(out) <= 1000 and out.startswith("header\n\n" + "a" * 500) and out.endswith("…")


def test_assistant_text_reads_claude_code_and_codex_lines() -> None:
    claude = {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}}
    codex = {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                  "content": [{"type": "output_text", "text": "yo"}]}}
    assert stop.assistant_text(claude) == "hi" and stop.assistant_text(codex) == "yo"
    assert stop.assistant_text({"type": "user", "message": {"role": "user", "content": "x"}}) is None


def test_the_hook_fast_path_skips_argparse() -> None:
    import subprocess

    probe = ("import sys, io; sys.stdin = io.TextIOWrapper(io.BytesIO(b'{}')); "
             "from memoryd.cli.main import main; main(['hook', 'prompt', '--dry-run']); "
             "print('argparse' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0 and out.stderr.strip().splitlines()[-1] == "False"


def test_doctor_checks_the_hooks_init_wrote_and_a_broken_command(home: Path) -> None:
    from memoryd.cli import doctor

    clients.register_client("claude-code", False, out=io.StringIO(), python=sys.executable, hooks=True)
    found = {c.name: c for c in doctor.check_hooks()}
    assert found["hooks claude-code"].status == "ok", found
    settings = home / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace(sys.executable, "/nowhere/python"))
    found = {c.name: c for c in doctor.check_hooks()}
    assert found["hooks claude-code"].status == "fail" and "not resolvable" in found["hooks claude-code"].detail
