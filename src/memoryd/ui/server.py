"""`memoryd ui`: the web view's HTTP server (stdlib `ThreadingHTTPServer`), a client of the daemon.

Why the stdlib: the view is a handful of server-rendered pages, four POST actions and one
server-sent-events stream for one local user; http.server does all of it with no dependency to
install, audit or keep in step (so there is no `memoryd[ui]` extra).

Guards, each on every request:
- bound to 127.0.0.1 only; the Host header must name that address (or `localhost`) and our port,
  which refuses DNS-rebinding pages that resolve their own name to 127.0.0.1;
- a random token per launch, in the URL printed (and opened) at start; the first load trades it
  for an HttpOnly, SameSite=Strict cookie and redirects to the same page without it;
- a change (POST) also needs the token as its `csrf` form field or `X-Memoryd-Token` header, and
  an `Origin`, when sent, that is this server;
- every page is rendered with escaped text (pages.py) under a Content-Security-Policy that allows
  only our own script and stylesheet files, no inline code, no framing.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from memoryd.errors import MemorydError
from memoryd.ui import assets, pages
from memoryd.ui.operator import Operator, is_unavailable

HOST = "127.0.0.1"
PORT_BASE, PORT_SPAN = 47000, 2000
MAX_BODY = 64 * 1024
FEED_BACKLOG = 20
FEED_POLL_S = 0.25
FEED_PING_S = 10.0
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Not no-referrer: with it Chromium sends `Origin: null` on our own form posts.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
NOTICES = {"removed": "Memory removed (Restore brings it back).", "restored": "Memory restored.",
           "confirmed": "Pending write confirmed and committed.", "cancelled": "Pending write cancelled."}


def default_port(uid: int | None = None) -> int:
    """A port per user, so two users of one machine do not collide: 47000 + uid mod 2000."""
    return PORT_BASE + (os.getuid() if uid is None else uid) % PORT_SPAN


class Refused(Exception):
    """A request the guards turn away, with the status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class UI:
    """What every request handler shares: the daemon connection, the token, the store's log dir."""

    def __init__(self, operator: Operator, port: int, token: str, events_dir: Path) -> None:
        self.operator = operator
        self.port = port
        self.token = token
        self.events_dir = events_dir
        self.stopping = threading.Event()
        self.hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = f"memoryd_ui_{port}"

    def token_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())


# -- the live feed: follow the store's event log, read-only -------------------------------------------

def follow_events(events_dir: Path, stop: threading.Event, backlog: int = FEED_BACKLOG,
                  poll_s: float = FEED_POLL_S) -> Iterator[dict[str, Any] | None]:
    """Yield the last `backlog` events, then each new one as the daemon appends it (None every
    poll with nothing new, so the caller can ping). Follows a new monthly segment when one starts;
    a line is yielded only once its newline is there (a half-written line waits)."""
    segments = sorted(events_dir.glob("*.jsonl"))
    current = segments[-1] if segments else None
    position = 0
    if current is not None:
        data = current.read_bytes()
        position = data.rfind(b"\n") + 1  # a half-written last line is read with the new ones
        for line in data[:position].splitlines()[-backlog:]:
            yield _event(line)
    pending = b""
    while not stop.is_set():
        newest = sorted(events_dir.glob("*.jsonl"))
        if current is None and newest:
            current, position = newest[0], 0
        if current is not None:
            with open(current, "rb") as handle:
                handle.seek(position)
                chunk = handle.read()
            position += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    yield _event(line)
            later = [s for s in newest if s.name > current.name]
            if later and not pending:
                current, position = later[0], 0
                continue
        yield None
        stop.wait(poll_s)


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {"kind": "unreadable line"}
    return {k: v for k, v in event.items() if k not in ("prev", "hash")} if isinstance(event, dict) else {}


