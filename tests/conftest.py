from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Env  # noqa: E402


@pytest.fixture
def env() -> Iterator[Env]:
    """A throwaway store; every process started under it is killed at teardown."""
    e = Env()
    try:
        yield e
    finally:
        e.cleanup()


@pytest.fixture
def daemon(env: Env) -> Env:
    """A real daemon running on `env`'s store."""
    env.start_daemon()
    return env


@pytest.fixture
def served(daemon: Env) -> Env:
    """The same as `daemon` (its exit is reaped by the harness)."""
    return daemon
