"""`memoryd init --client NAME`: the bridge entry and (Claude Code, Codex) the hooks merged idempotently into an
MCP client's config files (docs/architecture.md, `cli/`); the plugin's files; what `memoryd doctor` finds there.
Import contract: stdlib, `fsio` and `hooks.table`."""

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
from memoryd.hooks import table

SERVER_NAME = "memoryd"
BRIDGE_ARGS = ["-m", "memoryd", "mcp"]
NEW_CONFIG_MODE = 0o600  # client configs can hold API tokens; never create them readable by others


class ClientConfigError(RuntimeError):
    """A client config file memoryd will not touch (unparsable, or shaped unexpectedly)."""


@dataclass(frozen=True)
class ClientSpec:
    name: str
    config_path: Callable[[], Path]
    format: Literal["json", "toml"]
    typed: bool = False  # Claude Code writes "type" into the entries it creates itself; matching it keeps them equal

    def entry(self, python: str) -> dict[str, Any]:
        """The keys memoryd owns in the client's bridge entry (keys a user added beside them are kept)."""
        return ({"type": "stdio"} if self.typed else {}) | {"command": python, "args": list(BRIDGE_ARGS)}


def _claude_desktop_path() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "Claude" / "claude_desktop_config.json"


def codex_path() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


CLIENTS: dict[str, ClientSpec] = {spec.name: spec for spec in (
    ClientSpec("claude-code", lambda: Path.home() / ".claude.json", "json", typed=True),
    ClientSpec("claude-desktop", _claude_desktop_path, "json"),
    ClientSpec("cursor", lambda: Path.home() / ".cursor" / "mcp.json", "json"),
    ClientSpec("codex", codex_path, "toml"))}



# The key a config's JSON object must hold as an object too, and what is said when it does not.
_OBJECT_KEYS = {"mcpServers": '"mcpServers" is not an object', "hooks": 'not a JSON object with a "hooks" object'}


def read_object(path: Path, key: str | None = None) -> dict[str, Any]:
    """The JSON object in `path` ({} when absent), with `key` an object if present; ClientConfigError
    naming the file otherwise."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ClientConfigError(f"{path} is not valid JSON ({exc}); fix or move it, then rerun") from None
    if not isinstance(data, dict):
        raise ClientConfigError(f"{path} does not hold a JSON object at the top level")
    if key and not isinstance(data.get(key, {}), dict):
        raise ClientConfigError(f"{path}: {_OBJECT_KEYS[key]}")
    return data


def _json_full_entry(current: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` over what the user already had; a new entry gets an empty "env" to fill in."""
    return {"env": {}} | (current if isinstance(current, dict) else {}) | entry


def _json_with_entry(path: Path, entry: dict[str, Any]) -> str:
    data = read_object(path, "mcpServers")
    servers = data.setdefault("mcpServers", {})
    servers[SERVER_NAME] = _json_full_entry(servers.get(SERVER_NAME), entry)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


