"""Daemon settings: defaults, overridden by `config.yaml` (every key: docs/storage.md). Fail closed."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memoryd import profiles


class ConfigError(ValueError):
    """A config file the daemon refuses to start with; the message names the key."""


SESSION_MIN_FULL_CHARS = 300  # less of a session's context budget left: the prompt hook points instead


@dataclass(frozen=True)
class Config:
    episode_ttl_days: int = 30
    pending_ttl_seconds: int = 3600
    heartbeat_seconds: float = 5.0
    verification_stale_days: int = 30
    require_write_confirmation: bool = False
    max_content_bytes: int = 1_000_000
    max_takeaway_bytes: int = 4096
    max_scopes_per_write: int = 64
    dedup_duplicate: float = 0.75
    dedup_related: float = 0.40
    hook_session_start_chars: int = 3000
    hook_prompt_chars: int = 1500
    hook_prompt_max_hits: int = 3
    hook_prompt_min_relevance: float = 0.6
    hook_prompt_min_similarity: float = 0.6  # floors fit on the tune split (docs/search.md)
    hook_prompt_min_both: float = 0.4
    hook_prompt_max_pointers: int = 1
    hook_pointer_min_similarity: float = 0.5
    hook_pointer_min_relevance: float = 1.1  # off: words alone never made a pointer pay on the tune split
    hook_pointer_depth: int = 1
    hook_pointer_follow_similarity: float = 0.35
    hook_tool_min_similarity: float = 0.75
    hook_tool_pointer_similarity: float = 0.60
    hook_session_chars: int = 4000
    hook_last_words: bool = True
    sync_interval_seconds: int = 0
    search_by_meaning: bool = True
    tools: str = profiles.DEFAULT

    def hook_settings(self) -> dict[str, Any]:
        """The `hook_*` keys but `hook_session_chars`, unprefixed: what a hook process and `memoryd eval` use."""
        return {f.name.removeprefix("hook_"): getattr(self, f.name) for f in fields(self)
                if f.name.startswith("hook_") and f.name != "hook_session_chars"}


DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Config)}
# Claude Code truncates hook context above 10,000 chars; a budget above it would be cut blind.
MAX_HOOK_CHARS = 10_000
DAY_S = 86_400
# Every numeric key's closed range, in its own unit. Bounded on purpose: a TTL of 10^15 s overflows
# the date arithmetic, a heartbeat of 1 µs spins the loop, NaN passes every `<` test.
RANGES: dict[str, tuple[float, float]] = {
    "episode_ttl_days": (1, 3650), "pending_ttl_seconds": (1, 30 * DAY_S),
    "heartbeat_seconds": (0.1, 300),  # liveness and restart grace are 3x this
    "verification_stale_days": (1, 3650), "max_takeaway_bytes": (16, 65_536),
    "max_content_bytes": (1024, 4_000_000),  # stays under the wire's 4 MiB frame
    "max_scopes_per_write": (1, 64),  # the tools' schemas allow at most 64
    "dedup_duplicate": (0.01, 1.0), "dedup_related": (0.01, 1.0),
    "hook_session_start_chars": (100, MAX_HOOK_CHARS), "hook_prompt_chars": (100, MAX_HOOK_CHARS),
    "hook_prompt_max_hits": (1, 20), "hook_prompt_min_relevance": (0.0, 1.0),
    "hook_prompt_min_similarity": (0.0, 1.0), "hook_prompt_min_both": (0.0, 1.0),
    "hook_prompt_max_pointers": (0, 5), "hook_pointer_min_similarity": (0.0, 1.1),
    "hook_pointer_min_relevance": (0.0, 1.1), "hook_pointer_depth": (1, 10),
    "hook_pointer_follow_similarity": (0.0, 1.1), "hook_tool_min_similarity": (0.0, 1.1),
    "hook_tool_pointer_similarity": (0.0, 1.1), "hook_session_chars": (500, 100_000),
    "sync_interval_seconds": (0, 7 * DAY_S),  # off .. once a week
}
CHOICES: dict[str, tuple[str, ...]] = {"tools": profiles.PROFILES}  # every string key's choices


def _check_value(name: str, value: Any) -> Any:
    """`value` as the key's type, or `ConfigError` naming the key and its range (or choices)."""
    if name not in DEFAULTS:
        raise ConfigError(f"unknown config key '{name}' (known: {', '.join(sorted(DEFAULTS))})")
    default = DEFAULTS[name]
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    if isinstance(default, str):
        if value not in CHOICES[name]:
            raise ConfigError(f"config key '{name}' must be one of {', '.join(CHOICES[name])}, got {shown}")
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"config key '{name}' must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"config key '{name}' must be a number, got {value!r}")
    # Floats only: an int is always finite, and float() of a 400-digit int would overflow.
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config key '{name}' must be a finite number, got {value!r}")
    if isinstance(default, int) and isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"config key '{name}' must be a whole number, got {value!r}")
    lo, hi = RANGES[name]
    if not lo <= value <= hi:
        raise ConfigError(f"config key '{name}' must be between {lo:g} and {hi:g}, got {shown}")
    return type(default)(value)


def from_mapping(raw: dict[str, Any]) -> Config:
    config = Config(**{name: _check_value(name, value) for name, value in raw.items()})
    if config.dedup_related >= config.dedup_duplicate:
        raise ConfigError("config key 'dedup_related' must be below 'dedup_duplicate'")
    return config


def load(path: Path) -> Config:
    """Defaults when `path` is absent, else its keys, each checked; anything wrong is a `ConfigError`."""
    if not path.exists():
        return Config()
    import yaml  # here: without a config file the daemon's start skips it (docs/benchmark.md)

    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start}): {exc.reason}") from exc
    except (OSError, yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigError(f"config file {path} does not parse: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must be a mapping of keys to values")
    return from_mapping(raw)
