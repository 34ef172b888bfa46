"""`memoryd init --client NAME`: the MCP bridge in a client's config (cli/client_config.py) and, for
Claude Code and Codex, memoryd's hooks in its hook config (~/.claude/settings.json, ~/.codex/hooks.json),
merged beside the user's own; the plugin's files; what `memoryd doctor` finds.
Import contract: stdlib, `cli.client_config` (its file reads and atomic writes) and `hooks.table`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from memoryd.cli import client_config
from memoryd.cli.client_config import CLIENTS, ClientConfigError, client_config_status
from memoryd.hooks import table

__all__ = ["CLIENTS", "HOOK_CLIENTS", "client_config_status", "hooks_current", "register_client"]

# Cursor is not wired: its prompt hook can only continue or stop the prompt (no context to add), and
# released builds have rejected its sessionStart event as an unknown hook type.

HOOK_MARK = " -m memoryd hook "
HOOK_CLIENTS = set(table.CLIENTS)  # the events, their names per client, matchers and timeouts: hooks/table.py


def _claude_settings_path() -> Path:
    return Path.home() / ".claude" / "settings.json"


def _groups(client: str, command: Callable[[str], str]) -> dict[str, list[dict[str, Any]]]:
    """One group per event of the table `client` has, with its tool matcher where it has one."""
    return {row.clients[client]: [{**({"matcher": row.matchers[client]} if client in row.matchers else {}),
                                   "hooks": [{"type": "command", "command": command(row.verb),
                                              "timeout": row.timeout_s}]}]
            for row in table.client_hooks(client)}


def hook_groups(python: str, client: str) -> dict[str, list[dict[str, Any]]]:
    import shlex

    extra = " --client codex" if client == "codex" else ""
    return _groups(client, lambda verb: f"{shlex.quote(python)}{HOOK_MARK}{verb}{extra}")


# The Claude Code plugin (`plugin/`) runs the `memoryd` on PATH through this runner; its files are held
# equal to what these functions make by tests/integration/test_plugin.py.
PLUGIN_RUNNER = "${CLAUDE_PLUGIN_ROOT}/bin/memoryd"


def plugin_hooks() -> dict[str, Any]:
    """The plugin's hooks/hooks.json: `init`'s Claude Code hooks with `--from-plugin` (they stand down
    where `init` registered them too)."""
    groups = _groups("claude-code", lambda verb: f'"{PLUGIN_RUNNER}" hook {verb} --from-plugin')
    return {"description": "memoryd's hooks: recall at session start, on prompts and before tools; "
                           "last words at stop and session end", "hooks": groups}


def plugin_enabled() -> bool:
    """Whether Claude Code's user settings enable a memoryd plugin (then `init` writes nothing)."""
    try:
        data = client_config.read_object(client_config.resolved(_claude_settings_path()))
    except (ClientConfigError, OSError):
        return False
    enabled = data.get("enabledPlugins")
    return isinstance(enabled, dict) and any(k.startswith("memoryd@") and v is True for k, v in enabled.items())


def plugin_mcp() -> dict[str, Any]:
    return {"mcpServers": {"memoryd": {"command": PLUGIN_RUNNER, "args": ["mcp"]}}}


def hooks_path(client: str) -> Path:
    codex_hooks = client_config.codex_path().parent / "hooks.json"
    return client_config.resolved(_claude_settings_path() if client == "claude-code" else codex_hooks)


def _is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and HOOK_MARK in str(handler.get("command", ""))


def _read_hooks_file(path: Path) -> dict[str, Any]:
    data = client_config.read_object(path)
    if not isinstance(data.get("hooks", {}), dict):
        raise ClientConfigError(f'{path}: not a JSON object with a "hooks" object')
    return data


def merged_hooks(data: dict[str, Any], wanted: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`data` with memoryd's handlers replaced by `wanted`; every other hook kept in place."""
    hooks = dict(data.get("hooks") or {})
    for event in [*hooks, *(e for e in wanted if e not in hooks)]:  # stable order: a diff stays small
        current = hooks.get(event)
        kept = []
        for group in current if isinstance(current, list) else []:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                others = [h for h in group["hooks"] if not _is_ours(h)]
                if not others and any(_is_ours(h) for h in group["hooks"]):
                    continue  # a group that held only our handler goes with it
                group = {**group, "hooks": others}
            kept.append(group)
        kept += wanted.get(event, [])
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
    return {**data, "hooks": hooks}


def hooks_current(client: str, python: str | None = None) -> dict[str, Any]:
    """{path, present, current, commands, error} for `memoryd doctor`: `present` says some memoryd
    handler is registered, `current` that exactly what `init` would write now is there."""
    path = hooks_path(client)
    row: dict[str, Any] = {"path": str(path), "present": False, "current": False, "commands": [], "error": None}
    try:
        data = _read_hooks_file(path)
    except (ClientConfigError, OSError) as exc:
        row["error"] = str(exc)
        return row
    ours = [h["command"] for groups in (data.get("hooks") or {}).values() if isinstance(groups, list)
            for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if _is_ours(h)]
    row.update(present=bool(ours), commands=ours)
    row["current"] = merged_hooks(data, hook_groups(python or sys.executable, client)) == data
    return row


def register_hooks(client: str, python: str, out: TextIO) -> None:
    """Merge memoryd's hooks into the client's hook config (idempotent, `<file>.bak` kept)."""
    path = hooks_path(client)
    data = _read_hooks_file(path)
    merged = merged_hooks(data, hook_groups(python, client))
    if merged == data:
        print(f"{client}: memoryd hooks already in {path}", file=out)
    else:
        client_config.write_config(path, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
        print(f"{client}: memoryd hooks written to {path} ({', '.join(hook_groups(python, client))})", file=out)
    if client == "codex":
        client_config.enable_codex_hooks(out)


def register_client(name: str, print_only: bool, out: TextIO | None = None, python: str | None = None,
                    hooks: bool = False) -> int:
    """Register the bridge (and with `hooks`, the hooks) for client `name`, run by `python` (default: this interpreter).
    Exit code: 0 done or printed; 1 a config that cannot be edited safely (nothing written); 2 an unknown client."""
    out = out or sys.stdout
    spec = CLIENTS.get(name)
    if spec is None:
        print(f"memoryd: unknown client {name!r}; known clients: {', '.join(CLIENTS)}", file=sys.stderr)
        return 2
    if name == "claude-code" and not print_only and plugin_enabled():
        print("claude-code: memoryd is installed as a Claude Code plugin (memoryd@…), which registers the bridge "
              "and the hooks; nothing written (uninstall the plugin to use settings files instead)", file=out)
        return 0
    python = python or sys.executable
    entry = spec.entry(python)
    path = client_config.resolved(spec.config_path())
    wire_hooks = hooks and name in HOOK_CLIENTS
    if print_only:
        out.write(f"# {path}\n{client_config.snippet(spec, entry)}")
        if wire_hooks:
            groups = json.dumps({"hooks": hook_groups(python, name)}, indent=2)
            out.write(f"# {hooks_path(name)} (merged)\n{groups}\n")
            if name == "codex":
                out.write(f"# {path} (also)\n[features]\ncodex_hooks = true\n")
        return 0
    try:
        code = client_config.register_bridge(spec, path, entry, out)
        if wire_hooks:
            register_hooks(name, python, out)
        elif hooks and name == "cursor":
            print("cursor: no hooks written (its hook events cannot add context; see README)", file=out)
        return code
    except (ClientConfigError, OSError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1

