"""The one client (client/connection.py) and what its callers rely on: a daemon's error comes back
as the error tree, a process we may not signal is alive, a hook that may not start a daemon fails
at once when none runs, and the web view answers each daemon error with its HTTP status."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator

import pytest

from memoryd.client import spawn
from memoryd.client.connection import unwrap
from memoryd.errors import DaemonUnavailable, InvalidParams, MemorydError, from_wire
from memoryd.hooks import common as hooks
from memoryd.ui.server import http_status


@pytest.fixture
def no_daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    runtime = tempfile.mkdtemp(dir="/tmp")  # short: the ipc path limit is ~107 bytes
    monkeypatch.setenv("MEMORYD_RUNTIME_DIR", runtime)
    yield runtime
    shutil.rmtree(runtime, ignore_errors=True)


def test_an_error_reply_is_raised_as_the_error_tree() -> None:
    error = {"code": -32602, "kind": "invalid_params", "message": "invalid parameter 'x'", "data": {"param": "x"}}
    with pytest.raises(MemorydError) as raised:
        unwrap({"id": 1, "ok": False, "error": error})
    assert (raised.value.code, raised.value.kind, raised.value.data) == (-32602, "invalid_params", {"param": "x"})
    assert unwrap({"id": 1, "ok": True, "result": {"a": 1}}) == {"a": 1}


def test_a_process_we_may_not_signal_is_alive_and_one_that_is_gone_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    def gone(pid: int, sig: int) -> None:
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(os, "kill", refuse)
    assert spawn.pid_alive(4242) is True
    monkeypatch.setattr(os, "kill", gone)
    assert spawn.pid_alive(4242) is False


@pytest.mark.parametrize("event", ["pre-tool", "session-end"])
def test_a_hook_that_may_not_start_a_daemon_fails_at_once_when_none_runs(no_daemon: str, event: str) -> None:
    began = time.monotonic()
    with pytest.raises(DaemonUnavailable):
        hooks.Daemon({"client": "claude-code", "client_session": "s-1"}, event)
    assert time.monotonic() - began < 0.5


def test_the_web_view_answers_each_daemon_error_with_its_status() -> None:
    unknown = from_wire({"code": -32002, "kind": "unknown_memory", "message": "unknown memory: 01X"})
    assert [http_status(e) for e in (DaemonUnavailable("ipc:///x", "down"), unknown, InvalidParams("id", "bad"),
                                     MemorydError("a bug"))] == [503, 404, 400, 500]
