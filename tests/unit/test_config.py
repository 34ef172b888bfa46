"""config.yaml is optional; an unknown key or a bad value stops the daemon, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.config import Config, ConfigError, load


def test_a_missing_config_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load(tmp_path / "absent.yaml") == Config()


def test_known_keys_override_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("episode_ttl_days: 7\nrequire_write_confirmation: true\n")
    config = load(path)
    assert config.episode_ttl_days == 7 and config.require_write_confirmation is True


@pytest.mark.parametrize("text, key", [
    ("episode_tll_days: 7\n", "episode_tll_days"),
    ("heartbeat_seconds: -1\n", "heartbeat_seconds"),
    ("require_write_confirmation: 'yes'\n", "require_write_confirmation"),
    ("dedup_duplicate: 2\n", "dedup_duplicate"),
    ("max_content_bytes: 1.5\n", "max_content_bytes"),
])
def test_an_unknown_key_or_bad_value_is_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key):
        load(path)


def test_a_config_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load(path)
