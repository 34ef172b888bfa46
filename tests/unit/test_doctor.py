"""`memoryd doctor`: findings, fixes and the exit code (fails only, never warnings)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import paths
from memoryd.cli import clients, doctor


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HOME, store, config and a short runtime dir, all throwaway."""
    runtime = tempfile.mkdtemp(dir="/tmp")  # short: the ipc path limit is ~107 bytes
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "store"))
    monkeypatch.setenv("MEMORYD_CONFIG", str(tmp_path / "config.yaml"))
    monkeypatch.setenv("MEMORYD_RUNTIME_DIR", runtime)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    yield tmp_path
    shutil.rmtree(runtime, ignore_errors=True)


def run(as_json: bool = False) -> tuple[int, str]:
    out = io.StringIO()
    code = doctor.run_doctor(out=out, as_json=as_json)
    return code, out.getvalue()


def findings() -> dict[str, doctor.Check]:
    return {check.name: check for check in doctor.collect_checks()}


def write_status(**overrides: Any) -> None:
    status = {"pid": os.getpid(), "version": memoryd.__version__, "protocol": memoryd.PROTOCOL,
              "endpoint": paths.endpoint(), "store": str(paths.store_root()),
              "started_at": "2025-01-01T00:00:00Z"}
    paths.status_path().write_text(json.dumps(status | overrides))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_doctor_reports_the_daemon_as_not_running_when_no_status_file_exists(env: Path) -> None:
    code, text = run()

    assert code == 0
    assert "not running" in findings()["daemon"].detail
    assert "daemon" in text and "not running" in text


def test_doctor_exits_zero_when_there_are_only_warnings(env: Path) -> None:
    checks = doctor.collect_checks()

    assert any(c.status == "warn" for c in checks)  # no client is registered in a fresh HOME
    assert not any(c.status == "fail" for c in checks)
    assert run()[0] == 0


def test_every_finding_that_is_not_ok_says_how_to_fix_it(env: Path) -> None:
    paths.config_file().write_text("- a list\n")
    write_status(pid=dead_pid())

    for check in doctor.collect_checks():
        assert check.status == "ok" or check.fix, check


def test_doctor_fails_on_a_config_file_that_is_not_a_mapping(env: Path) -> None:
    paths.config_file().write_text("- just\n- a list\n")

    code, text = run()

    assert code == 1
    assert findings()["config"].status == "fail"
    assert "fix:" in text


def test_doctor_accepts_a_config_file_that_parses(env: Path) -> None:
    paths.config_file().write_text("episode_ttl_days: 7\n")

    assert findings()["config"].status == "ok"


def test_doctor_fails_on_a_socket_path_over_the_ipc_limit(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_RUNTIME_DIR", "/tmp/" + "x" * 120)

    assert findings()["socket path"].status == "fail"
    assert run()[0] == 1


def test_doctor_reports_the_socket_path_length_against_the_limit(env: Path) -> None:
    detail = findings()["socket path"].detail

    assert f"of {paths.MAX_IPC_PATH_BYTES} bytes" in detail


def test_doctor_fails_on_a_group_writable_runtime_dir(env: Path) -> None:
    os.chmod(paths.runtime_dir(), 0o770)

    check = findings()["runtime dir"]

    assert check.status == "fail" and "chmod 700" in check.fix


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS has no XDG_RUNTIME_DIR fallback")
def test_doctor_notes_the_cache_dir_fallback_when_xdg_runtime_dir_is_unset(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYD_RUNTIME_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    check = findings()["runtime dir"]

    assert check.status == "warn"
    assert "XDG_RUNTIME_DIR is unset" in check.detail and "fallback" in check.detail


def test_doctor_fails_when_the_store_cannot_be_created(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (env / "a-file").write_text("")
    monkeypatch.setenv("MEMORYD_HOME", str(env / "a-file" / "store"))

    check = findings()["store"]

    assert check.status == "fail" and "is not a directory" in check.detail


def test_doctor_reports_a_missing_store_as_created_on_first_start(env: Path) -> None:
    check = findings()["store"]

    assert check.status == "ok" and "created on first start" in check.detail


def test_doctor_reports_a_running_daemon_from_its_status_file(env: Path) -> None:
    write_status()

    check = findings()["daemon"]

    assert check.status == "ok" and f"pid {os.getpid()}" in check.detail


def test_doctor_flags_a_status_file_left_by_a_dead_daemon_as_stale(env: Path) -> None:
    write_status(pid=dead_pid())

    check = findings()["daemon"]

    assert check.status == "warn" and "stale" in check.detail
    assert str(paths.status_path()) in check.fix


def test_doctor_warns_on_version_skew_and_fails_on_protocol_skew(env: Path) -> None:
    write_status(version="0.0.1", protocol=memoryd.PROTOCOL + 1)

    found = findings()

    assert found["daemon version"].status == "warn" and found["daemon version"].fix == "memoryd restart"
    assert found["daemon protocol"].status == "fail"
    assert run()[0] == 1


def test_doctor_warns_on_an_unreadable_status_file(env: Path) -> None:
    paths.status_path().write_text("{truncated")

    assert findings()["daemon"].status == "warn"


def test_doctor_reports_a_client_registered_with_another_interpreter(env: Path) -> None:
    clients.register_client("cursor", False, out=io.StringIO(), python="/old/python")

    found = findings()

    assert found["client cursor"].status == "warn"
    assert found["client cursor"].fix == "memoryd init --client cursor"
    assert "clients" not in found  # one client is registered, so no overall warning


def test_doctor_json_output_has_a_stable_shape(env: Path) -> None:
    code, text = run(as_json=True)

    report = json.loads(text)
    assert code == 0 and report["ok"] is True and report["version"] == memoryd.__version__
    assert set(report["counts"]) == {"ok", "warn", "fail"}
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in report["checks"])


def test_a_check_that_crashes_becomes_a_failure_instead_of_a_traceback(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check_broken() -> list[doctor.Check]:
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_python, check_broken))

    code, text = run()

    assert code == 1
    assert "broken" in text and "boom" in text


def test_importing_doctor_loads_neither_zmq_nor_the_client_or_daemon(env: Path) -> None:
    probe = ("import sys, memoryd.cli.doctor; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'zmq' "
             "or m.startswith(('memoryd.client.', 'memoryd.daemon')) or m == 'memoryd.client'))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                            env=os.environ | {"PYTHONPATH": str(Path(memoryd.__file__).parents[1])})

    assert result.stdout.strip() == "[]", result.stderr
