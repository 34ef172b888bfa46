from __future__ import annotations

import subprocess
import sys
import tempfile
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


@pytest.fixture
def remote() -> Iterator[Path]:
    """A bare git repository on disk whose branch is `main`, for sync tests (tests/synckit.py)."""
    base = Path(tempfile.mkdtemp(prefix="mdr", dir="/tmp"))
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(base / "remote.git")], check=True)
    yield base / "remote.git"
    subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.fixture
def pair() -> Iterator[tuple[Env, Env]]:
    """Two throwaway stores: two machines for sync tests."""
    a, b = Env(), Env()
    try:
        yield a, b
    finally:
        a.cleanup()
        b.cleanup()


@pytest.fixture(scope="module")
def daemon_env() -> Iterator[Env]:
    """One daemon a whole module shares (the web view's tests start a `memoryd ui` per test)."""
    env = Env()
    try:
        env.start_daemon()
        yield env
    finally:
        env.cleanup()
