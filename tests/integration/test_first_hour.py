"""Trust on first contact: what a new user hit in the first hour, each through the
real CLI and a real daemon on a throwaway store."""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import Env
from memoryd.bench.run import render
from memoryd.cli import doctor
from memoryd.daemon.process.lifecycle import report_line


def _fresh_home(env: Env) -> dict[str, str]:
    """HOME and XDG config inside the throwaway base: no real client config is read or written."""
    home = env.base / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "CODEX_HOME": str(home / ".codex")}


# -- 1. doctor on a plain install ------------------------------------------------------------------

def test_doctor_checks_exactly_the_distributions_runtime_requirements() -> None:
    wanted = [r.split(";")[0] for r in importlib.metadata.requires("memoryd") or [] if "extra" not in r]
    names = doctor.runtime_requirements()
    assert len(names) == len(wanted) and all(w.startswith(n) for n, w in zip(names, wanted))
    assert "python-ulid" not in names and "PyStemmer" in names  # a test extra is not a runtime need
    checked = {c.name for c in doctor.check_packages()}
    assert "package Stemmer" in checked and "package ulid" not in checked


def test_doctor_exits_0_on_a_healthy_store_with_and_without_the_daemon(env: Env) -> None:
    home = _fresh_home(env)
    first = env.memoryd("doctor", "--json", **home)
    assert first.returncode == 0, first.stdout
    env.start_daemon()
    report = json.loads(env.memoryd("doctor", "--json", **home).stdout)
    assert report["ok"] and report["counts"]["fail"] == 0
    assert any(c["name"] == "daemon" and c["status"] == "ok" and "running" in c["detail"] for c in report["checks"])


# -- 8. small things a user notices -----------------------------------------------------------------

