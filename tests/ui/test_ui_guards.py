"""Guards of `memoryd ui` that need no browser: a real daemon, a real `memoryd ui` process, plain
HTTP over real sockets.

- an edit must name the version it was made against (`expected_updated`): without it the
  stale-edit check has nothing to compare, so the POST is refused (400) and nothing is written;
- sign-in by one-time code is capped: past SIGN_IN_FAILURES_PER_MINUTE wrong codes in a minute,
  every sign-in is answered 429 (with Retry-After) until the oldest failure is a minute old —
  the right code too, or guessing could go on under the cap.
"""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
from urllib.parse import urlencode

import pytest

from harness import Env
from memoryd.ui.access import SIGN_IN_FAILURES_PER_MINUTE, Attempts
from synckit import tool


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class View:
    """One `memoryd ui --no-open` process and what a signed-in browser would hold."""

    def __init__(self, env: Env) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "memoryd", "ui", "--no-open", "--port", str(self.port)],
                                     env=env.environ(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        env.procs.append(self.proc)  # type: ignore[arg-type]
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith(f"memoryd ui: http://127.0.0.1:{self.port}/?code="), line
        self.code_path = line.split(str(self.port), 1)[1].strip()  # /?code=…
        self.cookie, self.base = "", ""

    def request(self, method: str, path: str, body: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Connection": "close", **({"Cookie": self.cookie} if self.cookie else {}), **(headers or {})}
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            answer = conn.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read().decode()
        finally:
            conn.close()

    def sign_in(self) -> None:
        status, headers, _ = self.request("GET", self.code_path)
        assert status == 303, status
        self.cookie = headers["Set-Cookie"].split(";", 1)[0]
        self.base = headers["Location"].rsplit("/memories", 1)[0]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def form_value(page: str, name: str) -> str:
    found = re.search(rf'name={name} value="([^"]*)"', page)
    assert found, f"no {name} field on the page"
    return found.group(1)


def stored(env: Env, memory_id: str) -> str:
    return (env.home / "memories" / f"{memory_id}.md").read_text()


def test_an_edit_without_the_version_it_was_made_against_is_refused_and_writes_nothing(daemon_env: Env) -> None:
    env = daemon_env
    memory_id = tool(env, "memory_write", content="The billing service retries webhooks three times.",
                     scopes=["projects:web"])["id"]
    view = View(env)
    view.sign_in()
    status, _, page = view.request("GET", f"{view.base}/memory/{memory_id}")
    assert status == 200
    csrf, read_at = form_value(page, "csrf"), form_value(page, "expected_updated")
    before = stored(env, memory_id)
    target = f"{view.base}/memory/{memory_id}/edit"
    for missing in ({}, {"expected_updated": ""}, {"expected_updated": "  "}):
        body = urlencode({"csrf": csrf, "content": "The billing service retries webhooks nine times.", **missing})
        status, _, page = view.request("POST", target, body)
        assert status == 400, (missing, status)
        assert "expected_updated" in page and "nothing was written" in page
        assert stored(env, memory_id) == before
    updates = [e for e in env.events() if e["kind"] == "update" and e.get("memory_id") == memory_id]
    assert updates == []  # refused before the daemon was asked
    body = urlencode({"csrf": csrf, "content": "The billing service retries webhooks five times.",
                      "expected_updated": read_at})
    assert view.request("POST", target, body)[0] == 303  # the page's own form still saves
    assert "five times" in stored(env, memory_id)
    view.stop()


def test_wrong_sign_in_codes_past_the_cap_are_answered_429_the_right_one_too(daemon_env: Env) -> None:
    view = View(daemon_env)
    for n in range(SIGN_IN_FAILURES_PER_MINUTE):
        assert view.request("GET", f"/?code=guess{n}")[0] == 403
    status, headers, page = view.request("GET", "/?code=one-more-guess")
    assert status == 429 and int(headers["Retry-After"]) > 0, (status, headers)
    assert "too many sign-in attempts" in page
    status, headers, _ = view.request("GET", view.code_path)  # the printed code, during the lock
    assert status == 429 and "Set-Cookie" not in headers
    view.stop()


def test_the_cap_counts_only_the_last_minute() -> None:
    now = [1000.0]
    attempts = Attempts(cap=3, window_s=60.0, clock=lambda: now[0])
    for _ in range(3):  # at 1000, 1010, 1020
        assert attempts.wait_s() == 0
        attempts.failed()
        now[0] += 10
    assert attempts.wait_s() == pytest.approx(30.0)  # at 1030: until the first is a minute old
    now[0] = 1060.0  # the first has aged out: one more try
    assert attempts.wait_s() == 0
    attempts.failed()
    assert attempts.wait_s() == pytest.approx(10.0)  # three again: until the one at 1010 ages out


def test_the_pin_toggle_pins_and_unpins_through_memory_update(daemon_env: Env) -> None:
    """The memory page's Pin button (issue 39): a form POST with the page's csrf pins the memory
    in its file, the page then offers Unpin, and Unpin takes it back; both are updates in the log."""
    env = daemon_env
    memory_id = tool(env, "memory_write", content="Never force-push to main in the web repo.",
                     scopes=["projects:web"])["id"]
    view = View(env)
    view.sign_in()
    page = view.request("GET", f"{view.base}/memory/{memory_id}")[2]
    assert 'id=pin-toggle aria-pressed=false>Pin<' in page
    status, headers, _ = view.request("POST", f"{view.base}/memory/{memory_id}/pin",
                                      urlencode({"csrf": form_value(page, "csrf")}))
    assert status == 303 and headers["Location"].endswith("done=pinned")
    assert "pinned: true" in stored(env, memory_id)
    page = view.request("GET", f"{view.base}/memory/{memory_id}")[2]
    assert 'aria-pressed=true>Unpin<' in page and "listed first at every session start" in page
    assert view.request("POST", f"{view.base}/memory/{memory_id}/unpin", urlencode({}))[0] == 403  # no csrf
    assert view.request("POST", f"{view.base}/memory/{memory_id}/unpin",
                        urlencode({"csrf": form_value(page, "csrf")}))[0] == 303
    assert "pinned" not in stored(env, memory_id)
    updates = [e for e in env.events() if e["kind"] == "update" and e.get("memory_id") == memory_id]
    assert len(updates) == 2
    view.stop()
