"""`memoryd init --client NAME`: the MCP bridge in a client's config (cli/client_config.py) and, for
Claude Code and Codex, memoryd's hooks in its hook config (cli/client_hooks.py).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from memoryd.cli.client_config import (
    CLIENTS,
    ClientConfigError,
    client_config_status,
    config_target,
    register_bridge,
    snippet,
)
from memoryd.cli.client_hooks import (
    HOOK_CLIENTS,
    hook_groups,
    hooks_current,
    hooks_path,
    plugin_enabled,
    register_hooks,
)

__all__ = ["CLIENTS", "HOOK_CLIENTS", "client_config_status", "hooks_current", "register_client"]


def register_client(name: str, print_only: bool, out: TextIO | None = None, python: str | None = None,
                    hooks: bool = False) -> int:
    """Register the bridge (and with `hooks`, the hooks) for client `name`, run by `python` (default: this
    interpreter). Exit code: 0 done or printed; 1 a config that cannot be edited safely (nothing
    written); 2 an unknown client."""
    out = out or sys.stdout
    spec = CLIENTS.get(name)
    if spec is None:
        print(f"memoryd: unknown client {name!r}; known clients: {', '.join(CLIENTS)}", file=sys.stderr)
        return 2
    if name == "claude-code" and not print_only and plugin_enabled():
        print("claude-code: memoryd is installed as a Claude Code plugin (memoryd@…), which registers the bridge "
              "and the hooks; nothing written (uninstall the plugin to use settings files instead)", file=out)
        return 0
    entry = spec.entry(python or sys.executable)
    path = config_target(spec)
    wire_hooks = hooks and name in HOOK_CLIENTS
    if print_only:
        out.write(f"# {path}\n{snippet(spec, entry)}")
        if wire_hooks:
            groups = {"hooks": hook_groups(python or sys.executable, name)}
            out.write(f"# {hooks_path(name)} (merged)\n{json.dumps(groups, indent=2)}\n")
            if name == "codex":
                out.write(f"# {path} (also)\n[features]\ncodex_hooks = true\n")
        return 0
    try:
        code = register_bridge(spec, path, entry, out)
        if wire_hooks:
            register_hooks(name, python or sys.executable, out)
        elif hooks and name == "cursor":
            print("cursor: no hooks written (its hook events cannot add context; see README)", file=out)
        return code
    except (ClientConfigError, OSError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1

