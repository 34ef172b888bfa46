"""`memoryd ui` in a real browser: headless Debian Chromium driven by Selenium through the system
chromedriver (no browser download at test time), against a real daemon on a temp store.

Each page is loaded and screenshotted to tests/ui/artifacts/; search as you type, remove and
restore, confirm a pending write and the live feed are driven through the page as a person would;
the guards (one-time code, session cookie and secret path, Host, CSRF, Origin) are checked with
plain HTTP; a memory holding `<script>` must render as text and never run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Env

sys.path.insert(0, str(Path(__file__).parent))
from seed import SCRIPT_TEXT, Agent, seed  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("headless Chromium tests need Debian's chromium and chromium-driver "
                "(apt-get install -y chromium chromium-driver); not installed here", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ARTIFACTS = Path(__file__).parent / "artifacts"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1000")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class View:
    """The running web view: its base URL (with the launch's secret path), the spent one-time URL,
    the seeded ids and the browser on it."""

    def __init__(self, env: Env, base: str, code_url: str, ids: dict[str, Any], driver: Any) -> None:
        self.env, self.base, self.code_url, self.ids, self.driver = env, base, code_url, ids, driver
        self.root = base.split("/", 3)[0] + "//" + base.split("/", 3)[2]  # http://127.0.0.1:port
        self.cookie = f"memoryd_ui_{self.root.rsplit(':', 1)[1]}"

    def get(self, path: str) -> None:
        self.driver.get(self.base + path)

    def wait(self, condition: Any, timeout: float = 10) -> Any:
        return WebDriverWait(self.driver, timeout).until(condition)

    def text(self, css: str) -> str:
        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1280, max(800, min(int(height) + 140, 2400)))  # the whole page
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(1280, 1000)
        return path


@pytest.fixture(scope="module")
def view() -> Iterator[View]:
    env = Env()
    driver = None
    profile = tempfile.mkdtemp(prefix="md-chromium-")
    try:
        env.start_daemon()
        ids = seed(f"ipc://{env.runtime}/memoryd.sock")
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "memoryd", "ui", "--no-open", "--port", str(port)],
                                env=env.environ(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        env.procs.append(proc)  # type: ignore[arg-type]
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("memoryd ui: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        assert url.startswith(f"http://127.0.0.1:{port}/?code="), url
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
        driver.get(url)  # the first load trades the one-time code for a cookie and a secret path
        yield View(env, driver.current_url.rsplit("/memories", 1)[0], url, ids, driver)
    finally:
        if driver is not None:
            driver.quit()
        if "ids" in locals():
            ids["second"].conn.close()
        env.cleanup()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_first_load_sets_a_path_scoped_cookie_and_drops_the_code_from_the_address(view: View) -> None:
    secret_path = view.base[len(view.root):]
    assert len(secret_path) == 33 and view.driver.current_url == view.base + "/memories"
    cookie = view.driver.get_cookie(view.cookie)
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == secret_path


@pytest.mark.parametrize("name,path,heading", [
    ("memories", "/memories", "Memories"),
    ("memory", "/memory/{replica}", "Memory"),
    ("removed", "/memories?removed=1", "Memories"),
    ("pending", "/pending", "Pending writes"),
    ("sessions", "/sessions", "Sessions and handoffs"),
    ("session", "/session/{first_session}", "Session {first_session}"),
    ("health", "/health", "Health"),
    ("events", "/events", "Live feed"),
])
def test_each_page_loads_and_is_saved_as_a_screenshot(view: View, name: str, path: str, heading: str) -> None:
    view.get(path.format(**view.ids))
    assert view.text("h1") == heading.format(**view.ids)
    assert not view.driver.find_elements(By.CSS_SELECTOR, ".banner")
    if name == "memory":
        assert f"{view.ids['deploy']}" in view.text("body") and "extends" in view.text("body")
        assert "write" in view.text("table")  # history
    if name == "sessions":
        assert "the rollback section" in view.text("#timeline") and "finished" in view.text("#timeline")
    if name == "session":
        assert "deploy notes drafted" in view.text("#episodes")
    if name == "health":
        assert view.text('[data-stat="memories"] b') == "4"  # three and a handoff
    if name == "events":
        view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#feed tbody tr"))
    assert view.shot(name).stat().st_size > 5000


def test_search_narrows_as_you_type(view: View) -> None:
    view.get("/memories")
    box = view.driver.find_element(By.NAME, "q")
    box.send_keys("staging")
    view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-id="{view.ids["deploy"]}"]')
              and d.find_elements(By.CSS_SELECTOR, f'tr[data-id="{view.ids["replica"]}"]')
              and d.find_elements(By.CSS_SELECTOR, "table[data-mode=search]"))
    view.shot("search")
    box.clear()
    box.send_keys("replica")
    view.wait(lambda d: d.find_element(By.ID, "result-count").get_attribute("data-count") == "1")
    assert view.driver.find_elements(By.CSS_SELECTOR, f'tr[data-id="{view.ids["replica"]}"]')
    assert "q=replica" in view.driver.current_url
    box.clear()
    box.send_keys("kubernetes")
    view.wait(lambda d: "Nothing matches" in d.find_element(By.ID, "results").text)


def test_remove_then_restore_a_memory(view: View) -> None:
    deploy = view.ids["deploy"]
    view.get(f"/memory/{deploy}")
    view.driver.find_element(By.NAME, "reason").send_keys("obsolete: we deploy straight to prod now")
    view.driver.find_element(By.ID, "remove").click()
    view.wait(lambda d: "Memory removed" in d.find_element(By.CSS_SELECTOR, ".notice").text)
    assert "obsolete: we deploy straight" in view.text("body")
    view.get("/memories?removed=1")
    assert view.driver.find_elements(By.CSS_SELECTOR, f'tr[data-id="{deploy}"]')
    view.get("/memories")
    assert not view.driver.find_elements(By.CSS_SELECTOR, f'tr[data-id="{deploy}"]')
    view.get(f"/memory/{deploy}")
    view.driver.find_element(By.ID, "restore").click()
    view.wait(lambda d: "Memory restored" in d.find_element(By.CSS_SELECTOR, ".notice").text)
    view.get("/memories")
    assert view.driver.find_elements(By.CSS_SELECTOR, f'tr[data-id="{deploy}"]')
    kinds = [e["kind"] for e in view.env.events() if e.get("memory_id") == deploy]
    assert "remove" in kinds and "restore" in kinds


def test_confirm_a_pending_write(view: View) -> None:
    pending = view.ids["pending"]
    view.get("/pending")
    row = view.driver.find_element(By.CSS_SELECTOR, f'tr[data-id="{pending}"]')
    assert "small pull requests" in row.text
    row.find_element(By.NAME, "confirm").click()
    view.wait(lambda d: "confirmed and committed" in d.find_element(By.CSS_SELECTOR, ".notice").text)
    assert view.driver.find_elements(By.ID, "pending-empty")
    view.get("/memories?category=user-inference")
    assert "small pull requests" in view.text("#results")
    decided = [e for e in view.env.events() if e["kind"] == "operator_resolve"]
    assert decided and decided[-1]["pending_id"] == pending and decided[-1]["status"] == "committed"


def test_a_new_event_appears_in_the_live_feed(view: View) -> None:
    view.get("/events")
    view.wait(lambda d: d.find_element(By.ID, "feed-state").text == "live")
    rows = view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#feed tbody tr"))
    newest = max(int(r.find_element(By.CSS_SELECTOR, "td").text) for r in rows)
    agent = Agent(f"ipc://{view.env.runtime}/memoryd.sock", "/w/feed")
    try:
        agent.call("episode_write", body="a live one", takeaway="seen in the feed")
    finally:
        agent.conn.close()
    view.wait(lambda d: any(r.get_attribute("data-kind") == "episode_write"
                            and int(r.find_element(By.CSS_SELECTOR, "td").text) > newest
                            for r in d.find_elements(By.CSS_SELECTOR, "#feed tbody tr")))
    view.shot("events-live")


def test_a_stored_script_renders_as_text_and_never_runs(view: View) -> None:
    view.get(f"/memory/{view.ids['script']}")
    assert view.text("#content") == SCRIPT_TEXT
    view.get("/memories?q=renders")
    view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-id="{view.ids["script"]}"]'))
    assert "<script>window.__pwned" in view.text("#results")
    assert view.driver.execute_script("return window.__pwned === undefined") is True
    assert "pwned" not in view.driver.title
    view.shot("script-as-text")


def _http(view: View, path: str, method: str = "GET", headers: dict[str, str] | None = None,
          body: bytes | None = None, root: bool = False) -> tuple[int, str]:
    """One plain request to a page (under the secret path, or at the bare root when `root`)."""
    url = (view.root if root else view.base) + path
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_requests_without_the_cookie_with_a_foreign_host_or_without_csrf_are_refused(view: View) -> None:
    cookie = {"Cookie": f"{view.cookie}={view.driver.get_cookie(view.cookie)['value']}"}
    view.get(f"/memory/{view.ids['replica']}")
    csrf = view.driver.find_element(By.NAME, "csrf").get_attribute("value")
    assert _http(view, "/memories")[0] == 403
    assert _http(view, "/memories", headers=cookie, root=True)[0] == 403  # the cookie without the path
    assert _http(view, "/?code=wrong", root=True)[0] == 403
    assert _http(view, "/events/stream")[0] == 403
    assert _http(view, "/memories", headers={**cookie})[0] == 200
    status, body = _http(view, "/memories", headers={**cookie, "Host": f"evil.example:{view.root.rsplit(':', 1)[1]}"})
    assert status == 403 and "foreign Host" in body
    target = f"/memory/{view.ids['replica']}/remove"
    assert _http(view, target, "POST", cookie, b"reason=x")[0] == 403  # no CSRF field
    assert _http(view, target, "POST", {}, f"csrf={csrf}".encode())[0] == 403  # no cookie
    evil = {**cookie, "Origin": "http://evil.example"}
    assert _http(view, target, "POST", evil, f"csrf={csrf}".encode())[0] == 403
    assert not [e for e in view.env.events() if e["kind"] == "remove" and e.get("memory_id") == view.ids["replica"]]


# -- ids people type, and editing --------------------------------------------------------------------

def test_a_memory_opens_by_a_unique_id_prefix_and_an_ambiguous_one_lists_the_candidates(view: View) -> None:
    replica, deploy = view.ids["replica"], view.ids["deploy"]
    view.get(f"/memories/{replica[:14].lower()}")  # a prefix in the address, any case
    assert view.driver.current_url == f"{view.base}/memory/{replica}" and view.text("#memory-id") == replica
    shared = os.path.commonprefix([deploy, replica])  # written the same second: one time prefix
    assert len(shared) >= 6
    view.get(f"/memory/{shared}")
    assert "ambiguous" in view.text("#error")
    listed = [a.text for a in view.driver.find_elements(By.CSS_SELECTOR, "#id-match li a")]
    assert deploy in listed and replica in listed
    view.get(f"/memory/{replica[:4]}")
    assert "too short" in view.text("#error")
    view.get("/memories")
    view.driver.find_element(By.NAME, "q").send_keys(replica[:12])  # an id typed in the search box
    view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f'#id-match a[href="memory/{replica}"]'))
    view.shot("id-prefix")


def _edit(view: View, text: str, acknowledge: bool = False) -> None:
    view.driver.find_element(By.CSS_SELECTOR, "#edit-box summary").click()
    box = view.driver.find_element(By.ID, "edit-content")
    box.clear()
    box.send_keys(text)
    if acknowledge:
        view.driver.find_element(By.NAME, "acknowledge_transient").click()
    view.driver.find_element(By.ID, "save").click()


def _stored(view: View, memory_id: str) -> str:
    return (view.env.home / "memories" / f"{memory_id}.md").read_text()


def test_edit_a_memory_and_a_stale_or_refused_edit_writes_nothing(view: View) -> None:
    agent = Agent(f"ipc://{view.env.runtime}/memoryd.sock", "/w/web")
    try:
        memory_id = agent.call("memory_write", content="The billing service retries webhooks three times.",
                               scopes=["projects:web"])["id"]
        view.get(f"/memory/{memory_id[:10]}")
        _edit(view, "The billing service retries webhooks five times, with backoff.")
        view.wait(lambda d: "Memory saved" in d.find_element(By.CSS_SELECTOR, ".notice").text)
        assert view.text("#content") == "The billing service retries webhooks five times, with backoff."
        assert "five times" in _stored(view, memory_id)
        updates = [e for e in view.env.events() if e["kind"] == "update" and e.get("memory_id") == memory_id]
        assert [u["status"] for u in updates] == ["updated"]
        view.shot("edited")

        view.get(f"/memory/{memory_id}")  # the page is read; an agent changes the memory meanwhile
        agent.call("memory_update", id=memory_id, content="The billing service retries webhooks seven times.")
        _edit(view, "My edit from the stale page.")
        view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".banner"))
        assert "changed since this page was read" in view.text(".banner")
        assert view.text("#content") == "The billing service retries webhooks seven times."  # the agent's stands
        assert view.driver.find_element(By.ID, "edit-content").get_attribute("value") == "My edit from the stale page."
        assert "seven times" in _stored(view, memory_id) and "stale page" not in _stored(view, memory_id)
        view.shot("edit-stale")

        before = _stored(view, memory_id)
        view.get(f"/memory/{memory_id}")
        _edit(view, "Webhooks are signed with the key AKIA" + "ABCDEFGHIJKLMNOP")
        view.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".banner"))
        assert "credential_warning" in view.text(".banner") and "nothing was written" in view.text(".banner")
        assert _stored(view, memory_id) == before
        statuses = [e["status"] for e in view.env.events() if e["kind"] == "update" and e.get("memory_id") == memory_id]
        assert statuses == ["updated", "updated", "stale", "credential_warning"]
        view.shot("edit-refused")
    finally:
        agent.conn.close()


def test_an_edit_without_csrf_or_from_another_origin_is_refused(view: View) -> None:
    cookie = {"Cookie": f"{view.cookie}={view.driver.get_cookie(view.cookie)['value']}"}
    view.get(f"/memory/{view.ids['replica']}")
    csrf = view.driver.find_element(By.NAME, "csrf").get_attribute("value")
    updated = view.driver.find_element(By.NAME, "expected_updated").get_attribute("value")
    target = f"/memory/{view.ids['replica']}/edit"
    body = f"content=hijacked&expected_updated={updated}"
    assert _http(view, target, "POST", cookie, body.encode())[0] == 403
    evil = {**cookie, "Origin": "http://evil.example"}
    assert _http(view, target, "POST", evil, f"{body}&csrf={csrf}".encode())[0] == 403
    assert "hijacked" not in _stored(view, view.ids["replica"])


def test_a_sessions_page_lists_what_the_hooks_injected(view: View) -> None:
    """The real hooks inject into a Claude Code session; its page shows each injection's memories."""
    import json
    import re

    repo = view.env.base / "web"  # named like the seeded project, so its memories are in scope
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, timeout=30)

    def hook(event: str, payload: dict[str, Any]) -> str:
        done = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=json.dumps(payload),
                              env=view.env.environ(), capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    started = hook("session-start", {"session_id": "ui-cc", "cwd": str(repo), "hook_event_name": "SessionStart"})
    session_id = re.search(r'session_id=\\"(sess-[0-9]+)', started).group(1)  # type: ignore[union-attr]
    answered = hook("prompt", {"session_id": "ui-cc", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
                               "prompt": "do deploys go through the staging cluster first?"})
    assert "m" + view.ids["deploy"][-8:].lower() in answered
    view.get(f"/session/{session_id}")
    table = view.wait(lambda d: d.find_element(By.ID, "injections"))
    assert view.ids["deploy"] in table.text and "prompt" in table.text and "full" in table.text
    view.shot("session-injections")
