"""Benchmark rows of the durable tier: memory_write (all gates, committed) and memory_search, at
1k / 10k / 100k memories in the store. Bulk data goes in through the daemon's own wire, pipelined
(every record still takes the daemon's write path and lands on disk); the timed calls go through a
real stdio bridge, as an agent's would.

Synthetic text: words from a seeded 20k-word vocabulary drawn with Zipf weights, so some terms
are common (long posting lists, as real text has) and most are rare; every memory is distinct.
The ranks start at ZIPF_OFFSET because the head of a real word distribution is stopwords, which
the index drops; without the offset one synthetic "word" would sit in three documents of four.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable

from memoryd.bench.kit import Bridge, Row, Throwaway, WireLoader, pcts, progress, row
from memoryd.bench.sync import bench_sync

VOCABULARY = 20_000
ZIPF_OFFSET = 100
SAMPLES = 300
WRITE_TARGET_MS = 3.0
DIGEST_TARGET_MS = 10.0
SEARCH_TARGETS_MS = {1_000: 3.0, 10_000: 3.0, 100_000: 25.0}
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
        n = next(self.serial)
        return f"Record n{n} notes that " + " ".join(self.sample(self.rng.randint(10, 18))) + "."

    def query(self) -> str:
        return " ".join(self.sample(self.rng.randint(2, 3)))


def load_memories(box: Throwaway, corpus: Corpus, count: int) -> float:
    """Write `count` memories through the wire, pipelined; returns seconds taken."""
    loader = WireLoader(box.endpoint())
    conn = f"mem-load-{time.monotonic_ns()}"
    loader.session(conn, "/bench/memories")
    began = time.perf_counter()
    for _ in range(count):
        loader.call(conn, "memory_write", content=corpus.memory(), scopes=["projects:bench", "bench:load"],
                    force=True, acknowledge_transient=True, acknowledge_scope_mismatch=True,
                    acknowledge_credential=True)
    loader.send(conn, "bye", {})
    loader.drain()
    return time.perf_counter() - began


def time_calls(box: Throwaway, tool: str, arguments: Callable[[], dict[str, object]],
               samples: int) -> tuple[list[float], list[dict[str, object]]]:
    """Latencies of `samples` calls of `tool` through one real bridge, and their results."""
    bridge = Bridge(box.env, worktree="/bench/w-mem")
    bridge.initialize()
    latencies, results = [], []
    for _ in range(samples):
        args = arguments()
        began = time.perf_counter()
        results.append(bridge.call(tool, **args))
        latencies.append(time.perf_counter() - began)
    bridge.close()
    return latencies, results


def _size_label(n: int) -> str:
    return f"{n // 1000}k memories"


def bench_memory_tier(box: Throwaway, quick: bool) -> list[Row]:
    corpus = Corpus()
    rows: list[Row] = []
    stored = 0
    for size in ([1_000, 10_000] if quick else [1_000, 10_000, 100_000]):
        progress(f"loading memories up to {size}")
        took = load_memories(box, corpus, size - stored)
        progress(f"loaded {size - stored} memories in {took:.1f} s ({(size - stored) / took:.0f}/s)")
        stored = size
        writes, written = time_calls(box, "memory_write",
                                     lambda: {"content": corpus.memory(), "scopes": ["projects:bench"]}, SAMPLES)
        refused = sum(r.get("status") != "committed" for r in written)
        stored += SAMPLES - refused
        stats = pcts(writes)
        rows.append(row("memory_write (all gates, committed)", _size_label(size), {**stats, "refused": refused},
                        f"<= {WRITE_TARGET_MS:g} ms" if size == 10_000 else "-",
                        refused == 0 and (size != 10_000 or stats["p50_ms"] <= WRITE_TARGET_MS)))
        searches, results = time_calls(box, "memory_search", lambda: {"query": corpus.query()}, SAMPLES)
        stats = pcts(searches)
        target = SEARCH_TARGETS_MS[size]
        mean_hits = sum(len(r["results"]) for r in results) / SAMPLES  # type: ignore[arg-type,misc]
        rows.append(row("memory_search", _size_label(size), {**stats, "mean_hits": round(mean_hits, 2)},
                        f"<= {target:g} ms", stats["p50_ms"] <= target))
        digests, _ = time_calls(box, "memory_digest", dict, 100)
        stats = pcts(digests)
        rows.append(row("memory_digest", _size_label(size), stats,
                        f"<= {DIGEST_TARGET_MS:g} ms" if size == 10_000 else "-",
                        size != 10_000 or stats["p50_ms"] <= DIGEST_TARGET_MS))
        restart_s = box.restart()
        rows.append(row("daemon restart (warm cache)", _size_label(size), {"value": round(restart_s, 2), "unit": "s"},
                        "<= 3 s" if size == 100_000 else "-", size != 100_000 or restart_s <= 3))
        rss = box.daemon_rss_mb()
        rows.append(row("daemon RSS after restart", _size_label(size), {"value": round(rss), "unit": "MB"},
                        "<= 500 MB" if size == 100_000 else "-", size != 100_000 or rss <= 500))
    return rows


BENCHES: list[Callable[[Throwaway, bool], list[Row]]] = [bench_memory_tier, bench_sync]