def _closed_reader(env: Env, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `memoryd ARGS` with its stdout a pipe whose reader is already gone (`| head` that quit)."""
    proc = subprocess.Popen([sys.executable, "-m", "memoryd", *args], env=env.environ(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(args, proc.returncode, b"", err)


def test_a_reader_that_stops_early_gets_no_traceback(daemon: Env) -> None:
    for args in (("status",), ("memories", "list"), ("--help",)):
        result = _closed_reader(daemon, *args)
        assert b"Traceback" not in result.stderr and b"BrokenPipe" not in result.stderr, result.stderr
        assert result.returncode == 0


def test_episodes_list_says_when_there_are_none(daemon: Env) -> None:
    listed = daemon.memoryd("episodes", "list")
    assert listed.returncode == 0 and listed.stdout.strip() == "no episodes"
    one = daemon.memoryd("episodes", "list", "sess-99")
    assert one.stdout.strip() == "no episodes in session sess-99"


def test_bench_table_columns_line_up_whatever_the_cell_widths() -> None:
    rows = [{"metric": "hook session-start (process end to end)", "size": "-", "p50_ms": 77.6, "p99_ms": 91.6,
             "target": "<= 150 ms", "met": True},
            {"metric": "bridge RSS", "size": "100,000 memories", "value": 22.5, "unit": "MB", "target": "<= 30 MB",
             "met": False}]
    lines = render(rows).splitlines()
    starts = [[line.index(cell) for cell in ("<= ", "yes" if i == 1 else "NO" if i == 2 else "met")]
              for i, line in enumerate(lines) if i]
    assert len({s[0] for s in starts}) == 1 and len({s[1] for s in starts}) == 1
    assert lines[0].index("target") == starts[0][0]
    assert lines[1].index("ms ") + 2 == lines[2].index("MB") + 2  # numbers right-aligned on their unit


def test_the_daemon_start_line_is_words_and_json_only_when_asked(env: Env) -> None:
    env.start_daemon()
    assert env.memoryd("stop").returncode == 0
    text = env.daemon_log()
    line = next(ln for ln in text.splitlines() if " opened: " in ln)
    assert "{" not in line and "0 memories, 0 tombstones" in line
    assert env.memoryd("serve", "--detach", "--log-format", "json").returncode == 0
    assert env.memoryd("stop").returncode == 0
    log = (env.home / "log" / "memoryd.log").read_text().splitlines()
    opened = [json.loads(ln) for ln in log if ln.startswith("{") and "opened" in ln]
    assert opened and opened[-1]["memories"] == 0 and opened[-1]["level"] == "info"
    assert report_line({"memories": 3, "tombstones": 0, "bad_files": 2, "replayed_from_seq": 0}) == \
        "3 memories, 0 tombstones, 0 pending reloaded; log replayed from the start; bad files 2"


def test_codex_init_keeps_no_backup_of_a_file_it_wrote_itself(env: Env) -> None:
    home = _fresh_home(env)
    assert env.memoryd("init", "--client", "codex", **home).returncode == 0
    codex = env.base / "home" / ".codex"
    assert (codex / "config.toml").exists() and not list(codex.glob("*.bak"))
    (codex / "config.toml").write_text('model = "o3"\n')  # the user's own file: a rerun backs it up
    assert env.memoryd("init", "--client", "codex", **home).returncode == 0
    assert (codex / "config.toml.bak").read_text() == 'model = "o3"\n'


# -- 3. ids people can type -------------------------------------------------------------------------

def _agent(env: Env) -> Any:
    from test_memories_cli import Agent

    return Agent(env)


def test_memory_verbs_take_a_unique_prefix_like_git(daemon: Env) -> None:
    agent = _agent(daemon)
    memory = agent.write("Deploys go through the staging cluster first.")["id"]
    others = [agent.write(f"Note {n}: the {word} service owns its own schema.")["id"]
              for n, word in enumerate(("billing", "search", "auth"))]
    ids = [memory, *others]
    unique = next(memory[:n] for n in range(6, 27) if sum(i.startswith(memory[:n]) for i in ids) == 1)
    shown = daemon.memoryd("memories", "show", unique.lower())
    assert shown.returncode == 0 and memory in shown.stdout and "staging cluster" in shown.stdout
    assert daemon.memoryd("memories", "rm", unique, "--reason", "obsolete").returncode == 0
    restored = daemon.memoryd("memories", "restore", unique)  # a removed memory's prefix resolves too
    assert restored.returncode == 0 and f"restored {memory}" in restored.stdout
    shared = os.path.commonprefix(ids)
    if len(shared) >= 6:  # ids minted within ~4 minutes share their first 6 characters
        ambiguous = daemon.memoryd("memories", "show", shared)
        assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
        assert all(i in ambiguous.stderr for i in ids) and "staging cluster" in ambiguous.stderr
    short = daemon.memoryd("memories", "show", "01J")
    assert short.returncode == 2 and "too short" in short.stderr and "6 characters" in short.stderr
    readme = daemon.memoryd("memories", "show", "01J…")
    assert readme.returncode == 2 and "not a memory id" in readme.stderr
    none = daemon.memoryd("memories", "show", "7ZZZZZZZ")
    assert none.returncode == 1 and "no memory id starts with" in none.stderr
    agent.conn.close()


# -- 4. edit, not only remove -----------------------------------------------------------------------

def test_memories_edit_with_content_updates_through_the_tool_and_keeps_history(daemon: Env) -> None:
    agent = _agent(daemon)
    memory = agent.write("Deploys go through the staging cluster first.")["id"]
    edited = daemon.memoryd("memories", "edit", memory[:10], "--content", "Deploys go through staging-2 first.")
    assert edited.returncode == 0, edited.stderr
    assert f"updated {memory}" in edited.stdout
    shown = json.loads(daemon.memoryd("memories", "show", memory, "--json").stdout)
    assert shown["content"] == "Deploys go through staging-2 first."
    assert [e["status"] for e in shown["history"] if e["kind"] == "update"] == ["updated"]
    same = daemon.memoryd("memories", "edit", memory, "--content", "Deploys go through staging-2 first.")
    assert same.returncode == 0 and "unchanged" in same.stdout
    agent.conn.close()


def test_memories_edit_refused_by_a_gate_says_why_and_writes_nothing(daemon: Env) -> None:
    agent = _agent(daemon)
    memory = agent.write("The staging database lives on db-staging.internal.")["id"]
    before = (daemon.home / "memories" / f"{memory}.md").read_bytes()
    secret = "The staging password is AKIAIOSFODNN7EXAMPLE and secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    refused = daemon.memoryd("memories", "edit", memory, "--content", secret)
    assert refused.returncode == 1
    assert "not saved: credential" in refused.stdout and "nothing was written" in refused.stdout
    assert "acknowledge_credential" not in refused.stdout  # the agent's parameter: no terminal flag
    assert (daemon.home / "memories" / f"{memory}.md").read_bytes() == before
    transient = daemon.memoryd("memories", "edit", memory, "--content", "Right now staging is down for repairs.")
    assert transient.returncode == 1 and "--acknowledge-transient" in transient.stdout, transient.stdout
    assert "acknowledge_transient=true" not in transient.stdout
    empty = daemon.memoryd("memories", "edit", memory, "--content", "  ")
    assert empty.returncode == 2 and "empty" in empty.stderr
    agent.conn.close()


def test_memories_edit_opens_the_editor_and_saves_what_it_wrote(daemon: Env) -> None:
    agent = _agent(daemon)
    memory = agent.write("Deploys go through the staging cluster first.")["id"]
    editor = daemon.base / "editor.sh"  # an $EDITOR that rewrites the file it is given
    editor.write_text("#!/bin/sh\nsed -i 's/staging cluster/canary ring/' \"$1\"\n")
    editor.chmod(0o700)
    done = daemon.memoryd("memories", "edit", memory, EDITOR=str(editor), VISUAL="")
    assert done.returncode == 0, done.stderr
    assert json.loads(daemon.memoryd("memories", "show", memory, "--json").stdout)["content"] == \
        "Deploys go through the canary ring first."
    failing = daemon.memoryd("memories", "edit", memory, EDITOR="false", VISUAL="")
    assert failing.returncode == 1 and "editor exited with 1" in failing.stderr
    agent.conn.close()


# -- 5. sessions that are not sessions --------------------------------------------------------------

def _session_starts(env: Env) -> list[dict[str, Any]]:
    return [e for e in env.events() if e["kind"] == "session_start"]


def test_operator_calls_take_no_agent_session_numbers_and_share_one_hidden_session(daemon: Env) -> None:
    first = _agent(daemon)
    assert first.conn.session_id == "sess-1"
    first.write("Deploys go through the staging cluster first.")
    for args in (("memories", "list"), ("memories", "search", "deploy"), ("pending",), ("sessions",),
                 ("status",), ("episodes", "list"), ("memories", "list", "--removed")):
        assert daemon.memoryd(*args).returncode == 0, args
    second = _agent(daemon)
    assert second.conn.session_id == "sess-3"  # sess-2 is the CLI's one session, however many verbs ran
    clients = [e.get("client") or "" for e in _session_starts(daemon)]
    assert sum(c.startswith("memoryd-cli") for c in clients) == 1
    listed = json.loads(daemon.memoryd("sessions", "--json").stdout)["sessions"]
    assert {r["session_id"] for r in listed} == {"sess-1", "sess-3"}
    handoff = second.call("episode_handoff")  # the walk back never lands on an operator session
    assert handoff.get("prior_session_id") in (None, "sess-1")
    first.conn.close()
    second.conn.close()


def _hook(env: Env, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=json.dumps(payload),
                          env=env.environ(), capture_output=True, text=True, timeout=30, cwd=env.base, check=False)


def test_hooks_after_a_finished_session_leave_no_empty_follow_on(daemon: Env) -> None:
    from memoryd.client.connection import Connection

    bridge = Connection({"client": "claude-code/1", "client_session": "cc-42"},
                        endpoint=f"ipc://{daemon.runtime}/memoryd.sock", autospawn=False)
    bridge.connect()
    session = bridge.session_id
    bridge.call("call", {"tool": "memory_session_finish", "arguments": {
        "session_id": session, "summary": "done", "handoff": "Next: ship the rollback step."}})
    hook = {"session_id": "cc-42", "cwd": str(daemon.base)}
    assert _hook(daemon, "stop", {**hook, "last_assistant_message": "All done."}).returncode == 0
    assert _hook(daemon, "session-end", {**hook, "reason": "exit"}).returncode == 0
    bridge.close()
    assert [e["session"] for e in _session_starts(daemon)] == [session]
    rows = json.loads(daemon.memoryd("sessions", "--all", "--json").stdout)["sessions"]
    assert [(r["session_id"], r["ended"]) for r in rows] == [(session, "finished")]


# -- 2. every README recipe runs as written on a fresh install --------------------------------------
#
# Convention: a fenced `sh` block of README.md runs, line by line, unless the line before it is an
# HTML comment `<!-- not run: why -->`. Lines that start a long-lived server (`memoryd serve`
# in the foreground, `memoryd ui`) are skipped. `memoryd` is this venv's; HOME and the store are
# throwaway; `01J…` stands for a memory id (the test puts in a prefix of one it wrote, as a person
# would type it) and `pending-3` for a pending id. The files the import recipe names are the
# import fixtures, put where the recipe says.

README = Path(__file__).resolve().parents[2] / "README.md"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
LONG_RUNNING = ("memoryd serve", "memoryd ui")


def readme_blocks() -> list[list[str]]:
    """The command lines of every README `sh` block meant to run, in README order."""
    blocks, lines = [], README.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "```sh":
            continue
        before = next((p.strip() for p in reversed(lines[:i]) if p.strip()), "")
        body = list(itertools.takewhile(lambda x: x.strip() != "```", lines[i + 1:]))
        if not before.startswith("<!-- not run:"):
            blocks.append([c for c in body if c.strip() and not c.lstrip().startswith("#")])
    return blocks


def _recipe_env(env: Env) -> tuple[dict[str, str], Path]:
    home = env.base / "home"
    (home / "mcp").mkdir(parents=True)
    shutil.copytree(FIXTURES / "bettermemory" / "store", home / ".claude-memory")
    shutil.copy(FIXTURES / "server-memory" / "memory.jsonl", home / "mcp" / "memory.jsonl")
    shutil.copytree(FIXTURES / "markdown" / "notes", home / "notes")
    work = env.base / "work"
    work.mkdir()
    shutil.copy(FIXTURES / "markdown" / "CLAUDE.md", work / "CLAUDE.md")
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return env.environ(HOME=str(home), PATH=path, GIT_CONFIG_NOSYSTEM="1"), work


_SEED = """
import json
from memoryd.client.connection import Connection

agent = Connection({"client": "agent/1", "project": "web"})  # starts the daemon, as a bridge does
agent.connect()
memory = agent.call("call", {"tool": "memory_write", "arguments": {
    "content": "Deploys of web go through the staging cluster first.", "scopes": ["projects:web"]}})
pending = agent.call("call", {"tool": "memory_write", "arguments": {
    "content": "The user prefers small focused commits.", "category": "user-inference", "scopes": ["user"]}})
agent.close(say_bye=False)  # its session stays open, so the pending write stays decidable
print(json.dumps([memory["id"][:10], pending["pending_id"]]))
"""


def _seed(environ: dict[str, str]) -> tuple[str, str]:
    """What the curation recipe acts on, written by an agent in the recipe's environment: a memory
    in project `web` (its id's first 10 characters, as a person types it) and a pending claim."""
    done = subprocess.run([sys.executable, "-c", _SEED], env=environ, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    memory, pending = json.loads(done.stdout)
    return memory, pending


def test_readme_recipes_run_as_written_on_a_fresh_install(env: Env) -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 3 and any("sync init" in line for b in blocks for line in b)
    environ, work = _recipe_env(env)
    ran = 0
    for block in blocks:
        if any("sync init" in line for line in block):  # the case: no daemon running yet
            subprocess.run(["memoryd", "stop"], env=environ, capture_output=True, timeout=30, check=False)
            assert env.status() is None
        if any("01J…" in line for line in block):
            memory, pending = _seed(environ)
            block = [line.replace("01J…", memory).replace("pending-3", pending) for line in block]
        for line in block:
            if line.lstrip().startswith(LONG_RUNNING):
                continue
            done = subprocess.run(["sh", "-c", line], env=environ, cwd=work, capture_output=True, text=True,
                                  timeout=120, check=False)
            assert done.returncode == 0, f"README line failed: {line}\n{done.stdout}\n{done.stderr}"
            ran += 1
    assert ran >= 15
    assert env.status() is not None  # the verbs started the daemon themselves


# -- 10. install like a tool ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MEMORYD_SLOW_TESTS"), reason="installs from the package index for minutes; "
                    "MEMORYD_SLOW_TESTS=1 runs it")
def test_pipx_install_from_a_clone_gives_a_memoryd_whose_doctor_passes(env: Env) -> None:
    """README "install as a tool": `pipx install .` in a copy of the clone (the build writes beside
    the sources), pipx itself from PyPI into a throwaway venv, everything under the test's base."""
    base = env.base
    clone = base / "clone"
    shutil.copytree(README.parent, clone, ignore=shutil.ignore_patterns(".venv", ".git", "build", "__pycache__",
                                                                        "*.egg-info", "artifacts"))
    subprocess.run([sys.executable, "-m", "venv", str(base / "tools")], check=True, timeout=120)
    got = subprocess.run([str(base / "tools" / "bin" / "pip"), "install", "-q", "pipx"], capture_output=True,
                         text=True, timeout=300, check=False)
    if got.returncode != 0:
        pytest.skip(f"pipx cannot be installed here: {got.stderr.strip()[-300:]}")
    tool_env = env.environ(HOME=str(base / "home"), PIPX_HOME=str(base / "pipx"), PIPX_BIN_DIR=str(base / "bin"),
                           PIPX_MAN_DIR=str(base / "man"), PATH=f"{base / 'bin'}:{os.environ.get('PATH', '')}")
    installed = subprocess.run([str(base / "tools" / "bin" / "pipx"), "install", "."], cwd=clone, env=tool_env,
                               capture_output=True, text=True, timeout=600, check=False)
    assert installed.returncode == 0, installed.stderr[-2000:]
    memoryd = str(base / "bin" / "memoryd")
    version = subprocess.run([memoryd, "--version"], env=tool_env, capture_output=True, text=True, timeout=60,
                             check=False)
    assert version.stdout.strip() == f"memoryd {importlib.metadata.version('memoryd')}"
    doctor_run = subprocess.run([memoryd, "doctor", "--json"], env=tool_env, capture_output=True, text=True,
                                timeout=120, check=False)
    report = json.loads(doctor_run.stdout)
    assert doctor_run.returncode == 0 and report["ok"], doctor_run.stdout
    python = next(c for c in report["checks"] if c["name"] == "python")["detail"]
    assert str(base / "pipx") in python  # the tool's own environment, not this checkout's venv
    assert {"package Stemmer", "package zmq"} <= {c["name"] for c in report["checks"]}
