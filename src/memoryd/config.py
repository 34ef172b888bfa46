"""Daemon settings: defaults, overridden by `config.yaml` (see docs/storage.md). Fail closed."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config file the daemon refuses to start with; the message names the key."""


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
    # Client hooks (`memoryd hook EVENT`, README "Automatic recall"): context budgets in chars,
    # the prompt hook's hit cap and relevance floor, and the last-words fallback handoff.
    hook_session_start_chars: int = 3000
    hook_prompt_chars: int = 1500
    hook_prompt_max_hits: int = 3
    hook_prompt_min_relevance: float = 0.6
    hook_last_words: bool = True


# Claude Code truncates hook context above 10,000 chars; a budget above it would be cut blind.
MAX_HOOK_CHARS = 10_000


def _check_value(name: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"config key '{name}' must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"config key '{name}' must be a number, got {value!r}")
    if isinstance(default, int) and not isinstance(default, bool) and not float(value).is_integer():
        raise ConfigError(f"config key '{name}' must be a whole number, got {value!r}")
    if value <= 0:
        raise ConfigError(f"config key '{name}' must be positive, got {value!r}")
    if (name.startswith("dedup_") or name.endswith("_relevance")) and value > 1:
        raise ConfigError(f"config key '{name}' must be between 0 and 1, got {value!r}")
    if name.endswith("_chars") and value > MAX_HOOK_CHARS:
        raise ConfigError(f"config key '{name}' must be at most {MAX_HOOK_CHARS}, got {value!r}")
    return type(default)(value)


def from_mapping(raw: dict[str, Any]) -> Config:
    known = {f.name: f.default for f in fields(Config)}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in known:
            raise ConfigError(f"unknown config key '{name}' (known: {', '.join(sorted(known))})")
        values[name] = _check_value(name, known[name], value)
    config = Config(**values)
    if config.dedup_related >= config.dedup_duplicate:
        raise ConfigError("config key 'dedup_related' must be below 'dedup_duplicate'")
    return config


def load(path: Path) -> Config:
    """Defaults when `path` is absent; otherwise its keys, each checked."""
    if not path.exists():
        return Config()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"config file {path} does not parse: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must be a mapping of keys to values")
    return from_mapping(raw)
