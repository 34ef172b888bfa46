"""Render and install memoryd's service definitions: a systemd user unit or a launchd agent.
Import contract: stdlib, `memoryd.paths` and `memoryd.fsio`. The templates are package data
(`memoryd/units/`); the top-level `systemd/` folder is the readable copy, held equal by a test."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from xml.sax.saxutils import escape as xml_escape

from memoryd import fsio, paths

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "units"
UNIT_NAME = "memoryd.service"
PLIST_NAME = "com.memoryd.daemon.plist"
LAUNCHD_LABEL = "com.memoryd.daemon"
SERVICE_FILE_MODE = 0o644

# systemd refuses executables whose path holds quotes or backslashes, and a control character
# would end the line; refusing them here gives the user a message instead of a dead unit.
_UNIT_FORBIDDEN_CHARS = frozenset('"\\\'') | {chr(c) for c in range(32)} | {"\x7f"}


class ServiceError(RuntimeError):
    """A service definition that cannot be rendered or installed here (message says why)."""


def load_template(name: str) -> str:
    """The text of template `name` from the package's `units/`; ServiceError if absent."""
    path = TEMPLATE_DIR / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ServiceError(f"service template not found: {path} (this memoryd install is incomplete: "
                           "reinstall it)") from None


def _unit_quote(value: str, *, in_exec: bool = False) -> str:
    """`value` as one double-quoted systemd word, with specifier (and, in Exec lines, $) escaped."""
    if bad := sorted(set(value) & _UNIT_FORBIDDEN_CHARS):
        raise ServiceError(f"a systemd unit cannot carry the path {value!r} (it contains {bad!r})")
    quoted = value.replace("%", "%%")
    if in_exec:
        quoted = quoted.replace("$", "$$")
    return f'"{quoted}"'


def render_systemd_unit(python: str, store: str | os.PathLike[str] | None = None) -> str:
    """The user unit running `python -m memoryd serve` for `store` (default: the current store root),
    pinned as MEMORYD_HOME since ProtectSystem=strict leaves only it writable."""
    store_dir = os.fspath(store) if store is not None else str(paths.store_root())
    return load_template(UNIT_NAME).format(python=_unit_quote(python, in_exec=True), store=_unit_quote(store_dir),
                                           store_env=_unit_quote(f"MEMORYD_HOME={store_dir}"))


def render_launchd_plist(python: str, log_path: str) -> str:
    """The launchd agent plist running `python -m memoryd serve`, stdout and stderr to `log_path`."""
    return load_template(PLIST_NAME).format(python=xml_escape(python), log_path=xml_escape(log_path))


@dataclass(frozen=True)
class ServicePlan:
    """What installing the service means on this OS; `prepare` commands run before `enable` and may fail."""

    target: Path
    text: str
    needed_dir: Path
    enable: tuple[tuple[str, ...], ...]
    prepare: tuple[tuple[str, ...], ...] = ()


def plan_service(platform: str | None = None, python: str | None = None) -> ServicePlan:
    """The ServicePlan for `platform` (default: this one); ServiceError where there is none."""
    platform = platform or sys.platform
    python = python or sys.executable
    if not python:
        raise ServiceError("cannot tell which Python interpreter runs memoryd (sys.executable is empty)")
    if platform.startswith("linux"):
        store, config_home = paths.store_root(), os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
        # The unit grants write access to the store only if it exists when the unit starts.
        return ServicePlan(target=Path(config_home) / "systemd" / "user" / UNIT_NAME,
                           text=render_systemd_unit(python, store), needed_dir=store,
                           enable=(("systemctl", "--user", "daemon-reload"),
                                   ("systemctl", "--user", "enable", "--now", UNIT_NAME)))
    if platform == "darwin":
        log_file, target = paths.daemon_log_file(), Path.home() / "Library" / "LaunchAgents" / PLIST_NAME
        # launchd does not create the log's directory; `load` refuses a loaded agent, so a reinstall unloads first.
        return ServicePlan(target=target, text=render_launchd_plist(python, str(log_file)),
                           needed_dir=log_file.parent, enable=(("launchctl", "load", "-w", str(target)),),
                           prepare=(("launchctl", "unload", str(target)),))
    raise ServiceError(f"no service manager support for platform {platform!r} (Linux and macOS only)")


def install_service(print_only: bool, enable: bool, out: TextIO | None = None) -> int:
    """Write this OS's service file (`print_only`: only print it) and print, or with `enable` run, its enable commands
    (prepare ones first, their failures ignored). Exit code: 0; 1 nothing can be installed here; else the command's."""
    out = out or sys.stdout
    try:
        plan = plan_service()
    except ServiceError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1
    if print_only:
        out.write(plan.text)
        return 0
    plan.needed_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        changed = plan.target.read_text(encoding="utf-8") != plan.text
    except (FileNotFoundError, UnicodeDecodeError):
        changed = True
    if changed:  # rewritten atomically, and only when it differs
        plan.target.parent.mkdir(parents=True, exist_ok=True)
        fsio.replace_atomic(plan.target, plan.text.encode(), SERVICE_FILE_MODE)
    print(f"{'wrote' if changed else 'unchanged:'} {plan.target}", file=out)
    if not enable:
        print(f"enable it with:\n  {' && '.join(shlex.join(cmd) for cmd in plan.enable)}", file=out)
        return 0
    try:
        for cmd in plan.prepare:
            subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for cmd in plan.enable:
            print(f"$ {shlex.join(cmd)}", file=out)
            if code := subprocess.run(cmd, check=False).returncode:
                print(f"memoryd: `{shlex.join(cmd)}` exited with {code}", file=sys.stderr)
                return code
    except FileNotFoundError as exc:
        print(f"memoryd: cannot run {exc.filename!r}: not installed or not on PATH", file=sys.stderr)
        return 1
    return 0
