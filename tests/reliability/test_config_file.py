"""config.yaml: optional; what it takes and what it refuses, naming the key (docs/storage.md, the
config table), and where a bridge takes its tool profile from.

In process: a missing file gives the defaults, known keys override them, an unknown key or a bad
value is a `ConfigError` naming the key. Real daemons: each bad config (NaN, a 1 µs heartbeat, TTLs
of 10^15, out-of-range hook keys, a non-UTF-8 file) stops `memoryd serve` with exit 2 and one line
naming the key and its range — no traceback, no status file, nothing written to the store. The
largest accepted TTL works end to end: a pending write answers with its expiry instead of an
internal error after logging itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import Env, call
from memoryd import profiles
from memoryd.config import RANGES, Config, ConfigError, load

# -- loading, in process ------------------------------------------------------------------------

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


def test_every_numeric_key_has_a_finite_range() -> None:
    from dataclasses import fields

    numeric = {f.name for f in fields(Config) if f.type in ("int", "float")}
    assert numeric == set(RANGES), numeric ^ set(RANGES)
    for lo, hi in RANGES.values():
        assert 0 <= lo < hi < 10**9


# -- a real daemon's start ------------------------------------------------------------------------

CONFIG_ERROR = 2  # the daemon's exit code for a config it refuses

BAD = [
    ("episode_ttl_dayz: 3\n", "episode_ttl_dayz", "unknown config key"),
    ("dedup_duplicate: .nan\n", "dedup_duplicate", "finite"),
    ("hook_prompt_min_relevance: .nan\n", "hook_prompt_min_relevance", "finite"),
    ("heartbeat_seconds: .inf\n", "heartbeat_seconds", "finite"),
    ("heartbeat_seconds: 0.000001\n", "heartbeat_seconds", "between"),
    ("episode_ttl_days: 1000000000000000\n", "episode_ttl_days", "between"),
    ("pending_ttl_seconds: 1000000000000000\n", "pending_ttl_seconds", "between"),
    ("verification_stale_days: 1.0e+300\n", "verification_stale_days", "between"),
    ("episode_ttl_days: 1.5\n", "episode_ttl_days", "whole number"),
    ("episode_ttl_days: 1" + "0" * 400 + "\n", "episode_ttl_days", "between"),
    ("max_content_bytes: 1000000000000\n", "max_content_bytes", "between"),
    ("max_scopes_per_write: 0\n", "max_scopes_per_write", "between"),
    ("hook_prompt_max_hits: 1000\n", "hook_prompt_max_hits", "between"),
    ("hook_prompt_chars: 20000\n", "hook_prompt_chars", "between"),
    ("hook_last_words: 1\n", "hook_last_words", "true or false"),
]


def serve_refused(env: Env, text: bytes) -> str:
    Path(env.vars["MEMORYD_CONFIG"]).write_bytes(text)
    done = subprocess.run([sys.executable, "-m", "memoryd", "serve"], env=env.environ(), check=False,
                          capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == CONFIG_ERROR, out
    assert "Traceback" not in out, out
    assert env.status() is None
    assert not (env.home / "events").exists() or not any((env.home / "events").iterdir()), "a refused start wrote"
    return out


@pytest.mark.parametrize(("text", "key", "why"), BAD, ids=[b[1] + ":" + b[0].split(": ")[1].strip()[:20] for b in BAD])
def test_a_bad_value_is_refused_at_start_naming_the_key(env: Env, text: str, key: str, why: str) -> None:
    out = serve_refused(env, text.encode())
    assert f"'{key}'" in out and why in out, out


def test_a_config_that_is_not_utf8_is_refused_without_a_traceback(env: Env) -> None:
    out = serve_refused(env, b"episode_ttl_days: 7\n# caf\xe9 \xff\xfe\n")
    assert "not UTF-8" in out and "config.yaml" in out, out


def test_the_largest_pending_ttl_works_end_to_end(env: Env) -> None:
    Path(env.vars["MEMORYD_CONFIG"]).write_text(f"pending_ttl_seconds: {int(RANGES['pending_ttl_seconds'][1])}\n")
    env.start_daemon()
    out: dict[str, Any] = {}

    async def main() -> None:
        async with env.session(MEMORYD_WORKTREE="/w/config") as s:
            out["pending"] = await call(s, "memory_write", scopes=["projects:config"],
                                        content="The user prefers rebases over merge commits.",
                                        category="user-inference")
            out["confirmed"] = await call(s, "memory_write_confirm", pending_id=out["pending"]["pending_id"])
    anyio.run(main)
    assert out["pending"]["status"] == "pending" and out["pending"]["expires_at"] > "2026"
    assert out["confirmed"]["status"] == "committed"


# -- a bridge's tool profile ----------------------------------------------------------------------

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
