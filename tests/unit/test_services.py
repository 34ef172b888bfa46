"""The systemd unit and launchd plist templates, and `memoryd install-service`."""

from __future__ import annotations

import io
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.cli import services


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME with the XDG and memoryd locations inside it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "store"))
    monkeypatch.delenv("MEMORYD_LOG_DIR", raising=False)
    return tmp_path


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*"))


def test_rendered_unit_runs_the_given_interpreter_as_a_notify_service() -> None:
    unit = services.render_systemd_unit("/opt/venv/bin/python", store="/srv/mem")

    assert "Type=notify" in unit
    assert 'ExecStart="/opt/venv/bin/python" -m memoryd serve' in unit
    assert "Restart=on-failure" in unit
    assert "WantedBy=default.target" in unit
    assert "{" not in unit  # every placeholder was filled


def test_the_service_does_not_restart_loop_on_a_bad_config_or_a_refused_store() -> None:
    unit = services.render_systemd_unit("/opt/venv/bin/python", store="/srv/mem")
    assert "RestartPreventExitStatus=2 3" in unit  # exit 2: a config it refuses; 3: a store it cannot open


def test_rendered_unit_pins_the_store_it_makes_writable() -> None:
    unit = services.render_systemd_unit(sys.executable, store="/srv/mem")

    assert 'Environment="MEMORYD_HOME=/srv/mem"' in unit
    assert 'ReadWritePaths=-"/srv/mem"' in unit
    assert "ProtectSystem=strict" in unit


def test_rendered_unit_escapes_specifiers_and_variables_in_paths() -> None:
    unit = services.render_systemd_unit("/opt/v$1/100%/python", store="/srv/50%")

    assert 'ExecStart="/opt/v$$1/100%%/python"' in unit
    assert 'ReadWritePaths=-"/srv/50%%"' in unit


def test_rendered_unit_refuses_an_interpreter_path_systemd_cannot_run() -> None:
    with pytest.raises(services.ServiceError, match="cannot carry the path"):
        services.render_systemd_unit('/opt/"odd"/python', store="/srv/mem")


def test_rendered_plist_parses_and_runs_the_given_interpreter() -> None:
    rendered = services.render_launchd_plist("/opt/venv/bin/python", "/logs/memoryd.log")

    plist = plistlib.loads(rendered.encode())

    assert plist["Label"] == services.LAUNCHD_LABEL
    assert plist["ProgramArguments"] == ["/opt/venv/bin/python", "-m", "memoryd", "serve"]
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["StandardOutPath"] == plist["StandardErrorPath"] == "/logs/memoryd.log"


def test_rendered_plist_escapes_xml_special_characters_in_paths() -> None:
    plist = plistlib.loads(services.render_launchd_plist("/a&b/<py>", "/logs/x&y.log").encode())

    assert plist["ProgramArguments"][0] == "/a&b/<py>"
    assert plist["StandardOutPath"] == "/logs/x&y.log"


def test_missing_template_raises_an_error_naming_where_it_was_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "TEMPLATE_DIR", tmp_path / "nowhere")

    with pytest.raises(services.ServiceError, match="nowhere"):
        services.render_systemd_unit(sys.executable, store="/srv/mem")


def test_print_only_prints_the_unit_and_writes_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    before = _files_under(home)
    out = io.StringIO()

    assert services.install_service(print_only=True, enable=False, out=out) == 0

    assert "Type=notify" in out.getvalue()
    assert f'"{sys.executable}"' in out.getvalue()
    assert _files_under(home) == before


def test_install_writes_the_unit_under_xdg_config_home_and_prints_the_enable_command(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    out = io.StringIO()

    assert services.install_service(print_only=False, enable=False, out=out) == 0

    unit = home / ".config" / "systemd" / "user" / "memoryd.service"
    assert unit.read_text() == services.render_systemd_unit(sys.executable, store=home / "store")
    assert (home / "store").is_dir()  # the unit can only grant write access to a store that exists
    assert "systemctl --user daemon-reload && systemctl --user enable --now memoryd.service" in out.getvalue()


def test_reinstalling_an_unchanged_unit_leaves_the_file_alone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    services.install_service(print_only=False, enable=False, out=io.StringIO())
    unit = home / ".config" / "systemd" / "user" / "memoryd.service"
    first_mtime = unit.stat().st_mtime_ns
    out = io.StringIO()

    assert services.install_service(print_only=False, enable=False, out=out) == 0

    assert "unchanged" in out.getvalue()
    assert unit.stat().st_mtime_ns == first_mtime


def test_install_with_enable_runs_the_enable_commands_in_order(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    ran: list[tuple[str, ...]] = []

    def fake_run(cmd: tuple[str, ...], **_: object) -> subprocess.CompletedProcess[bytes]:
        ran.append(tuple(cmd))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)

    assert services.install_service(print_only=False, enable=True, out=io.StringIO()) == 0
    assert ran == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", "memoryd.service"),
    ]


def test_install_with_enable_returns_the_failing_commands_exit_code(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(subprocess, "run", lambda cmd, **_: subprocess.CompletedProcess(cmd, 5))

    assert services.install_service(print_only=False, enable=True, out=io.StringIO()) == 5


def test_install_on_macos_writes_a_launch_agent_with_this_interpreter(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    out = io.StringIO()

    assert services.install_service(print_only=False, enable=False, out=out) == 0

    agent = home / "Library" / "LaunchAgents" / "com.memoryd.daemon.plist"
    plist = plistlib.loads(agent.read_bytes())
    assert plist["ProgramArguments"][0] == sys.executable
    assert Path(plist["StandardErrorPath"]).parent.is_dir()  # launchd does not create it
    assert f"launchctl load -w {agent}" in out.getvalue()


def test_install_on_an_unsupported_platform_exits_1_and_writes_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    before = _files_under(home)

    assert services.install_service(print_only=False, enable=False, out=io.StringIO()) == 1

    assert "Linux and macOS only" in capsys.readouterr().err
    assert _files_under(home) == before


def _verify_env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    # `--user` needs a runtime dir to start its in-process manager; containers often lack one.
    if not os.path.isdir(env.get("XDG_RUNTIME_DIR", "")):
        scratch.mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(scratch)
    return env


def test_rendered_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    unit = tmp_path / "memoryd.service"
    unit.write_text(services.render_systemd_unit(sys.executable, store=tmp_path / "store"))

    def verify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([analyze, *args, "verify", str(unit)], capture_output=True, text=True,
                              check=False, env=env, timeout=60)

    result = verify("--user", env=_verify_env(tmp_path / "run"))
    if "Failed to initialize manager" in result.stderr:
        result = verify()

    # verify exits 0 on mere warnings, so the unit is clean only if nothing names it.
    complaints = [line for line in result.stderr.splitlines() if "memoryd" in line]
    assert result.returncode == 0, result.stderr
    assert complaints == []
