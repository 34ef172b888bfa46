"""`memoryd ui`: the web view's HTTP server, a client of the daemon. The stdlib's http.server: a few
pages for one local user need no dependency (so no `memoryd[ui]` extra). Its guards, run on every
request, are described in docs/security.md, "The web view"."""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from memoryd import names
from memoryd.client.connection import is_unavailable
from memoryd.errors import DAEMON_UNAVAILABLE, INVALID_PARAMS, RESOURCE_STATE, MemorydError
from memoryd.ui import pages
from memoryd.ui.access import HOST, UI, SignInLimited, matches
from memoryd.ui.feed import follow_events

MAX_BODY = 64 * 1024
FEED_PING_S = 10.0
MAX_CONNECTIONS = 64
MAX_ASSET_BYTES = 64 * 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'",
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
    # Keeps the secret path out of any Referer to another port; no-referrer made Chromium post `Origin: null`.
    "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}
NOTICES = {"removed": "Memory removed (Restore brings it back).", "restored": "Memory restored.",
           "confirmed": "Pending write confirmed and committed.", "cancelled": "Pending write cancelled.",
           "edited": "Memory saved (its history shows the update).", "unchanged": "Nothing changed, nothing saved.",
           "pinned": "Pinned: listed first at every session start.", "unpinned": "Unpinned."}
ID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz")  # a ULID's, any case
MIN_ID_PREFIX, ULID_LEN = 6, 26


# The daemon's error as its error page's status: unreachable, unknown (memory, session), refused parameter.
HTTP_STATUS = {DAEMON_UNAVAILABLE: 503, RESOURCE_STATE: 404, INVALID_PARAMS: 400}


def http_status(exc: MemorydError) -> int:
    return HTTP_STATUS.get(DAEMON_UNAVAILABLE if is_unavailable(exc) else exc.code, 500)


def _asset(name: str) -> bytes:
    """A file shipped beside this module (package data), read once at import, at most MAX_ASSET_BYTES."""
    with open(Path(__file__).with_name(name), "rb") as handle:
        data = handle.read(MAX_ASSET_BYTES + 1)
    if len(data) > MAX_ASSET_BYTES:
        raise RuntimeError(f"memoryd ui: {name} is over {MAX_ASSET_BYTES} bytes")
    return data


# Served as files so the Content-Security-Policy can forbid every inline script and style.
STATIC = {"app.css": (_asset("app.css"), "text/css; charset=utf-8"),
          "app.js": (_asset("app.js"), "text/javascript; charset=utf-8")}


