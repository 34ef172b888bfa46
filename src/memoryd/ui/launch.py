"""`memoryd ui`: start the daemon if needed, serve the web view on this user's port, print (and open)
a one-time URL, keep the operator's session alive, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

from memoryd.client.connection import Operator, is_unavailable
from memoryd.errors import MemorydError
from memoryd.ui.access import HOST, READ_TIMEOUT_S, UI, default_port
from memoryd.ui.server import make_server


def read_timeout_s() -> float:
    """MEMORYD_UI_READ_TIMEOUT_S when it is a positive number (tests shorten it), else READ_TIMEOUT_S."""
    try:
        value = float(os.environ.get("MEMORYD_UI_READ_TIMEOUT_S", READ_TIMEOUT_S))
    except ValueError:
        return READ_TIMEOUT_S
    return value if value > 0 else READ_TIMEOUT_S


def _keepalive(ui: UI, period_s: float) -> None:
    while not ui.stopping.wait(period_s):
        ui.operator.keepalive()


def main(ns: argparse.Namespace) -> int:
    """Serve until interrupted. Exit 3 when the daemon is not running, 1 when the port is taken."""
    from memoryd import paths
    from memoryd.client import spawn

    operator = Operator("memoryd-ui")
    try:
        spawn.ensure_daemon(paths.endpoint())  # started as a bridge starts it, like every CLI verb
        status = operator.call("status", {})
    except MemorydError as exc:
        if not is_unavailable(exc):
            raise
        print(f"memoryd: the daemon is not running and could not be started: {exc.message} "
              "(memoryd doctor says why)", file=sys.stderr)
        return 3
    port = ns.port or default_port()
    ui = UI(operator, port, secrets.token_urlsafe(32), Path(status["store"]) / "events", read_timeout_s())
    try:
        server = make_server(ui)
    except OSError as exc:
        print(f"memoryd: cannot listen on {HOST}:{port} ({exc.strerror}; is a memoryd ui already running?); "
              "pick another port with --port", file=sys.stderr)
        operator.close()
        return 1
    print(f"memoryd ui: {ui.url(ui.new_code())}", flush=True)
    print("(a one-time URL: its first load signs a browser in, then it is spent; Ctrl-C stops the view)",
          file=sys.stderr, flush=True)
    # Only where a graphical browser can open: without one `webbrowser` takes over this terminal with lynx or w3m.
    if not ns.no_open and (sys.platform == "darwin" or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        import webbrowser

        webbrowser.open(ui.url(ui.new_code()))  # its own code: the browser's argv is readable by `ps`
    period = float(operator.hello.get("heartbeat_s", 5))
    threading.Thread(target=_keepalive, args=(ui, period), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        ui.stopping.set()
        server.server_close()
        operator.close()
    return 0
