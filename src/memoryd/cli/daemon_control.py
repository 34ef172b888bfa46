"""`memoryd serve|status|stop|restart`: run the daemon, ask how it is, stop it (asking first)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from memoryd.cli.output import emit

if TYPE_CHECKING:  # argparse is imported where the parser is built: the hook fast path skips it
    import argparse

# `restart` under load: a bridge may auto-spawn a daemon between the stop and the start, and a
# loaded machine can take several seconds to bring either up.
RESTART_WAIT_S = 30.0


def add_parsers(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the daemon (foreground unless --detach)")
    serve.add_argument("--detach", action="store_true", help="run in the background, logging to the daemon log")
    serve.add_argument("--log-format", choices=["text", "json"], default="text",
                       help="the daemon log's lines: readable text (default) or one JSON object each")
    serve.set_defaults(func=lambda ns: serve_daemon(ns.detach, ns.log_format))
    for name, func in (("status", status), ("stop", stop), ("restart", restart)):
        cmd = sub.add_parser(name, help=f"daemon {name}")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=func)


def serve_daemon(detach: bool, log_format: str = "text") -> int:
    import gc

    # No cyclic GC while the daemon loads and opens its store: what they build lives as long as the daemon
    # (`lifecycle.open_store` freezes it, then turns GC back on), and collecting it slows every start.
    gc.disable()
    from memoryd.daemon.process import lifecycle

    lifecycle.configure_logging(log_format)
    return detach_and_wait(serve_args=["--log-format", log_format]) if detach else lifecycle.run()


def detach_and_wait(wait_s: float | None = None, serve_args: list[str] | None = None) -> int:
    """Spawn the daemon in the background and return once it (or one started meanwhile) answers."""
    from memoryd import paths
    from memoryd.client import spawn

    ok, message = spawn.detach(paths.endpoint(), wait_s or spawn.SPAWN_WAIT_S, serve_args or [])
    print(f"memoryd: {message}; log: {paths.daemon_log_file()}", file=sys.stderr)
    return 0 if ok else 1


def status(ns: argparse.Namespace) -> int:
    from memoryd import paths
    from memoryd.client import spawn

    live = spawn.ping(paths.endpoint(), 3.0, "status") if spawn.read_status() else None
    if live is None and (starting := spawn.read_starting()) is not None:  # opening a big store: how far it got
        total = f"/{starting['total']:,}" if starting.get("total") else ""
        emit(ns.json, {"running": False, "starting": starting},
             lambda _: [(f"memoryd: starting (pid {starting['pid']}, {starting.get('seconds')} s): "
                         f"{starting.get('phase')} {starting.get('done', 0):,}{total}")])
        return 0
    if live is None:
        emit(ns.json, {"running": False}, lambda _: ["memoryd: not running"])
        return 1
    emit(ns.json, {**live, "running": True}, lambda r: [f"{key:16} {value}" for key, value in r.items()])
    return 0


def stop(ns: argparse.Namespace) -> int:
    """The ladder: ask (stop op), wait, SIGTERM, wait, SIGKILL."""
    import os
    import signal
    import time

    from memoryd import paths
    from memoryd.client import spawn

    pid = (spawn.read_status() or {}).get("pid")
    if not spawn.pid_alive(pid):
        print("memoryd: not running", file=sys.stderr)
        return 0
    spawn.ping(paths.endpoint(), 2.0, "stop")
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                os.kill(pid, sig)  # type: ignore[arg-type]
            except ProcessLookupError:  # it exited between the last look and this signal
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and spawn.pid_alive(pid):
            time.sleep(0.02)
        if not spawn.pid_alive(pid):
            print(f"memoryd: stopped (pid {pid})", file=sys.stderr)
            return 0
    return 1


def restart(ns: argparse.Namespace) -> int:
    """Stop, then start; success means a daemon answers at the end, whoever started it (a bridge
    racing the restart spawns one itself, and `detach` then waits for that one)."""
    stop(ns)
    return detach_and_wait(RESTART_WAIT_S)
