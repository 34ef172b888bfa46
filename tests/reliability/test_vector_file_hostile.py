"""`state/vectors.bin` is derived state read back untrusted (daemon/memories/vectorfile.py).

A real daemon that searches by meaning saves its vectors at a clean stop; the file is then
replaced by a hostile one and the daemon started again. Whatever the file holds — a header length
of 2**62, a symlink to a FIFO, random rows of the right shape — the encoder thread keeps working,
every memory is embedded again, health says the file was discarded and why, and search by meaning
answers.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from harness import Env, call, ensure_model
from memoryd.daemon.memories import vectorfile

FACTS = ["Deploys go through the staging cluster first.", "The billing service retries webhooks three times.",
         "Card numbers never touch our servers."]


def health(env: Env, discarded: bool) -> dict[str, Any]:
    """memory_health's search-by-meaning part once every memory has its vector (and, when a file
    was `discarded`, once health says so)."""
    async def main() -> dict[str, Any]:
        async with env.session() as bridge:
            for _ in range(600):
                meaning = (await call(bridge, "memory_health"))["search_by_meaning"]
                if meaning.get("state") == "ready" and meaning.get("vectors", 0) >= len(FACTS) \
                        and bool(meaning.get("vector_file")) == discarded:
                    return dict(meaning)
                await anyio.sleep(0.05)
            return dict(meaning)
    return anyio.run(main)


def found(env: Env) -> list[str]:
    async def main() -> list[str]:
        async with env.session() as bridge:
            hits = (await call(bridge, "memory_search", query="how do we ship to prod", auto_scope=False))["results"]
            return [h["content"] for h in hits if h.get("similarity") is not None]
    return anyio.run(main)


def big_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:7] + (2**62).to_bytes(8, "little") + data[15:])


def fifo(path: Path) -> None:
    target = path.parent.parent.parent / "fifo"
    os.mkfifo(target)
    path.unlink()
    path.symlink_to(target)


def random_rows(path: Path) -> None:
    data = path.read_bytes()
    length = int.from_bytes(data[7:15], "little")
    head = data[: 15 + length]
    header = json.loads(data[15 : 15 + length])
    count, dims = len(header["ids"]), header["dims"]
    rng = random.Random(5)
    path.write_bytes(head + data[15 + length : 15 + length + 4 * count] + rng.randbytes(count * dims))


def other_dims(path: Path) -> None:
    """Rows of 8 values under a checksum that matches them: the checksum is no seal."""
    data = path.read_bytes()
    length = int.from_bytes(data[7:15], "little")
    header = json.loads(data[15 : 15 + length])
    rows, scales = vectorfile.quantize(np.eye(len(header["ids"]), 8, dtype=np.float32))
    path.write_bytes(vectorfile.file_bytes(header["model"], header["ids"], header["stamps"], 8, rows, scales))


@pytest.mark.parametrize("tamper", [big_header, fifo, random_rows, other_dims],
                         ids=["header-2**62", "fifo-link", "random-rows", "other-dims"])
def test_a_hostile_vector_file_is_thrown_away_and_every_memory_embedded_again(tamper: Any) -> None:
    ensure_model()
    env = Env(meaning=True)
    try:
        env.start_daemon()

        async def write() -> None:
            async with env.session() as bridge:
                for fact in FACTS:
                    await call(bridge, "memory_write", content=fact, scopes=["user"])
        anyio.run(write)
        first = health(env, discarded=False)
        assert first["vectors"] == len(FACTS) and "vector_file" not in first, first
        assert env.memoryd("stop").returncode == 0  # a clean stop saves the vectors
        vectors = env.home / "state" / "vectors.bin"
        assert vectors.stat().st_size > 0
        tamper(vectors)
        env.start_daemon()
        after = health(env, discarded=True)
        assert after["state"] == "ready" and after["vectors"] == len(FACTS), after
        assert "discarded" in after["vector_file"], after
        assert FACTS[0] in found(env)  # search by meaning answers with the re-embedded vectors
    finally:
        env.cleanup()
