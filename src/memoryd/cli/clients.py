"""Register the memoryd MCP bridge in AI clients' config files (`memoryd init --client NAME`).

Import contract: stdlib and `memoryd.fsio`. Every client gets the same stdio server, `<python> -m memoryd mcp`.
Registration is idempotent: an identical entry is left alone (no rewrite), a different one is
replaced, everything else in the file is kept, and the previous file is saved as `<file>.bak`.
JSON configs are rewritten whole; the Codex TOML config is edited textually, one table only,
because the stdlib can read TOML but not write it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from memoryd import fsio

SERVER_NAME = "memoryd"
BRIDGE_ARGS = ["-m", "memoryd", "mcp"]
NEW_CONFIG_MODE = 0o600  # client configs can hold API tokens; never create them readable by others


class ClientConfigError(RuntimeError):
    """A client config file memoryd will not touch (unparsable, or shaped unexpectedly)."""


@dataclass(frozen=True)
class ClientSpec:
    """One MCP client: where its config lives, its format, and the entry that registers memoryd.

    `entry` gives the keys memoryd owns (command, args, ...); keys a user added beside them,
    such as "env", are kept when the entry is updated.
    """

    name: str
    config_path: Callable[[], Path]
    format: Literal["json", "toml"]
    entry: Callable[[str], dict[str, Any]]


def _xdg_config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _claude_code_path() -> Path:
    return Path.home() / ".claude.json"


def _claude_desktop_path() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    return _xdg_config_home() / "Claude" / "claude_desktop_config.json"


def _cursor_path() -> Path:
    return Path.home() / ".cursor" / "mcp.json"


def _codex_path() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


def _stdio_entry(python: str) -> dict[str, Any]:
    return {"command": python, "args": list(BRIDGE_ARGS)}


def _typed_stdio_entry(python: str) -> dict[str, Any]:
    # Claude Code writes "type" into the entries it creates itself; matching it keeps them equal.
    return {"type": "stdio", **_stdio_entry(python)}


CLIENTS: dict[str, ClientSpec] = {
    spec.name: spec
    for spec in (
        ClientSpec("claude-code", _claude_code_path, "json", _typed_stdio_entry),
        ClientSpec("claude-desktop", _claude_desktop_path, "json", _stdio_entry),
        ClientSpec("cursor", _cursor_path, "json", _stdio_entry),
        ClientSpec("codex", _codex_path, "toml", _stdio_entry),
    )
}


# ---- JSON clients: {"mcpServers": {"memoryd": {...}}} ----


def _read_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path` ({} when absent); ClientConfigError naming the file otherwise."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ClientConfigError(f"{path} is not valid JSON ({exc}); fix or move it, then rerun") from None
    if not isinstance(data, dict):
        raise ClientConfigError(f"{path} does not hold a JSON object at the top level")
    return data


def _read_json(path: Path) -> dict[str, Any]:
    data = _read_object(path)
    if not isinstance(data.get("mcpServers", {}), dict):
        raise ClientConfigError(f'{path}: "mcpServers" is not an object')
    return data


def _json_current_entry(path: Path) -> Any:
    return _read_json(path).get("mcpServers", {}).get(SERVER_NAME)


def _json_full_entry(current: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` over what the user already had; a new entry gets an empty "env" to fill in."""
    return {"env": {}} | (current if isinstance(current, dict) else {}) | entry


def _json_with_entry(path: Path, entry: dict[str, Any]) -> str:
    data = _read_json(path)
    servers = data.setdefault("mcpServers", {})
    servers[SERVER_NAME] = _json_full_entry(servers.get(SERVER_NAME), entry)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _json_snippet(entry: dict[str, Any]) -> str:
    snippet = {"mcpServers": {SERVER_NAME: _json_full_entry(None, entry)}}
    return json.dumps(snippet, indent=2, ensure_ascii=False) + "\n"


# ---- Codex: a [mcp_servers.memoryd] table in TOML ----

