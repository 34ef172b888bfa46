"""The plugin's hooks read ~/.claude/settings.json to stand down where `init` wrote hooks
(hooks/common.settings_register_hooks). That file is not ours: a FIFO must not hang the hook, a link
is not followed, and at most MAX_SETTINGS_BYTES are read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.hooks import common as hooks

MARK = '{"hooks": {"SessionStart": [{"hooks": [{"command": "python -m memoryd hook session-start"}]}]}}'


@pytest.fixture
def claude_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".claude").mkdir()
    return tmp_path / ".claude"


def test_init_hooks_in_a_plain_file_are_seen(claude_dir: Path) -> None:
    (claude_dir / "settings.json").write_text(MARK)
    assert hooks.settings_register_hooks()


def test_a_fifo_a_link_or_a_missing_file_say_no_without_hanging(claude_dir: Path, tmp_path: Path) -> None:
    assert not hooks.settings_register_hooks()  # missing
    os.mkfifo(claude_dir / "settings.json")
    assert not hooks.settings_register_hooks()  # a FIFO with no writer: read at once, empty
    (claude_dir / "settings.json").unlink()
    (tmp_path / "elsewhere.json").write_text(MARK)
    (claude_dir / "settings.json").symlink_to(tmp_path / "elsewhere.json")
    assert not hooks.settings_register_hooks()  # never followed


def test_only_the_bounded_head_is_read(claude_dir: Path) -> None:
    (claude_dir / "settings.json").write_text(" " * hooks.MAX_SETTINGS_BYTES + MARK)
    assert not hooks.settings_register_hooks()
