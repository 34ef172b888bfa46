"""config.yaml is optional; an unknown key or a bad value stops the daemon, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd import profiles
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


def test_the_tools_profile_defaults_to_core_and_takes_full(tmp_path: Path) -> None:
    assert Config().tools == "core"
    path = tmp_path / "config.yaml"
    path.write_text("tools: full\n")
    assert load(path).tools == "full"


@pytest.mark.parametrize("value", ["'Full'", "all", "''", "1", "true", "[core]", "null"])
def test_an_unknown_tools_profile_is_refused_naming_the_key_and_the_choices(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"tools: {value}\n")
    with pytest.raises(ConfigError, match=r"config key 'tools' must be one of core, full, got "):
        load(path)


@pytest.mark.parametrize("args, environ, chosen", [
    ([], {}, None),                                          # the daemon's config decides
    ([], {"MEMORYD_TOOLS": "full"}, "full"),
    (["--tools", "core"], {"MEMORYD_TOOLS": "full"}, "core"),  # the argument wins over the env var
    (["--tools=full"], {}, "full"),
    ([], {"MEMORYD_TOOLS": ""}, None),                       # set but empty: as if unset
])
def test_a_bridge_takes_its_profile_from_the_argument_then_the_env_var(
        args: list[str], environ: dict[str, str], chosen: str | None) -> None:
    assert profiles.for_bridge(args, environ) == chosen


@pytest.mark.parametrize("args, environ, named", [
    (["--tools", "Full"], {}, "--tools"),
    (["--tools=all"], {}, "--tools"),
    ([], {"MEMORYD_TOOLS": "most"}, "MEMORYD_TOOLS"),
    (["--tool", "full"], {}, "unexpected argument"),
    (["--tools"], {}, "unexpected argument"),
])
def test_a_bridge_refuses_an_unknown_profile_naming_where_it_came_from(
        args: list[str], environ: dict[str, str], named: str) -> None:
    with pytest.raises(profiles.ProfileError, match=named):
        profiles.for_bridge(args, environ)