_TABLE_HEADER = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(memoryd|"memoryd"|'memoryd')\s*\]\s*(#.*)?$""")
_ANY_HEADER = re.compile(r"^\s*\[")


def _toml_string(value: str) -> str:
    # A JSON string with non-ASCII left as is is also a valid TOML basic string.
    return json.dumps(value, ensure_ascii=False)


def _toml_key_lines(entry: dict[str, Any]) -> list[str]:
    def render(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(_toml_string(item) for item in value) + "]"
        return _toml_string(value)

    return [f"{key} = {render(value)}\n" for key, value in entry.items()]


def _toml_table(entry: dict[str, Any]) -> str:
    return f"[mcp_servers.{SERVER_NAME}]\n" + "".join(_toml_key_lines(entry))


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.exists():
        return "", {}
    text = path.read_text(encoding="utf-8")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClientConfigError(f"{path} is not valid TOML ({exc}); fix or move it, then rerun") from None


def _toml_current_entry(path: Path) -> Any:
    servers = _read_toml(path)[1].get("mcp_servers", {})
    return servers.get(SERVER_NAME) if isinstance(servers, dict) else None


def _replace_toml_table(text: str, entry: dict[str, Any]) -> str:
    """`text` with the keys of `entry` set in its [mcp_servers.memoryd] table, or the table appended.

    Only the lines of those keys change; other keys, comments and sub-tables such as
    [mcp_servers.memoryd.env] are left as they were.
    """
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _TABLE_HEADER.match(line)), None)
    if start is None:
        separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        return text + separator + _toml_table(entry)
    end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
    if not lines[start].endswith("\n"):
        lines[start] += "\n"
    owned = re.compile(rf"^\s*({'|'.join(map(re.escape, entry))})\s*=")
    kept = [line for line in lines[start + 1:end] if not owned.match(line)]
    return "".join(lines[: start + 1] + _toml_key_lines(entry) + kept + lines[end:])


def _toml_with_entry(path: Path, entry: dict[str, Any]) -> str:
    text, _ = _read_toml(path)
    new_text = _replace_toml_table(text, entry)
    # The edit is textual, so check it the only way the stdlib allows: parse the result.
    try:
        written = tomllib.loads(new_text).get("mcp_servers", {}).get(SERVER_NAME)
    except tomllib.TOMLDecodeError as exc:
        written, reason = None, f"the edited file would not parse: {exc}"
    else:
        reason = "mcp_servers.memoryd is defined in a form this tool cannot edit"
    if not _entry_matches(written, entry):
        raise ClientConfigError(
            f"{path}: {reason}; add the table by hand (`memoryd init --client codex --print` shows it)"
        )
    return new_text


# ---- shared ----


def _current_entry(spec: ClientSpec, path: Path) -> Any:
    return _json_current_entry(path) if spec.format == "json" else _toml_current_entry(path)


def _entry_matches(current: Any, wanted: dict[str, Any]) -> bool:
    """True when `current` carries every key of `wanted` unchanged (keys the user added are fine)."""
    return isinstance(current, dict) and all(current.get(k) == v for k, v in wanted.items())


# What this process wrote to each file: a second write of one command (Codex: the bridge entry,
# then the hooks feature flag, both in config.toml) must not back up memoryd's own first write
# over the user's original in `<file>.bak`.
_WRITTEN: dict[Path, str] = {}


