"""`memoryd ui` under attack: a real daemon, real `memoryd ui` processes,
real sockets and a real headless Chromium.

- Cookies do not isolate by port: a local web app on another 127.0.0.1 port the browser visits
  must receive nothing that signs in to the view;
- the one-time URL (what lands in the browser's argv) is spent by its first load;
- half-sent requests are closed by the read timeout, and a flood past the connection cap gets no
  threads, while a normal request is still answered.
"""

from __future__ import annotations

import http.client
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from harness import Env, wait_for

sys.path.insert(0, str(Path(__file__).parent))
from test_browser import CHROMEDRIVER, CHROMIUM, FLAGS, _free_port, webdriver

from memoryd.ui.server import MAX_CONNECTIONS


class Launched:
    """One `memoryd ui --no-open` process: its pid, port and the one-time URL it printed."""

    def __init__(self, env: Env, **extra_env: str) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "memoryd", "ui", "--no-open", "--port", str(self.port)],
                                     env=env.environ(**extra_env), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        env.procs.append(self.proc)  # type: ignore[arg-type]
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith(f"memoryd ui: http://127.0.0.1:{self.port}/?code="), line
        self.url = line.split(": ", 1)[1].strip()

    def get(self, path: str, cookie: str | None = None) -> tuple[int, dict[str, str]]:
        """One GET on its own connection, redirects not followed: (status, headers)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path, headers={"Connection": "close", **({"Cookie": cookie} if cookie else {})})
            answer = conn.getresponse()
            answer.read()
            return answer.status, dict(answer.getheaders())
        finally:
            conn.close()

    def sign_in(self) -> tuple[str, str]:
        """Spend the printed code as a browser would: (the session's Cookie header, its secret path)."""
        status, headers = self.get(self.url.split(str(self.port), 1)[1])
        assert status == 303, status
        return headers["Set-Cookie"].split(";", 1)[0], headers["Location"].rsplit("/memories", 1)[0]

    def threads(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        raise AssertionError("no Threads line")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def _hung_up(sock: socket.socket) -> bool:
    """Whether the server closed this socket (a FIN, or a reset when it left our bytes unread)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def _status(ui: Launched, path: str, cookie: str) -> int | None:
    """The status of one GET, or None when the server closed the connection unanswered."""
    try:
        return ui.get(path, cookie)[0]
    except OSError:
        return None


class Recorder(BaseHTTPRequestHandler):
    """Another local web app: it answers anything and keeps every Cookie header it is sent."""

    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Cookie") or "")
        body = b"<!doctype html><title>another app</title><p>hello"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _chromium(profile: str) -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)


def test_a_server_on_another_port_gets_no_cookie_that_signs_in_and_the_one_time_url_is_spent(
        daemon_env: Env) -> None:
    ui = Launched(daemon_env)
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    other = f"http://127.0.0.1:{recorder.server_address[1]}"
    profile = tempfile.mkdtemp(prefix="md-chromium-")
    driver = _chromium(profile)
    try:
        driver.get(ui.url)
        assert driver.current_url.endswith("/memories") and "code=" not in driver.current_url
        secret_path = driver.current_url.split(str(ui.port), 1)[1].rsplit("/memories", 1)[0]
        real = f"memoryd_ui_{ui.port}={driver.get_cookie(f'memoryd_ui_{ui.port}')['value']}"
        for path in ("/", "/memories", "/static/app.css", "/?code=x"):  # the paths our view has
            driver.get(other + path)
        assert driver.find_element("tag name", "title").get_attribute("textContent") == "another app"
    finally:
        driver.quit()
        recorder.shutdown()
        recorder.server_close()
        shutil.rmtree(profile, ignore_errors=True)
    assert Recorder.seen and all(f"memoryd_ui_{ui.port}" not in cookie for cookie in Recorder.seen)
    for cookie in set(Recorder.seen):  # replayed by the other app, even knowing our secret path
        for path in ("/memories", secret_path + "/memories", secret_path + "/events/stream"):
            assert ui.get(path, cookie or None)[0] == 403, (path, cookie)
    assert ui.get(secret_path + "/memories", real)[0] == 200  # the replays could have worked
    status, headers = ui.get(ui.url.split(str(ui.port), 1)[1])  # the browser's argv, used again
    assert status == 403 and "Set-Cookie" not in headers
    ui.stop()


def test_half_sent_requests_are_closed_by_the_read_timeout_and_free_their_threads(daemon_env: Env) -> None:
    ui = Launched(daemon_env, MEMORYD_UI_READ_TIMEOUT_S="1")
    cookie, secret_path = ui.sign_in()
    baseline = wait_for(lambda: ui.threads() if ui.get(secret_path + "/memories", cookie)[0] == 200 else 0,
                        timeout=60, step=0.1, what="the view answering")
    held = [socket.create_connection(("127.0.0.1", ui.port), timeout=60) for _ in range(50)]
    try:
        for sock in held:
            sock.sendall(b"GET /mem")  # half a request line, then silence
        assert ui.get(secret_path + "/health", cookie)[0] == 200  # the view still answers meanwhile
        for sock in held:
            assert _hung_up(sock)  # blocks until the server hangs up on it
        wait_for(lambda: ui.threads() <= baseline, timeout=60, step=0.1, what="the threads being freed")
    finally:
        for sock in held:
            sock.close()
    ui.stop()


def test_a_flood_past_the_connection_cap_is_closed_and_gets_no_threads(daemon_env: Env) -> None:
    ui = Launched(daemon_env, MEMORYD_UI_READ_TIMEOUT_S="300")  # nothing times out during this test
    cookie, secret_path = ui.sign_in()
    baseline = ui.threads()
    flood = [socket.create_connection(("127.0.0.1", ui.port), timeout=60) for _ in range(MAX_CONNECTIONS + 36)]
    try:
        for sock in flood:
            sock.sendall(b"GET /mem")

        def hung_up() -> list[socket.socket]:
            readable, _, _ = select.select(flood, [], [], 0.5)
            return [s for s in readable if _hung_up(s)]

        closed = wait_for(lambda: len(hung_up()) >= 36 and hung_up(), timeout=60, step=0.1, what="36 hang-ups")
        assert len(closed) == 36  # past the cap: closed
        assert ui.threads() <= baseline + MAX_CONNECTIONS
    finally:
        for sock in flood:
            sock.close()
    wait_for(lambda: _status(ui, secret_path + "/memories", cookie) == 200, timeout=60, step=0.1,
             what="the slots coming back")
    ui.stop()