class Refused(Exception):
    """A request the guards turn away, with the status to answer (and headers, e.g. Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class Handler(BaseHTTPRequestHandler):
    server_version = "memoryd-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    ui: UI  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # codes ride in URLs and the secret prefix in every path; keep them out of the terminal

    def guard(self, change: bool) -> tuple[str | None, dict[str, list[str]]]:
        """(page path, query) of a request past the Host, session and (for a change) Origin checks;
        the path is None for a one-time code to spend. The CSRF value is checked with the form."""
        ui = self.ui
        if self.headers.get("Host", "") not in ui.hosts:
            raise Refused(403, "foreign Host header: this server answers only 127.0.0.1 / localhost")
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if not change and parts.path == "/" and "code" in query:
            return None, query
        page = ui.inside(parts.path)
        if page is None or not matches(self._cookie(), ui.session):
            raise Refused(403, "not signed in: open the one-time URL `memoryd ui` printed (restart it for a new one)")
        self.base = ui.prefix + "/"  # from here on, pages and error pages may link inside
        if change and self.headers.get("Origin") not in {None, *ui.origins}:
            raise Refused(403, "cross-origin change refused")
        return page, query

    def spend(self, query: dict[str, list[str]]) -> None:
        """Trade a one-time code for the session cookie, scoped to our secret path, and land inside."""
        try:
            spent = self.ui.spend_code(_first(query, "code"))
        except SignInLimited as exc:
            wait_s = max(1, math.ceil(exc.retry_after_s))
            raise Refused(429, f"too many sign-in attempts with a wrong code: none is tried for {wait_s} s",
                          {"Retry-After": str(wait_s)}) from None
        if not spent:
            raise Refused(403, "this one-time code is spent or wrong: restart `memoryd ui` for a new URL")
        print("memoryd ui: a browser signed in with a one-time code", file=sys.stderr, flush=True)
        cookie = f"{self.ui.cookie}={self.ui.session}; HttpOnly; SameSite=Strict; Path={self.ui.prefix}"
        self.redirect("/memories", {"Set-Cookie": cookie})

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
        given = (_first(form, "csrf"), self.headers.get("X-Memoryd-Token"))  # its field or header (docs/security.md)
        if not any(matches(value, self.ui.csrf) for value in given):
            raise Refused(403, "missing or wrong CSRF token")
        return form

    def send(self, status: int, body: str | bytes, ctype: str = "text/html; charset=utf-8",
             extra: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self._head(status, {**(extra or {}), "Content-Type": ctype, "Content-Length": str(len(data))})
        if self.command != "HEAD":
            self.wfile.write(data)

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in {**SECURITY_HEADERS, **headers}.items():
            self.send_header(key, value)
        self.end_headers()

    def redirect(self, page: str, extra: dict[str, str] | None = None) -> None:
        """See other: `page` is a path under our prefix (`/memories`)."""
        self.send(303, "", extra={"Location": self.ui.prefix + page, **(extra or {})})

    def do_GET(self) -> None:
        self._run(change=False)

    def do_POST(self) -> None:
        self._run(change=True)

    def _run(self, change: bool) -> None:
        self.body, self.base = b"", ""
        try:
            if change:
                self.body = self._read_body()
            path, query = self.guard(change)
            if path is None:
                return self.spend(query)
            route = ROUTES_POST if change else ROUTES_GET
            for prefix, handler in route:
                by_prefix = len(prefix) > 1 and prefix.endswith("/")
                if path == prefix or (by_prefix and path.startswith(prefix)):
                    return handler(self, path[len(prefix):] if by_prefix else "", query)
            raise Refused(404, "no such page")
        except Refused as exc:
            self.send(exc.status, pages.error_page(exc.status, exc.message, self.base), extra=exc.headers)
        except MemorydError as exc:
            status = http_status(exc)
            text = "the daemon is not running (memoryd serve --detach)" if status == 503 else exc.message
            candidates = (exc.data or {}).get("candidates") or []  # an ambiguous id prefix: say which
            self.send(status, pages.error_page(status, text, self.base, candidates))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def banners(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return {"notice": NOTICES.get(_first(query, "done")), "base": self.base}

    def page_root(self, rest: str, query: dict[str, list[str]]) -> None:
        self.redirect("/memories")

    def page_favicon(self, rest: str, query: dict[str, list[str]]) -> None:
        self.send(204, "")

    def page_static(self, rest: str, query: dict[str, list[str]]) -> None:
        if rest not in STATIC:
            raise Refused(404, "no such file")
        self.send(200, *STATIC[rest])

    def page_memories(self, rest: str, query: dict[str, list[str]]) -> None:
        q, scope, project = (_first(query, key).strip() for key in ("q", "scope", "project"))
        category, removed = _first(query, "category"), _first(query, "removed") == "1"
        scopes = [s for s in (scope, f"projects:{project}" if project else "") if s] or None
        op = self.ui.operator
        if removed:
            result, mode = op.tool(names.MEMORY_LIST_TOMBSTONES, limit=200), "removed"
        elif q:
            result, mode = op.tool(names.MEMORY_SEARCH, query=q, scopes=scopes, category=category or None,
                                   max_results=50, auto_scope=False), "search"
        else:
            result, mode = op.tool(names.MEMORY_LIST, scopes=scopes, category=category or None, limit=200), "list"
        fragment = self.id_match(q) + pages.memory_results(result, mode)
        if _first(query, "fragment") == "1":
            return self.send(200, fragment)
        filters = pages.memory_filters(q, scope, project, category, removed)
        self.send(200, pages.memories_page(filters, fragment, **self.banners(query)))

    def full_id(self, typed: str) -> str:
        """The memory id meant by `typed`, a whole id or a unique prefix resolved by the daemon as the
        CLI does (too short, ambiguous and unknown are its typed errors, shown as error pages)."""
        if len(typed) == ULID_LEN:
            return typed.upper()
        return str(self.ui.operator.admin("resolve_id", prefix=typed)["id"])

    def id_match(self, q: str) -> str:
        """Above search results: the memories whose id starts with `q`, when `q` looks like an id prefix."""
        if not (MIN_ID_PREFIX <= len(q) <= ULID_LEN and ID_CHARS.issuperset(q)):
            return ""
        try:
            return pages.id_match([{"id": self.full_id(q)}])
        except MemorydError as exc:
            if is_unavailable(exc):
                raise
            return pages.id_match((exc.data or {}).get("candidates") or [])

    def page_memory(self, rest: str, query: dict[str, list[str]]) -> None:
        if not rest:
            return self.redirect("/memories")
        memory_id = self.full_id(rest)
        if memory_id != rest:  # a prefix: land on the memory's own address
            self.redirect(f"/memory/{quote(memory_id)}" + (f"?{urlsplit(self.path).query}" if "?" in self.path else ""))
            return
        self.show_memory(memory_id, query)

    def show_memory(self, memory_id: str, query: dict[str, list[str]], status: int = 200,
                    error: str | None = None, draft: str | None = None) -> None:
        memory = self.ui.operator.tool(names.MEMORY_SHOW, id=memory_id)
        history = self.ui.operator.admin("history", id=memory_id)
        self.send(status, pages.memory_page(memory, history, self.ui.csrf, draft, error=error, **self.banners(query)))

    def act_memory(self, rest: str, query: dict[str, list[str]]) -> None:
        form = self._form()
        typed, _, verb = rest.partition("/")
        memory_id = self.full_id(typed)
        op, here = self.ui.operator, f"/memory/{quote(memory_id)}"
        if verb == "edit":
            self.edit_memory(memory_id, form)
        elif verb == "remove":
            reason = _first(form, "reason").strip() or "removed by the user in memoryd ui"
            op.tool(names.MEMORY_REMOVE, id=memory_id, reason=reason)
            self.redirect(f"{here}?done=removed")
        elif verb in ("pin", "unpin"):  # through memory_update, as an agent's pin: history, sync
            op.tool(names.MEMORY_UPDATE, id=memory_id, pinned=verb == "pin")
            self.redirect(f"{here}?done={verb}ned")
        elif verb == "restore":
            result = op.tool(names.MEMORY_RESTORE, id=memory_id)
            if result.get("status") != "restored":
                raise Refused(409, f"not restored: {result.get('status')}: {result.get('hint', '')}")
            self.redirect(f"{here}?done=restored")
        else:
            raise Refused(404, "no such action")

    def edit_memory(self, memory_id: str, form: dict[str, list[str]]) -> None:
        """Save new content with `memory_update`, compare-and-set on the `updated` the page was read at.
        A refusal writes nothing and shows the page again with the reason and the draft kept."""
        draft = _first(form, "content").replace("\r\n", "\n")
        read_at = _first(form, "expected_updated").strip()
        op, here = self.ui.operator, f"/memory/{quote(memory_id)}"
        if not read_at:  # without it memory_update skips its compare-and-set: a blind overwrite
            self.show_memory(memory_id, {}, 400, "not saved: the edit names no version it was made against "
                             "(expected_updated, which the page's own form sends); nothing was written, the "
                             "current text is shown and your draft is kept below", draft)
        elif not draft.strip():
            self.show_memory(memory_id, {}, 400, "the new content is empty: nothing saved (Remove removes a memory)",
                             draft)
        elif draft.strip() == (op.tool(names.MEMORY_SHOW, id=memory_id).get("content") or "").strip():
            self.redirect(f"{here}?done=unchanged")
        else:
            result = op.tool(names.MEMORY_UPDATE, id=memory_id, content=draft, expected_updated=read_at,
                             acknowledge_transient=_first(form, "acknowledge_transient") == "1" or None)
            status = result.get("status")
            if status == "updated":
                self.redirect(f"{here}?done=edited")
            elif status == "stale":
                self.show_memory(memory_id, {}, 409, "not saved: the memory changed since this page was read (now "
                                 f"{result.get('current_updated')}); its current text is shown, your draft is kept "
                                 "below — save again to replace it", draft)
            else:
                self.show_memory(memory_id, {}, 409, "not saved: "
                                 f"{status}: {result.get('hint') or result.get('message')}"
                                 " — nothing was written; your draft is kept below", draft)

    def page_pending(self, rest: str, query: dict[str, list[str]]) -> None:
        result = self.ui.operator.admin("pending")
        self.send(200, pages.pending_page(result, self.ui.csrf, **self.banners(query)))

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
        op, selected = self.ui.operator, _first(query, "worktree") or None
        worktrees = op.admin("worktrees")
        sessions = op.admin("sessions", limit=100, worktree=selected)  # None: every worktree
        self.send(200, pages.sessions_page(worktrees, sessions, selected, **self.banners(query)))

    def page_session(self, rest: str, query: dict[str, list[str]]) -> None:
        session = self.ui.operator.admin("session", session_id=rest)
        episodes = self.ui.operator.call("episodes", {"action": "list", "session": rest})
        injections = self.ui.operator.admin("injections", session_id=rest)
        self.send(200, pages.session_page(session, episodes, injections, **self.banners(query)))

    def page_health(self, rest: str, query: dict[str, list[str]]) -> None:
        op = self.ui.operator
        status, health = op.call("status", {}), op.tool(names.MEMORY_HEALTH)
        conflicts, pending = op.admin("conflicts"), op.admin("pending")
        self.send(200, pages.health_page(status, health, conflicts, pending["total"], **self.banners(query)))

    def page_events(self, rest: str, query: dict[str, list[str]]) -> None:
        self.send(200, pages.events_page(**self.banners(query)))

    def page_stream(self, rest: str, query: dict[str, list[str]]) -> None:
        """Server-sent events: one `data:` line of JSON per logged event, a ping when idle."""
        self._head(200, {"Content-Type": "text/event-stream; charset=utf-8", "Connection": "close"})
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
        except (BrokenPipeError, ConnectionResetError, TimeoutError):  # gone, or stopped reading
            return


Route = Callable[[Handler, str, dict[str, list[str]]], None]
ROUTES_GET: list[tuple[str, Route]] = [
    ("/", Handler.page_root), ("/static/", Handler.page_static), ("/memories", Handler.page_memories),
    ("/memory/", Handler.page_memory), ("/memories/", Handler.page_memory), ("/pending", Handler.page_pending),
    ("/sessions", Handler.page_sessions), ("/session/", Handler.page_session), ("/health", Handler.page_health),
    ("/events", Handler.page_events), ("/events/stream", Handler.page_stream), ("/favicon.ico", Handler.page_favicon)]
ROUTES_POST: list[tuple[str, Route]] = [("/memory/", Handler.act_memory), ("/pending/", Handler.act_pending)]


def _first(query: dict[str, list[str]], key: str) -> str:
    values = query.get(key)
    return values[0] if values else ""


class Server(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS: past the cap one is closed unanswered."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            return self.shutdown_request(request)
        try:
            super().process_request(request, client_address)  # starts the thread
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_server(ui: UI) -> Server:
    """The HTTP server on 127.0.0.1:ui.port; a socket read or write stalled `ui.read_timeout_s` ends its connection."""
    handler = type("BoundHandler", (Handler,), {"ui": ui, "timeout": ui.read_timeout_s})
    return Server((HOST, ui.port), handler)
