"""`memoryd install-service` from an installed package, not the checkout (issue 41): the unit and
plist templates are package data. The test builds the wheel, installs it (not editable) into a
fresh venv, and runs `install-service` there against a throwaway config home; the unit it writes
passes `systemd-analyze verify` where that exists. The repository's `systemd/` folder is the
readable copy: it must say exactly what the package ships.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_readable_copies_are_the_shipped_templates() -> None:
    for name in ("memoryd.service", "com.memoryd.daemon.plist"):
        assert (ROOT / "systemd" / name).read_text() == (ROOT / "src" / "memoryd" / "units" / name).read_text()


def test_install_service_from_a_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300, check=False)
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"cannot build a wheel here: {built.stderr.strip()[-200:]}")
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("memoryd-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = next((venv / "lib").glob("python3*/site-packages"))
    # memoryd from the wheel (unpacked, as pip installs it), its dependencies from this venv's
    # site-packages: listed after the wheel, and without this venv's editable-install hook.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                    str(target), str(wheel)], check=True, timeout=300, capture_output=True)
    (target / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    config = tmp_path / "config"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(config),
           "MEMORYD_HOME": str(tmp_path / "store")}
    python = venv / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import memoryd; print(memoryd.__file__)"], env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert where.startswith(str(target)), where  # the wheel's copy, not the checkout
    done = subprocess.run([str(python), "-m", "memoryd", "install-service"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    unit = config / "systemd" / "user" / "memoryd.service"
    text = unit.read_text()
    assert f"ExecStart={python} -m memoryd serve" in text or f'ExecStart="{python}"' in text, text
    assert "{python}" not in text and "{store}" not in text
    analyze = shutil.which("systemd-analyze")
    if analyze:
        verified = subprocess.run([analyze, "--user", "verify", str(unit)], env={**env, "PATH": "/usr/bin:/bin"},
                                  capture_output=True, text=True, timeout=60, check=False)
        problems = [line for line in verified.stderr.splitlines() if str(unit) in line or "memoryd.service" in line]
        assert not problems, verified.stderr
