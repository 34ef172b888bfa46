"""What every sync test needs besides its bare remote (the `remote` fixture, tests/conftest.py):
a store that syncs to it, its tools and its syncs. Shared by tests/integration/test_sync.py and
the hostile-remote tests in tests/reliability/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import Env
from memoryd.client.connection import Operator


def operator(env: Env) -> Operator:
    return Operator("memoryd-cli", endpoint=env.wait_ready()["endpoint"])


def tool(env: Env, name: str, **args: Any) -> dict[str, Any]:
    op = operator(env)
    try:
        return op.tool(name, **args)
    finally:
        op.close()


def synced(env: Env) -> dict[str, Any]:
    """One `memoryd sync --json` that must succeed; its summary."""
    done = env.memoryd("sync", "--json", timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def set_up(env: Env, remote: Path) -> None:
    """Start `env`'s daemon and point it at `remote` (`memoryd sync init`)."""
    env.start_daemon()
    done = env.memoryd("sync", "init", str(remote), timeout=120)
    assert done.returncode == 0, done.stderr