_TABLE_HEADER = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(memoryd|"memoryd"|'memoryd')\s*\]\s*(#.*)?$""")
_ANY_HEADER = re.compile(r"^\s*\[")


def _toml_key_lines(entry: dict[str, Any]) -> list[str]:
    # JSON with non-ASCII left as is is valid TOML for these values: strings, lists of them, booleans.
    return [f"{key} = {json.dumps(value, ensure_ascii=False)}\n" for key, value in entry.items()]


def _toml_table(entry: dict[str, Any], name: str = f"mcp_servers.{SERVER_NAME}") -> str:
    return f"[{name}]\n" + "".join(_toml_key_lines(entry))


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.exists():
        return "", {}
    text = path.read_text(encoding="utf-8")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClientConfigError(f"{path} is not valid TOML ({exc}); fix or move it, then rerun") from None


def _set_in_table(text: str, entry: dict[str, Any], header: re.Pattern[str] = _TABLE_HEADER,
                  name: str = f"mcp_servers.{SERVER_NAME}") -> tuple[str, str | None]:
    """`text` with the keys of `entry` set in its table `name` (found by `header`), or the table appended (other
    keys, comments and sub-tables left as they were); and None, or why the result does not carry `entry`."""
    lines = text.splitlines(keepends=True)
    if (start := next((i for i, line in enumerate(lines) if header.match(line)), None)) is None:
        separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        new_text = text + separator + _toml_table(entry, name)
    else:
        end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
        if not lines[start].endswith("\n"):
            lines[start] += "\n"
        owned = re.compile(rf"^\s*({'|'.join(map(re.escape, entry))})\s*=")
        kept = [line for line in lines[start + 1:end] if not owned.match(line)]
        new_text = "".join(lines[: start + 1] + _toml_key_lines(entry) + kept + lines[end:])
    try:  # the edit is textual, so check it the only way the stdlib allows: parse the result
        written: Any = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        return new_text, f"the edited file would not parse: {exc}"
    for key in name.split("."):
        written = written.get(key, {})
    return new_text, None if _entry_matches(written, entry) else f"{name} is defined in a form this tool cannot edit"


def _toml_with_entry(path: Path, entry: dict[str, Any]) -> str:
    new_text, problem = _set_in_table(_read_toml(path)[0], entry)
    if problem:
        raise ClientConfigError(f"{path}: {problem}; add the table by hand "
                                "(`memoryd init --client codex --print` shows it)")
    return new_text



def _current_entry(spec: ClientSpec, path: Path) -> Any:
    if spec.format == "json":
        return read_object(path, "mcpServers").get("mcpServers", {}).get(SERVER_NAME)
    servers = _read_toml(path)[1].get("mcp_servers", {})
    return servers.get(SERVER_NAME) if isinstance(servers, dict) else None


def _entry_matches(current: Any, wanted: dict[str, Any]) -> bool:
    """True when `current` carries every key of `wanted` unchanged (keys the user added are fine)."""
    return isinstance(current, dict) and all(current.get(k) == v for k, v in wanted.items())


# What this process wrote to each file: a second write by one command (Codex's bridge entry, then its
# hooks flag) must not back up memoryd's own first write over the user's original in `<file>.bak`.
_WRITTEN: dict[Path, str] = {}


def write_config(path: Path, text: str) -> None:
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


def resolved(path: Path) -> Path:
    """Dotfile managers symlink these files: replace the file they point at, not the link."""
    return path.resolve() if path.is_symlink() else path


def snippet(spec: ClientSpec, entry: dict[str, Any]) -> str:
    """What `init --print` shows for the bridge entry, in the config's own format."""
    if spec.format == "toml":
        return _toml_table(entry)
    return json.dumps({"mcpServers": {SERVER_NAME: _json_full_entry(None, entry)}}, indent=2, ensure_ascii=False) + "\n"


def register_bridge(spec: ClientSpec, path: Path, entry: dict[str, Any], out: TextIO) -> int:
    """Write memoryd's entry into `path` unless an equal one is there; says which on `out`."""
    current = _current_entry(spec, path)
    if _entry_matches(current, entry):
        print(f"{spec.name}: memoryd already registered in {path}", file=out)
        return 0
    write_config(path, _json_with_entry(path, entry) if spec.format == "json" else _toml_with_entry(path, entry))
    verb = "updated" if current is not None else "registered"
    print(f"{spec.name}: memoryd {verb} in {path}; restart {spec.name} to load it", file=out)
    return 0


def client_config_status(python: str | None = None) -> list[dict[str, Any]]:
    """Per client for `memoryd doctor`: {client, path, exists, registered, current (what `init` would
    write now), error (a message when the config cannot be read)}."""
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
            row.update(registered=current is not None, current=_entry_matches(current, spec.entry(wanted_python)))
        rows.append(row)
    return rows


_FEATURES_HEADER = re.compile(r"^\s*\[\s*features\s*\]\s*(#.*)?$")


def enable_codex_hooks(out: TextIO) -> None:
    """Codex runs hooks only with `[features] codex_hooks = true` in config.toml."""
    path = resolved(codex_path())
    text, parsed = _read_toml(path)
    if isinstance(features := parsed.get("features"), dict) and features.get("codex_hooks") is True:
        return
    new_text, problem = _set_in_table(text, {"codex_hooks": True}, _FEATURES_HEADER, "features")
    if problem:
        raise ClientConfigError(f"{path}: cannot set [features] codex_hooks = true; add it by hand")
    write_config(path, new_text)
    print(f"codex: enabled hooks ([features] codex_hooks = true) in {path}", file=out)


# Cursor is not wired (README, "Automatic recall": its hooks cannot add context).
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
        data = read_object(resolved(_claude_settings_path()))
    except (ClientConfigError, OSError):
        return False
    enabled = data.get("enabledPlugins")
    return isinstance(enabled, dict) and any(k.startswith("memoryd@") and v is True for k, v in enabled.items())


def plugin_mcp() -> dict[str, Any]:
    return {"mcpServers": {"memoryd": {"command": PLUGIN_RUNNER, "args": ["mcp"]}}}


def hooks_path(client: str) -> Path:
    return resolved(_claude_settings_path() if client == "claude-code" else codex_path().parent / "hooks.json")


def _is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and HOOK_MARK in str(handler.get("command", ""))


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
        data = read_object(path, "hooks")
    except (ClientConfigError, OSError) as exc:
        row["error"] = str(exc)
        return row
    ours = [h["command"] for groups in (data.get("hooks") or {}).values() if isinstance(groups, list)
            for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if _is_ours(h)]
    return {**row, "present": bool(ours), "commands": ours,
            "current": merged_hooks(data, hook_groups(python or sys.executable, client)) == data}


def register_hooks(client: str, python: str, out: TextIO) -> None:
    """Merge memoryd's hooks into the client's hook config (idempotent, `<file>.bak` kept)."""
    path = hooks_path(client)
    data = read_object(path, "hooks")
    merged = merged_hooks(data, hook_groups(python, client))
    if merged == data:
        print(f"{client}: memoryd hooks already in {path}", file=out)
    else:
        write_config(path, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
        print(f"{client}: memoryd hooks written to {path} ({', '.join(hook_groups(python, client))})", file=out)
    if client == "codex":
        enable_codex_hooks(out)


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
    path = resolved(spec.config_path())
    wire_hooks = hooks and name in HOOK_CLIENTS
    if print_only:
        out.write(f"# {path}\n{snippet(spec, entry)}")
        if wire_hooks:
            groups = json.dumps({"hooks": hook_groups(python, name)}, indent=2)
            out.write(f"# {hooks_path(name)} (merged)\n{groups}\n")
            if name == "codex":
                out.write(f"# {path} (also)\n[features]\ncodex_hooks = true\n")
        return 0
    try:
        code = register_bridge(spec, path, entry, out)
        if wire_hooks:
            register_hooks(name, python, out)
        elif hooks and name == "cursor":
            print("cursor: no hooks written (its hook events cannot add context; see README)", file=out)
        return code
    except (ClientConfigError, OSError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1

