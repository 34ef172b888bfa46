"""Issue 10, defect 7: the config refuses what it should, at start, naming the key.

Real daemons: each bad config (NaN, a 1 µs heartbeat, TTLs of 10^15, out-of-range hook keys, a
non-UTF-8 file) stops `memoryd serve` with exit 2 and one line naming the key and its range — no
traceback, no status file, nothing written to the store. The largest accepted TTL works end to end:
a pending write answers with its expiry instead of an internal error after logging itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import Env, call

from memoryd.config import RANGES

CONFIG_ERROR = 2  # the daemon's exit code for a config it refuses

BAD = [
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


def test_every_numeric_key_has_a_finite_range() -> None:
    from dataclasses import fields

    from memoryd.config import Config

    numeric = {f.name for f in fields(Config) if f.type in ("int", "float")}
    assert numeric == set(RANGES), numeric ^ set(RANGES)
    for lo, hi in RANGES.values():
        assert 0 <= lo < hi < 10**9


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