def _atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename, keeping its mode and, unless the file is still
    what this process wrote, a copy of it at `<path>.bak`."""
    mode = NEW_CONFIG_MODE
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if _WRITTEN.get(path) != path.read_text(encoding="utf-8", errors="replace"):
            shutil.copy2(path, path.with_name(path.name + ".bak"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fsio.replace_atomic(path, text.encode(), mode)
    _WRITTEN[path] = text


def _config_target(spec: ClientSpec) -> Path:
    # Dotfile managers symlink these files; replace the file they point at, not the link.
    path = spec.config_path()
    return path.resolve() if path.is_symlink() else path


def register_client(name: str, print_only: bool, out: TextIO | None = None, python: str | None = None,
                    hooks: bool = False) -> int:
    """Register the memoryd bridge in client `name`'s MCP config; returns the exit code.

    0: registered, updated, already registered, or (with `print_only`) the entry was printed and
    nothing written. 1: the config exists but cannot be edited safely (nothing written).
    2: unknown client name (the message lists the known ones). `python` defaults to this
    interpreter, the one whose environment has memoryd installed. With `hooks`, Claude Code and
    Codex also get memoryd's hooks merged into their hook config (README "Automatic recall").
    """
    out = out or sys.stdout
    spec = CLIENTS.get(name)
    if spec is None:
        print(f"memoryd: unknown client {name!r}; known clients: {', '.join(CLIENTS)}", file=sys.stderr)
        return 2
    entry = spec.entry(python or sys.executable)
    path = _config_target(spec)
    wire_hooks = hooks and name in HOOK_CLIENTS
    if print_only:
        snippet = _json_snippet(entry) if spec.format == "json" else _toml_table(entry)
        out.write(f"# {path}\n{snippet}")
        if wire_hooks:
            groups = {"hooks": hook_groups(python or sys.executable, name)}
            out.write(f"# {hooks_path(name)} (merged)\n{json.dumps(groups, indent=2)}\n")
            if name == "codex":
                out.write(f"# {path} (also)\n[features]\ncodex_hooks = true\n")
        return 0
    try:
        code = _register(spec, path, entry, out)
        if wire_hooks:
            register_hooks(name, python or sys.executable, out)
        elif hooks and name == "cursor":
            print("cursor: no hooks written (its hook events cannot add context; see README)", file=out)
        return code
    except (ClientConfigError, OSError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1


def _register(spec: ClientSpec, path: Path, entry: dict[str, Any], out: TextIO) -> int:
    current = _current_entry(spec, path)
    if _entry_matches(current, entry):
        print(f"{spec.name}: memoryd already registered in {path}", file=out)
        return 0
    text = _json_with_entry(path, entry) if spec.format == "json" else _toml_with_entry(path, entry)
    _atomic_write(path, text)
    verb = "updated" if current is not None else "registered"
    print(f"{spec.name}: memoryd {verb} in {path}; restart {spec.name} to load it", file=out)
    return 0


def client_config_status(python: str | None = None) -> list[dict[str, Any]]:
    """Per client: {client, path, exists, registered, current, error} for `memoryd doctor`.

    `current` says the entry matches what `init` would write now (same interpreter); `error`
    is a message when the config cannot be read, else None.
    """
    wanted_python = python or sys.executable
    rows = []
    for spec in CLIENTS.values():
        path = spec.config_path()
        row: dict[str, Any] = {"client": spec.name, "path": str(path), "exists": path.exists(),
                               "registered": False, "current": False, "error": None}
        try:
            current = _current_entry(spec, path)
        except (ClientConfigError, OSError) as exc:
            row["error"] = str(exc)
        else:
            row["registered"] = current is not None
            row["current"] = _entry_matches(current, spec.entry(wanted_python))
        rows.append(row)
    return rows


# ---- hooks (README "Automatic recall") ----
#
# Claude Code reads hooks from ~/.claude/settings.json and Codex from ~/.codex/hooks.json (same
# shape: event -> matcher groups -> command handlers; Codex also needs `[features] codex_hooks =
# true` in config.toml and has no SessionEnd). Cursor is not wired: its prompt hook
# (beforeSubmitPrompt) can only continue or stop the prompt, with no context to add, and its newer
# sessionStart event has been reported rejected as an unknown hook type by released builds.

HOOK_MARK = " -m memoryd hook "
# event -> (our hook verb, timeout in seconds). SessionEnd's client budget is ~1.5 s in all.
CLAUDE_HOOKS = {"SessionStart": ("session-start", 10), "UserPromptSubmit": ("prompt", 5),
                "PreToolUse": ("pre-tool", 3), "Stop": ("stop", 5), "SessionEnd": ("session-end", 2)}
CODEX_HOOKS = {"SessionStart": ("session-start", 10), "UserPromptSubmit": ("prompt", 5),
               "PreToolUse": ("pre-tool", 3), "Stop": ("stop", 5)}
# PreToolUse only for the tools point-of-action recall reads (cli/pretool.py): other tools would
# start a process for nothing. Codex (0.171) reports shell commands as `Bash` and file edits as
# `apply_patch` (the patch in tool_input.command); it has no file-read tool, it reads with the shell.
HOOK_MATCHERS = {"claude-code": {"PreToolUse": "Read|Edit|Write|MultiEdit|Bash"},
                 "codex": {"PreToolUse": "Bash|apply_patch"}}
HOOK_CLIENTS = {"claude-code", "codex"}


def _claude_settings_path() -> Path:
    return Path.home() / ".claude" / "settings.json"


def _codex_hooks_path() -> Path:
    return _codex_path().parent / "hooks.json"


def hook_command(python: str, verb: str, client: str) -> str:
    import shlex

    extra = " --client codex" if client == "codex" else ""
    return f"{shlex.quote(python)}{HOOK_MARK}{verb}{extra}"


def hook_groups(python: str, client: str) -> dict[str, list[dict[str, Any]]]:
    """The hook groups `init` merges for `client`: one group per event, matcher-less but for
    PreToolUse (HOOK_MATCHERS)."""
    table = CLAUDE_HOOKS if client == "claude-code" else CODEX_HOOKS
    matchers = HOOK_MATCHERS.get(client, {})
    return {event: [{**({"matcher": matchers[event]} if event in matchers else {}),
                     "hooks": [{"type": "command", "command": hook_command(python, verb, client), "timeout": timeout}]}]
            for event, (verb, timeout) in table.items()}


def hooks_path(client: str) -> Path:
    path = _claude_settings_path() if client == "claude-code" else _codex_hooks_path()
    return path.resolve() if path.is_symlink() else path


def _is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and HOOK_MARK in str(handler.get("command", ""))


def _read_hooks_file(path: Path) -> dict[str, Any]:
    data = _read_object(path)
    if not isinstance(data.get("hooks", {}), dict):
        raise ClientConfigError(f'{path}: not a JSON object with a "hooks" object')
    return data


def merged_hooks(data: dict[str, Any], wanted: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`data` with memoryd's handlers replaced by `wanted`; every other hook kept in place."""
    hooks = dict(data.get("hooks") or {})
    for event in [*hooks, *(e for e in wanted if e not in hooks)]:  # stable order: a diff stays small
        current = hooks.get(event)
        groups: list[Any] = current if isinstance(current, list) else []
        kept = []
        for group in groups:
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
        _atomic_write(path, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
        print(f"{client}: memoryd hooks written to {path} ({', '.join(hook_groups(python, client))})", file=out)
    if client == "codex":
        _enable_codex_hooks(out)


_FEATURES_HEADER = re.compile(r"^\s*\[\s*features\s*\]\s*(#.*)?$")


def _enable_codex_hooks(out: TextIO) -> None:
    """Codex runs hooks only with `[features] codex_hooks = true` in config.toml."""
    path = _config_target(CLIENTS["codex"])
    text, parsed = _read_toml(path)
    features = parsed.get("features")
    if isinstance(features, dict) and features.get("codex_hooks") is True:
        return
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _FEATURES_HEADER.match(line)), None)
    if start is None:
        separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        new_text = text + separator + "[features]\ncodex_hooks = true\n"
    else:
        body = [line for line in lines[start + 1:] if not re.match(r"^\s*codex_hooks\s*=", line)]
        head = lines[: start + 1]
        if not head[-1].endswith("\n"):
            head[-1] += "\n"
        new_text = "".join(head + ["codex_hooks = true\n"] + body)
    try:
        ok = tomllib.loads(new_text).get("features", {}).get("codex_hooks") is True
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise ClientConfigError(f"{path}: cannot set [features] codex_hooks = true; add it by hand")
    _atomic_write(path, new_text)
    print(f"codex: enabled hooks ([features] codex_hooks = true) in {path}", file=out)
