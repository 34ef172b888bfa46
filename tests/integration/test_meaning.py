"""Search by meaning: the encoder's numbers, its pinned weights, and a real daemon that finds a
memory by what it says — without any network access while it loads and uses the model."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from tests.harness import Env, call, ensure_model

from memoryd.daemon.encoder import model as encoder


@pytest.fixture(autouse=True, scope="module")
def model_installed() -> None:
    ensure_model()


def test_the_encoder_gives_the_models_published_similarities() -> None:
    # sentence-transformers' own usage page lists these cosines for all-MiniLM-L6-v2.
    model = encoder.Encoder.load()
    vectors = model.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    sims = vectors @ vectors.T
    assert abs(sims[0, 1] - 0.6660) < 0.002 and abs(sims[0, 2] - 0.1046) < 0.002 and abs(sims[1, 2] - 0.1411) < 0.002
    one = model.encode_one("He drove to the stadium.")
    assert abs(float(one @ vectors[2]) - 1.0) < 1e-5  # alone or batched with longer texts: one vector


def test_weights_that_are_not_the_pinned_ones_are_refused(tmp_path: Path) -> None:
    with zipfile.ZipFile(encoder.model_zip()) as real:
        tokenizer = real.read("tokenizer.json")
    header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    fake = tmp_path / "model.zip"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("model.safetensors", len(header).to_bytes(8, "little") + header + b"\0\0\0\0")
        archive.writestr("tokenizer.json", tokenizer)
    with pytest.raises(encoder.EncoderUnavailable, match="sha256"):
        encoder.Encoder.load(fake)


# Installed in the daemon's interpreter: every attempt to open a network socket or resolve a name
# is written down and blocked (AF_UNIX stays allowed; the daemon's own ZeroMQ socket is ipc, in
# libzmq), so a model load that needed the network would fail the search below as well.
AUDIT = textwrap.dedent("""
    import socket, sys
    _LOG = {log!r}
    def _note(what):
        with open(_LOG, "a") as f:
            f.write(what + "\\n")
    def _hook(event, args):
        if event == "socket.__new__" and args[1] not in (socket.AF_UNIX,):
            _note(f"socket family {{args[1]}}")
            raise PermissionError("network sockets are blocked in this test")
        elif event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"):
            _note(f"{{event}} {{args[:2]!r}}")
            raise PermissionError("network access is blocked in this test")
    sys.addaudithook(_hook)
""")


def test_a_daemon_finds_a_memory_by_meaning_and_opens_no_network_socket() -> None:
    env = Env(meaning=True)
    log = env.base / "network.log"
    site = env.base / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(AUDIT.format(log=str(log)))
    env.vars["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        env.start_daemon()

        async def scenario() -> tuple[dict, dict, dict]:
            async with env.session() as s:
                for text in ("Deploys to production happen only from a signed release tag via `make release`.",
                             "The billing service stores money as integer cents, never floats.",
                             "Use `uv sync` to install the Python dependencies of this repo."):
                    await call(s, "memory_write", content=text, scopes=["user"], category="fact")

                async def health() -> dict:
                    return await call(s, "memory_health")
                deadline = time.monotonic() + 60
                meaning = (await health())["search_by_meaning"]
                while meaning.get("vectors", 0) < 3 and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                    meaning = (await health())["search_by_meaning"]
                found = await call(s, "memory_search", query="how do I ship this to prod?", max_results=3)
                return meaning, found, await health()

        meaning, found, _ = asyncio.run(scenario())
        assert meaning == {"state": "ready", "vectors": 3}, meaning
        top = found["results"][0]
        assert "signed release tag" in top["content"], found
        assert all(top["similarity"] > r["similarity"] for r in found["results"][1:]), found
        env.memoryd("stop")
        assert (env.home / "state" / "vectors.bin").stat().st_size > 3 * (384 + 4)  # int8 rows and their scales
        assert not log.exists(), log.read_text()  # no socket but AF_UNIX, no name lookup, no URL
    finally:
        env.cleanup()


def test_memories_search_lists_only_matches_with_their_scores() -> None:
    """Search by meaning always has a nearest memory; `memoryd memories search` shows a person the
    ones that share a word with the query or are close in meaning, each with its scores."""
    env = Env(meaning=True)
    try:
        env.start_daemon()

        async def write_all() -> None:
            async with env.session() as s:
                for text in ("Deploys to production happen only from a signed release tag via `make release`.",
                             "The billing service stores money as integer cents, never floats."):
                    await call(s, "memory_write", content=text, scopes=["user"], category="fact")
                deadline = time.monotonic() + 60
                while (await call(s, "memory_health"))["search_by_meaning"].get("vectors", 0) < 2:
                    assert time.monotonic() < deadline, "the encoder never embedded the memories"
                    await asyncio.sleep(0.2)
        asyncio.run(write_all())

        matched = env.memoryd_json("memories", "search", "signed release tag")
        assert [h["content"][:11] for h in matched["results"]] == ["Deploys to "], matched
        assert matched["not_matching"] == 1
        table = env.memoryd("memories", "search", "signed release tag").stdout
        assert "SCORE" in table and "WORDS" in table and "MEANING" in table and "1 matching memory" in table
        assert "1 nearest by meaning left out" in table and "--all" in table

        unrelated = env.memoryd_json("memories", "search", "watering the tomato plants")
        assert unrelated["results"] == [] and unrelated["not_matching"] == 2
        everything = env.memoryd_json("memories", "search", "watering the tomato plants", "--all")
        assert len(everything["results"]) == 2 and all(h["similarity"] < 0.5 for h in everything["results"])
    finally:
        env.cleanup()
