"""`memoryd init --client NAME`: registering the bridge in MCP clients' config files."""

from __future__ import annotations

import io
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.cli import clients

PY = "/opt/venv/bin/python"
BRIDGE = {"command": PY, "args": ["-m", "memoryd", "mcp"]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    return tmp_path


def init(name: str, print_only: bool = False, python: str = PY) -> tuple[int, str]:
    out = io.StringIO()
    code = clients.register_client(name, print_only, out=out, python=python)
    return code, out.getvalue()


def test_init_claude_code_adds_a_stdio_entry_running_the_bridge(home: Path) -> None:
    code, said = init("claude-code")

    assert code == 0 and "registered" in said
    config = json.loads((home / ".claude.json").read_text())
    assert config["mcpServers"]["memoryd"] == {"type": "stdio", **BRIDGE, "env": {}}


def test_a_new_config_file_is_created_private(home: Path) -> None:
    init("cursor")

    assert (home / ".cursor" / "mcp.json").stat().st_mode & 0o777 == 0o600


def test_init_twice_reports_already_registered_and_leaves_the_bytes_alone(home: Path) -> None:
    init("claude-code")
    path = home / ".claude.json"
    first = path.read_bytes()

    code, said = init("claude-code")

    assert code == 0 and "already registered" in said
    assert path.read_bytes() == first
    assert not path.with_name(".claude.json.bak").exists()


def test_init_keeps_unrelated_keys_and_other_servers(home: Path) -> None:
    path = home / ".claude.json"
    original = {"numStartups": 7, "projects": {"/w": {"x": 1}}, "mcpServers": {"other": {"command": "x"}}}
    path.write_text(json.dumps(original))

    init("claude-code")

    config = json.loads(path.read_text())
    assert config["numStartups"] == 7 and config["projects"] == {"/w": {"x": 1}}
    assert config["mcpServers"]["other"] == {"command": "x"}
    assert "memoryd" in config["mcpServers"]


def test_updating_a_stale_entry_keeps_a_backup_the_file_mode_and_the_users_env(home: Path) -> None:
    path = home / ".claude.json"
    old_entry = {"type": "stdio", "command": "/old/python", "args": ["-m", "memoryd", "mcp"],
                 "env": {"MEMORYD_HOME": "/data"}}
    stale = {"mcpServers": {"memoryd": old_entry}}
    path.write_text(json.dumps(stale))
    os.chmod(path, 0o640)
    before = path.read_bytes()

    code, said = init("claude-code")

    assert code == 0 and "updated" in said
    entry = json.loads(path.read_text())["mcpServers"]["memoryd"]
    assert entry["command"] == PY and entry["env"] == {"MEMORYD_HOME": "/data"}
    assert path.with_name(".claude.json.bak").read_bytes() == before
    assert path.stat().st_mode & 0o777 == 0o640


def test_init_refuses_a_config_that_is_not_json_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text("{not json")

    code, _ = init("cursor")

    assert code == 1
    assert "not valid JSON" in capsys.readouterr().err
    assert path.read_text() == "{not json"
    assert sorted(p.name for p in path.parent.iterdir()) == ["mcp.json"]


def test_unknown_client_exits_2_and_lists_the_known_ones(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = init("emacs")

    assert code == 2
    err = capsys.readouterr().err
    assert "'emacs'" in err
    for name in ("claude-code", "claude-desktop", "cursor", "codex"):
        assert name in err


def test_print_only_shows_the_entry_and_writes_nothing(home: Path) -> None:
    code, said = init("claude-desktop", print_only=True)

    assert code == 0
    assert str(home / ".config" / "Claude" / "claude_desktop_config.json") in said
    assert json.loads(said.split("\n", 1)[1])["mcpServers"]["memoryd"]["command"] == PY
    assert list(home.iterdir()) == []


def test_claude_desktop_config_lives_under_xdg_config_home_on_linux(home: Path) -> None:
    init("claude-desktop")

    config = json.loads((home / ".config" / "Claude" / "claude_desktop_config.json").read_text())
    assert config["mcpServers"]["memoryd"] == {**BRIDGE, "env": {}}


def test_claude_desktop_config_lives_under_application_support_on_macos(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")

    init("claude-desktop")

    assert (home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json").exists()


def test_init_writes_through_a_symlinked_config_instead_of_replacing_the_link(home: Path) -> None:
    real = home / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text("{}")
    (home / ".claude.json").symlink_to(real)

    init("claude-code")

    assert (home / ".claude.json").is_symlink()
    assert "memoryd" in json.loads(real.read_text())["mcpServers"]


CODEX_CONFIG = """\
model = "o4"  # keep this comment

[mcp_servers.other]
command = "other"
"""


def test_codex_init_appends_the_table_and_leaves_the_rest_untouched(home: Path) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_CONFIG)

    assert init("codex")[0] == 0

    text = path.read_text()
    assert text.startswith(CODEX_CONFIG)
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["memoryd"] == BRIDGE
    assert parsed["mcp_servers"]["other"] == {"command": "other"}


def test_codex_init_replaces_an_existing_table_instead_of_duplicating_it(home: Path) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    after = '\n[profiles.fast]\nmodel = "o4-mini"\n'
    path.write_text(
        CODEX_CONFIG + '\n[mcp_servers.memoryd]\ncommand = "/old/python"\nargs = ["-m", "memoryd", "mcp"]\n'
        "startup_timeout_sec = 20\n" + after
    )

    assert init("codex")[0] == 0

    text = path.read_text()
    assert text.count("[mcp_servers.memoryd]") == 1
    assert text.startswith(CODEX_CONFIG) and text.endswith(after)
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["memoryd"] == {**BRIDGE, "startup_timeout_sec": 20}
    assert parsed["profiles"] == {"fast": {"model": "o4-mini"}}
    assert path.with_name("config.toml.bak").exists()


def test_codex_init_twice_leaves_the_bytes_alone(home: Path) -> None:
    init("codex")
    path = home / ".codex" / "config.toml"
    first = path.read_bytes()

    code, said = init("codex")

    assert code == 0 and "already registered" in said
    assert path.read_bytes() == first


def test_codex_honours_codex_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(home / "codex-elsewhere"))

    init("codex")

    assert (home / "codex-elsewhere" / "config.toml").exists()


def test_codex_init_refuses_an_inline_definition_it_cannot_edit(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = '[mcp_servers]\nmemoryd = { command = "/old/python" }\n'
    path.write_text(original)

    assert init("codex")[0] == 1

    assert "by hand" in capsys.readouterr().err
    assert path.read_text() == original


def test_codex_paths_with_quotes_are_written_as_valid_toml(home: Path) -> None:
    init("codex", python='/opt/we"ird\\path/python')

    parsed = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert parsed["mcp_servers"]["memoryd"]["command"] == '/opt/we"ird\\path/python'


def test_client_config_status_reports_registration_and_stale_interpreters(home: Path) -> None:
    init("claude-code")
    init("codex", python="/old/python")

    rows = {row["client"]: row for row in clients.client_config_status(python=PY)}

    assert rows["claude-code"] == {"client": "claude-code", "path": str(home / ".claude.json"),
                                        "exists": True, "registered": True, "current": True, "error": None}
    assert rows["codex"]["registered"] and not rows["codex"]["current"]
    assert rows["cursor"]["exists"] is False and rows["cursor"]["registered"] is False


def test_client_config_status_reports_an_unreadable_config_instead_of_raising(home: Path) -> None:
    (home / ".claude.json").write_text("[1, 2]")

    row = next(r for r in clients.client_config_status(python=PY) if r["client"] == "claude-code")

    assert row["error"] and not row["registered"]
