"""Benchmark rows of the durable tier at 1k / 10k / 100k memories: bulk load, memory_write, memory_search,
memory_digest, starts and RSS, and the encoder's own cost (synthetic text, seeded vectors: docs/benchmark.md)."""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable

from memoryd import names
from memoryd.bench import kit
from memoryd.bench.kit import Bridge, Row, Throwaway, WireLoader, load_memories, pcts, progress, row
from memoryd.bench.sync import bench_sync

VOCABULARY = 20_000
ZIPF_OFFSET = 100
SAMPLES = 300
QUICK_SAMPLES = 120  # --quick: p50 holds steady; p99 is rougher
DIGEST_TARGET_MS = 10.0
BULK_TARGET_PER_S = 1_000
# Targets per store size (none at 1k): p50 of memory_write and memory_search; starts (s); RSS (MB).
WRITE_TARGETS_MS = {10_000: 2.0, 100_000: 3.0}
SEARCH_TARGETS_MS = {10_000: 20.0, 100_000: 30.0}
WARM_START_TARGETS_S = {10_000: 0.5, 100_000: 1.5}
COLD_START_TARGETS_S = {10_000: 3.0, 100_000: 5.0}  # to the first reply; vectors back-fill behind it
RSS_TARGETS_MB = {10_000: 150.0, 100_000: 400.0}  # with the encoder and a vector per memory
PROMPT_EMBED_TARGET_MS = 15.0
TYPED_PROMPT = "I need to change a column in an existing alembic migration, can I just edit the migration file?"
_SYLLABLES = ["ka", "lo", "mi", "ru", "te", "zo", "pa", "ne", "shi", "vo", "gu", "ra", "fe", "di", "mo", "xu"]


class Corpus:
    """Deterministic synthetic memories and queries."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < VOCABULARY:
            words.add("".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        self.rng.shuffle(self.words)
        self.weights = list(itertools.accumulate(1.0 / (rank + ZIPF_OFFSET) for rank in range(VOCABULARY)))
        self.serial = itertools.count()

    def sample(self, k: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.weights, k=k)

    def memory(self) -> str:
        return f"Record n{next(self.serial)} notes that " + " ".join(self.sample(self.rng.randint(10, 18))) + "."

    def query(self) -> str:
        return " ".join(self.sample(self.rng.randint(2, 3)))


def _size_label(n: int) -> str:
    return f"{n // 1000}k memories"


def _target(targets: dict[int, float], size: int, unit: str, value: float) -> tuple[str, bool]:
    """(target text, met) for a row whose target depends on the store size ("-" where none)."""
    if size not in targets:
        return "-", True
    limit = targets[size]
    return f"<= {limit:g} {unit}", value <= limit


def bench_memory_tier(box: Throwaway, quick: bool) -> list[Row]:
    from memoryd.cli import model

    corpus = Corpus()
    meaning = model.installed() == model.VERSION
    if not meaning:
        progress(f"the encoder's model is not installed ({model.INSTALL_HINT}): memory rows by words only")
    rows: list[Row] = _encoder_rows() if meaning else []
    stored = 0
    for size in ([1_000, 10_000] if quick else [1_000, 10_000, 100_000]):
        progress(f"loading memories up to {size}")
        took = load_memories(box, "/bench/memories", (corpus.memory() for _ in range(size - stored)),
                             ["projects:bench", "bench:load"])
        rate = (size - stored) / took
        progress(f"loaded {size - stored} memories in {took:.1f} s ({rate:.0f}/s)")
        rows.append(row("bulk load (pipelined memory_write)", f"to {_size_label(size)}",
                        {"value": round(rate), "unit": "/s"}, f">= {BULK_TARGET_PER_S}/s", rate >= BULK_TARGET_PER_S))
        if meaning:
            seed_vectors(box)
        samples = QUICK_SAMPLES if quick else SAMPLES
        timed = _timed_rows(box, corpus, size, samples)
        stored = size + samples - timed[0]["refused"]
        rows += timed + _start_rows(box, size, meaning)
    return rows


def seed_vectors(box: Throwaway) -> None:
    """Stop the daemon, give each memory a random unit vector in `state/vectors.bin`, restart, wait for them all."""
    import numpy as np

    from memoryd.daemon.encoder.model import DIMENSIONS, WEIGHTS_SHA256
    from memoryd.daemon.memories.vectorfile import file_bytes, quantize
    from memoryd.daemon.storage import frontmatter

    box.stop()
    paths = list((box.base / "h" / "memories").glob("*.md"))
    ids = [path.stem for path in paths]
    stamps = [frontmatter.parse(path.read_bytes())[0]["updated"] for path in paths]
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(ids), DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    (box.base / "h" / "state" / "vectors.bin").write_bytes(file_bytes(WEIGHTS_SHA256, ids, stamps, DIMENSIONS,
                                                                                 *quantize(vectors)))
    box.start()
    wait_for_vectors(box)


def wait_for_vectors(box: Throwaway, timeout_s: float = 300) -> None:
    """Until the daemon's encoder is loaded and holds a vector for every live memory."""
    deadline = time.monotonic() + timeout_s
    with Bridge(box.env) as bridge:
        while True:
            health = bridge.call(names.MEMORY_HEALTH)
            meaning = health["search_by_meaning"]
            if meaning.get("state") == "ready" and meaning.get("vectors", 0) >= health["memories"]:
                return
            if meaning.get("state", "").startswith("unavailable") or time.monotonic() > deadline:
                raise RuntimeError(f"the bench daemon's encoder: {meaning}")
            time.sleep(0.2)