# -- requests -----------------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    server_version = "memoryd-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    ui: UI  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # the token rides in the first URL; keep request lines out of the terminal

    # -- guards ------------------------------------------------------------------------------------

    def guard(self, change: bool) -> dict[str, list[str]]:
        """The Host check and the token (query or cookie); for a change, CSRF and Origin too.
        Returns the query parameters."""
        ui = self.ui
        if self.headers.get("Host", "") not in ui.hosts:
            raise Refused(403, "foreign Host header: this server answers only 127.0.0.1 / localhost")
        query = parse_qs(urlsplit(self.path).query)
        if not (ui.token_ok(_first(query, "token")) or ui.token_ok(self._cookie())):
            raise Refused(403, "missing or wrong token: open the URL `memoryd ui` printed")
        if change:
            origin = self.headers.get("Origin")
            if origin is not None and origin not in ui.origins:
                raise Refused(403, "cross-origin change refused")
        return query

    def _cookie(self) -> str | None:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.ui.cookie:
                return value
        return None

    def _read_body(self) -> bytes:
        """The request body, read before any check so a refused request leaves no bytes behind
        to be parsed as the next request on a kept-alive connection."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            raise Refused(413, "request body too large or unreadable length")
        return self.rfile.read(length) if length else b""

    def _form(self) -> dict[str, list[str]]:
        form = parse_qs(self.body.decode("utf-8", "replace")) if self.body else {}
        if not (self.ui.token_ok(_first(form, "csrf")) or self.ui.token_ok(self.headers.get("X-Memoryd-Token"))):
            raise Refused(403, "missing or wrong CSRF token")
        return form

    # -- answers -----------------------------------------------------------------------------------

    def send(self, status: int, body: str | bytes, ctype: str = "text/html; charset=utf-8",
             extra: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for key, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def redirect(self, location: str, extra: dict[str, str] | None = None) -> None:
        self.send(303, "", extra={"Location": location, **(extra or {})})

    def do_GET(self) -> None:
        self._run(change=False)

    def do_POST(self) -> None:
        self._run(change=True)

    def _run(self, change: bool) -> None:
        self.body = b""
        try:
            if change:
                self.body = self._read_body()
            query = self.guard(change)
            if not change and _first(query, "token") is not None:
                # Trade the URL's token for a cookie and drop it from the address bar and history.
                parts = urlsplit(self.path)
                rest = "&".join(p for p in parts.query.split("&") if not p.startswith("token="))
                cookie = f"{self.ui.cookie}={self.ui.token}; HttpOnly; SameSite=Strict; Path=/"
                self.redirect(parts.path + (f"?{rest}" if rest else ""), {"Set-Cookie": cookie})
                return
            route = ROUTES_POST if change else ROUTES_GET
            path = urlsplit(self.path).path
            for prefix, handler in route:
                by_prefix = len(prefix) > 1 and prefix.endswith("/")
                if path == prefix or (by_prefix and path.startswith(prefix)):
                    handler(self, path[len(prefix):] if by_prefix else "", query)
                    return
            raise Refused(404, "no such page")
        except Refused as exc:
            self.send(exc.status, pages.error_page(exc.status, exc.message))
        except MemorydError as exc:
            status = 503 if is_unavailable(exc) else 404 if exc.code == -32002 else 400 if exc.code == -32602 else 500
            text = "the daemon is not running (memoryd serve --detach)" if status == 503 else exc.message
            self.send(status, pages.error_page(status, text))
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- pages ---------------------------------------------------------------------------------------

    def banners(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return {"notice": NOTICES.get(_first(query, "done") or "")}

    def page_root(self, rest: str, query: dict[str, list[str]]) -> None:
        self.redirect("/memories")

    def page_favicon(self, rest: str, query: dict[str, list[str]]) -> None:
        self.send(204, "")

    def page_static(self, rest: str, query: dict[str, list[str]]) -> None:
        files = {"app.css": (assets.CSS, "text/css; charset=utf-8"),
                 "app.js": (assets.JS, "text/javascript; charset=utf-8")}
        if rest not in files:
            raise Refused(404, "no such file")
        self.send(200, files[rest][0], files[rest][1])

    def page_memories(self, rest: str, query: dict[str, list[str]]) -> None:
        q, scope = (_first(query, "q") or "").strip(), (_first(query, "scope") or "").strip()
        project, category = (_first(query, "project") or "").strip(), _first(query, "category") or ""
        removed = _first(query, "removed") == "1"
        scopes = [s for s in (scope, f"projects:{project}" if project else "") if s] or None
        op = self.ui.operator
        if removed:
            result, mode = op.tool("memory_list_tombstones", limit=200), "removed"
        elif q:
            result, mode = op.tool("memory_search", query=q, scopes=scopes, category=category or None,
                                   max_results=50, auto_scope=False), "search"
        else:
            result, mode = op.tool("memory_list", scopes=scopes, category=category or None, limit=200), "list"
        fragment = pages.memory_results(result, mode)
        if _first(query, "fragment") == "1":
            self.send(200, fragment)
            return
        filters = pages.memory_filters(q, scope, project, category, removed)
        self.send(200, pages.memories_page(filters, fragment, **self.banners(query)))

    def page_memory(self, rest: str, query: dict[str, list[str]]) -> None:
        memory = self.ui.operator.tool("memory_show", id=rest)
        history = self.ui.operator.admin("history", id=rest)
        self.send(200, pages.memory_page(memory, history, self.ui.token, **self.banners(query)))

    def act_memory(self, rest: str, query: dict[str, list[str]]) -> None:
        form = self._form()
        memory_id, _, verb = rest.partition("/")
        op = self.ui.operator
        if verb == "remove":
            reason = (_first(form, "reason") or "").strip() or "removed by the user in memoryd ui"
            op.tool("memory_remove", id=memory_id, reason=reason)
            self.redirect(f"/memory/{quote(memory_id)}?done=removed")
        elif verb == "restore":
            result = op.tool("memory_restore", id=memory_id)
            if result.get("status") != "restored":
                raise Refused(409, f"not restored: {result.get('status')}: {result.get('hint', '')}")
            self.redirect(f"/memory/{quote(memory_id)}?done=restored")
        else:
            raise Refused(404, "no such action")

    def page_pending(self, rest: str, query: dict[str, list[str]]) -> None:
        result = self.ui.operator.admin("pending")
        self.send(200, pages.pending_page(result, self.ui.token, **self.banners(query)))

    def act_pending(self, rest: str, query: dict[str, list[str]]) -> None:
        self._form()
        pending_id, _, decision = rest.partition("/")
        if decision not in ("confirm", "cancel"):
            raise Refused(404, "no such action")
        result = self.ui.operator.admin("resolve", pending_id=pending_id, decision=decision)
        if result.get("status") not in ("committed", "cancelled"):
            raise Refused(409, f"still pending: {result.get('status')}: {result.get('hint', '')}")
        self.redirect(f"/pending?done={'confirmed' if decision == 'confirm' else 'cancelled'}")

    def page_sessions(self, rest: str, query: dict[str, list[str]]) -> None:
        op = self.ui.operator
        selected = _first(query, "worktree") if "worktree" in query else None
        worktrees = op.admin("worktrees")
        wanted = {"worktree": selected} if selected else {}
        sessions = op.admin("sessions", limit=100, **wanted)
        self.send(200, pages.sessions_page(worktrees, sessions, selected, **self.banners(query)))

    def page_session(self, rest: str, query: dict[str, list[str]]) -> None:
        session = self.ui.operator.admin("session", session_id=rest)
        episodes = self.ui.operator.request("episodes", {"action": "list", "session": rest})
        self.send(200, pages.session_page(session, episodes, **self.banners(query)))

    def page_health(self, rest: str, query: dict[str, list[str]]) -> None:
        op = self.ui.operator
        status, health = op.request("status", {}), op.tool("memory_health")
        conflicts, pending = op.admin("conflicts"), op.admin("pending")
        self.send(200, pages.health_page(status, health, conflicts, pending["total"], **self.banners(query)))

    def page_events(self, rest: str, query: dict[str, list[str]]) -> None:
        self.send(200, pages.events_page(**self.banners(query)))

    def page_stream(self, rest: str, query: dict[str, list[str]]) -> None:
        """Server-sent events: one `data:` line of JSON per logged event, a ping when idle."""
        self.send_response(200)
        for key, value in SECURITY_HEADERS.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        last_ping = time.monotonic()
        try:
            for event in follow_events(self.ui.events_dir, self.ui.stopping):
                if event is not None:
                    seq = event.get("seq", "")
                    self.wfile.write(f"id: {seq}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                elif time.monotonic() - last_ping > FEED_PING_S:
                    self.wfile.write(b": ping\n\n")  # finds a closed tab, ends this thread
                    last_ping = time.monotonic()
                else:
                    continue
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return


Route = Callable[[Handler, str, dict[str, list[str]]], None]
ROUTES_GET: list[tuple[str, Route]] = [
    ("/", Handler.page_root), ("/static/", Handler.page_static), ("/memories", Handler.page_memories),
    ("/memory/", Handler.page_memory), ("/pending", Handler.page_pending), ("/sessions", Handler.page_sessions),
    ("/session/", Handler.page_session), ("/health", Handler.page_health), ("/events", Handler.page_events),
    ("/events/stream", Handler.page_stream), ("/favicon.ico", Handler.page_favicon),
]
ROUTES_POST: list[tuple[str, Route]] = [("/memory/", Handler.act_memory), ("/pending/", Handler.act_pending)]


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


# -- running it ---------------------------------------------------------------------------------------

def make_server(ui: UI) -> ThreadingHTTPServer:
    """The HTTP server on 127.0.0.1:ui.port (never another interface); handler threads are daemons."""
    handler = type("BoundHandler", (Handler,), {"ui": ui})
    server = ThreadingHTTPServer((HOST, ui.port), handler)
    server.daemon_threads = True
    return server


def _keepalive(ui: UI, period_s: float) -> None:
    while not ui.stopping.wait(period_s):
        ui.operator.keepalive()


def _has_desktop() -> bool:
    """Whether a graphical browser can open: without a display, `webbrowser` would fall back to a
    console browser (lynx, w3m) and take over this terminal, so the printed URL has to do."""
    return sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(ns: argparse.Namespace) -> int:
    """Serve until interrupted. Exit 3 when the daemon is not running, 1 when the port is taken."""
    operator = Operator("memoryd-ui")
    try:
        status = operator.request("status", {})
    except MemorydError as exc:
        if not is_unavailable(exc):
            raise
        print("memoryd: the daemon is not running; start it: memoryd serve --detach", file=sys.stderr)
        return 3
    port = ns.port or default_port()
    ui = UI(operator, port, secrets.token_urlsafe(24), Path(status["store"]) / "events")
    try:
        server = make_server(ui)
    except OSError as exc:
        print(f"memoryd: cannot listen on {HOST}:{port} ({exc.strerror}; is a memoryd ui already running?); "
              "pick another port with --port", file=sys.stderr)
        operator.close()
        return 1
    url = f"http://{HOST}:{port}/memories?token={ui.token}"
    print(f"memoryd ui: {url}", flush=True)
    print("(this URL holds the access token; Ctrl-C stops the view)", file=sys.stderr, flush=True)
    if not ns.no_open and _has_desktop():
        import webbrowser

        webbrowser.open(url)
    period = float((operator.conn.hello or {}).get("heartbeat_s", 5)) if operator.conn else 5.0
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