def _encoder_rows() -> list[Row]:
    """The encoder's cost on one core: a typed prompt, and memory-length texts (the background thread's work)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from memoryd.daemon.encoder.model import Encoder

    encoder = Encoder.load()
    encoder.encode_one(TYPED_PROMPT)
    prompt = [kit.seconds(encoder.encode_one, TYPED_PROMPT) for _ in range(50)]
    corpus = Corpus(seed=3)  # one: building its vocabulary takes ~0.15 s
    texts = [corpus.memory() for _ in range(64)]
    rate = len(texts) / kit.seconds(encoder.encode, texts)
    stats = pcts(prompt)
    return [row("encoder: typed prompt (17 words)", "1 core", stats, f"<= {PROMPT_EMBED_TARGET_MS:g} ms p50",
                stats["p50_ms"] <= PROMPT_EMBED_TARGET_MS),
            row("encoder: memories embedded (background)", "1 core", {"value": round(rate, 1), "unit": "/s"}, "-",
                True)]


def _timed_rows(box: Throwaway, corpus: Corpus, size: int, samples: int) -> list[Row]:
    """memory_write, memory_search and memory_digest through a real bridge at this size."""
    writes, written = kit.time_calls(box, names.MEMORY_WRITE,
                                     lambda _: {"content": corpus.memory(), "scopes": ["projects:bench"]}, samples)
    refused = sum(r.get("status") != "committed" for r in written)
    stats = pcts(writes)
    target, met = _target(WRITE_TARGETS_MS, size, "ms", stats["p50_ms"])
    out = [row("memory_write (all gates, committed)", _size_label(size), {**stats, "refused": refused},
               target, refused == 0 and met)]
    searches, results = kit.time_calls(box, names.MEMORY_SEARCH, lambda _: {"query": corpus.query()}, samples)
    stats = pcts(searches)
    mean_hits = sum(len(r["results"]) for r in results) / samples
    out.append(row("memory_search (words + meaning)", _size_label(size), {**stats, "mean_hits": round(mean_hits, 2)},
                   *_target(SEARCH_TARGETS_MS, size, "ms", stats["p50_ms"])))
    digests, _ = kit.time_calls(box, names.MEMORY_DIGEST, lambda _: {}, 100)
    stats = pcts(digests)
    out.append(row(names.MEMORY_DIGEST, _size_label(size), stats,
                   *_target({10_000: DIGEST_TARGET_MS}, size, "ms", stats["p50_ms"])))
    return out


def _start_rows(box: Throwaway, size: int, meaning: bool) -> list[Row]:
    """Warm start, its RSS, then a cold start (no `state/` but the pending snapshot), each until it answers."""
    box.stop()
    warm = kit.seconds(box.start)
    if meaning:
        wait_for_vectors(box)
    assert box.daemon is not None
    rss = kit.rss_mb(box.daemon.pid)
    box.stop()
    for path in (box.base / "h" / "state").iterdir():
        if path.name not in ("pending.json", "vectors.bin"):  # vectors: never on a start's path
            path.unlink()
    began = time.perf_counter()
    cold = kit.seconds(box.start)
    # The text index of a cold start is built after the first reply: say when a search is answered.
    loader = WireLoader(box.endpoint())
    loader.session("cold-first-search", None)
    loader.call("cold-first-search", names.MEMORY_SEARCH, query="first search after a cold start")
    loader.drain()
    first_search = time.perf_counter() - began
    return [row("daemon warm start -> serving", _size_label(size), {"value": round(warm, 2), "unit": "s"},
                *_target(WARM_START_TARGETS_S, size, "s", warm)),
            row("daemon RSS (encoder, vectors loaded)", _size_label(size), {"value": round(rss), "unit": "MB"},
                *_target(RSS_TARGETS_MB, size, "MB", rss)),
            row("daemon cold start (no state/)", _size_label(size),
                {"value": round(cold, 2), "unit": "s", "first_search_s": round(first_search, 2)},
                *_target(COLD_START_TARGETS_S, size, "s", cold))]


BENCHES: list[Callable[[Throwaway, bool], list[Row]]] = [bench_memory_tier, bench_sync]
