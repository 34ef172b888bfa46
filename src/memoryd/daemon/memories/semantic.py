"""Meaning vectors of the live memories (docs/search.md, "Meaning"): embedded by a background thread, read by
the loop, which owns the matrix; the thread only hands results over (`pump`): no search sees a half-written row.
Import contract: stdlib and vectorfile; numpy and the encoder are imported on the thread's side only.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from memoryd.daemon.memories import vectorfile
from memoryd.daemon.memories.vectorfile import quantize

log = logging.getLogger("memoryd.daemon")

SAVE_EVERY_S = 30.0      # a start that embedded a large backlog saves its progress this often
BATCH = 8                # texts per forward pass: a query waits at most for one batch's GIL share
CHUNK = 2048             # rows widened to float32 at a time in `nearest` (a 3 MB buffer)
QUIET_S = 0.1            # the thread embeds only after the loop had no write or search this long
TRIM_EVERY_S = 60.0      # free heap handed back to the system at most this often (`_release_free_memory`)


class Semantic:
    """Vectors by memory id; `state` is off, loading, ready or `unavailable: …`."""

    def __init__(self, path: Path, write: Callable[[Path, bytes], None]) -> None:
        self.path = path
        self.write = write                        # the store's staged write (durable at group commit)
        self.state = "off"
        self.encoder: Any = None
        self.rows: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.stamps: list[str] = []
        self.matrix: Any = None                   # numpy int8 (capacity, dims)
        self.scales: Any = None                   # numpy float32 (capacity,): row i is matrix[i] * scales[i]
        self._buffer: Any = None                  # float32 (CHUNK, dims), reused by every `nearest`
        self.free: list[int] = []
        self.dirty = False
        self.saved_at = 0.0
        self._inbox: queue.SimpleQueue[tuple[str, str, str] | None] = queue.SimpleQueue()
        self._outbox: deque[tuple[str, Any]] = deque()
        self._thread: threading.Thread | None = None
        self.busy_at = 0.0                        # monotonic time of the loop's last write or search
        self._trimmed_at = -TRIM_EVERY_S          # the thread's last `_release_free_memory`
        self._untrimmed = True                    # the thread worked (or started) since then
        self.file_note: str | None = None         # why a saved vectors file was thrown away (health)

    def start(self, live: Iterable[Any]) -> None:
        """Start the thread with what is live now; later changes arrive through `changed`."""
        if self._thread is not None:
            return
        snapshot = [(m.id, m.updated, m.content) for m in live]
        self.state = "loading"
        self._thread = threading.Thread(target=self._run, args=(snapshot,), name="memoryd-encoder", daemon=True)
        self._thread.start()

    def changed(self, memory: Any) -> None:
        self.busy_at = time.monotonic()
        if self._thread is not None:
            self._inbox.put((memory.id, memory.updated, memory.content))

    def removed(self, memory_id: str) -> None:
        row = self.rows.pop(memory_id, None)
        if row is not None:
            self.ids[row], self.matrix[row], self.scales[row] = None, 0, 0
            self.free.append(row)
            self.dirty = True

    def pump(self, current: Callable[[str], str | None]) -> int:
        """Apply what the thread has finished; `current(id)` is a live memory's `updated` (None:
        gone). Returns how many vectors were applied."""
        applied = 0
        while self._outbox:
            kind, payload = self._outbox.popleft()
            if kind == "ready":
                self.encoder, self.state = payload, "ready"
            elif kind == "failed":
                self.state = f"unavailable: {payload}"
                log.warning("search by meaning is off: %s", payload)
            elif kind == "saved":  # (ids, stamps, matrix, scales)
                applied += self._adopt_saved(current, *payload)
            else:  # "vectors": (ids, stamps, vectors)
                for memory_id, stamp, vector in zip(*payload):
                    if current(memory_id) == stamp:
                        self._put(memory_id, stamp, vector)
                        applied += 1
        if self.dirty and time.monotonic() - self.saved_at >= SAVE_EVERY_S and self._inbox.empty():
            self.save()
        return applied

    def waiting(self) -> bool:
        return bool(self._outbox)

    def _put(self, memory_id: str, stamp: str, vector: Any) -> None:
        rows, scales = quantize(vector[None, :])
        self._place(memory_id, stamp, rows[0], scales[0])

    def _place(self, memory_id: str, stamp: str, values: Any, scale: Any) -> None:
        """One memory's quantized vector into its row (a new one when it has none)."""
        import numpy as np

        row = self.rows.get(memory_id)
        if row is None:
            if self.free:
                row = self.free.pop()
            else:
                row = len(self.ids)
                if self.matrix is None or row >= len(self.matrix):
                    grown = np.zeros((max(1024, row * 2), values.shape[-1]), np.int8)
                    scales = np.zeros(len(grown), np.float32)
                    if self.matrix is not None:
                        grown[:row], scales[:row] = self.matrix[:row], self.scales[:row]
                    self.matrix, self.scales = grown, scales
                self.ids.append(None)
                self.stamps.append("")
            self.rows[memory_id] = row
        self.ids[row], self.stamps[row], self.matrix[row], self.scales[row] = memory_id, stamp, values, scale
        self.dirty = True

    def _adopt_saved(self, current: Callable[[str], str | None], ids: list[str], stamps: list[str], matrix: Any,
                     scales: Any) -> int:
        """The saved vectors the thread laid out: by reference when none is held yet (a copy of 100k rows
        took 0.03–0.4 s of the loop); a memory changed since the thread's snapshot frees its row."""
        if self.rows:  # vectors came first (not a start): place these one by one
            fresh = [i for i, (m, s) in enumerate(zip(ids, stamps)) if m not in self.rows and current(m) == s]
            for i in fresh:
                self._place(ids[i], stamps[i], matrix[i], scales[i])
            return len(fresh)
        self.matrix, self.scales, self.ids, self.stamps = matrix, scales, list(ids), list(stamps)
        self.rows = dict(zip(ids, range(len(ids))))
        for memory_id, stamp in zip(ids, stamps):
            if current(memory_id) != stamp:
                self.removed(memory_id)
        return len(self.rows)

    def embed_query(self, text: str) -> Any:
        """The query's unit vector, or None while the encoder is not loaded."""
        self.busy_at = time.monotonic()
        return self.encoder.encode_one(text) if self.encoder is not None else None

    def nearest(self, vector: Any, limit: int, accept: Callable[[str], bool]) -> list[tuple[str, float]]:
        """Up to `limit` `(id, cosine)` pairs, best first, among the rows `accept` lets through."""
        import numpy as np

        count = len(self.ids)
        if vector is None or not count:
            return []
        scores = np.empty(count, np.float32)
        if self._buffer is None:
            self._buffer = np.empty((CHUNK, self.matrix.shape[1]), np.float32)
        for start in range(0, count, CHUNK):
            end = min(count, start + CHUNK)
            widened = self._buffer[:end - start]
            widened[:] = self.matrix[start:end]
            scores[start:end] = (widened @ vector) * self.scales[start:end]
        depth = min(count, limit * 4)
        while True:
            top = np.argpartition(-scores, depth - 1)[:depth] if depth < count else np.arange(count)
            hits: list[tuple[str, float]] = []
            for row in top[np.argsort(-scores[top], kind="stable")]:
                memory_id = self.ids[row]
                if memory_id is not None and accept(memory_id):
                    hits.append((memory_id, round(float(scores[row]), 4)))
                    if len(hits) >= limit:
                        return hits
            if depth >= count:
                return hits
            depth = min(count, depth * 4)

    def similarity(self, vector: Any, memory_ids: list[str]) -> dict[str, float]:
        """The cosine of each memory that has a vector (the rest are left out)."""
        import numpy as np

        rows = [(m, self.rows[m]) for m in memory_ids if m in self.rows]
        if not rows:
            return {}
        at = [r for _, r in rows]
        scores = (self.matrix[at].astype(np.float32) @ vector) * self.scales[at]
        return {m: round(float(s), 4) for (m, _), s in zip(rows, scores)}

    def health(self) -> dict[str, Any]:
        found = {"state": self.state, "vectors": len(self.rows)}
        return {**found, "vector_file": self.file_note} if self.file_note else found

    def close(self) -> None:
        if self._thread is not None:
            self._inbox.put(None)

    def rebuild(self, live: Iterable[Any], progress: Callable[[str, int, int], None]) -> int:
        """Embed every memory here and now (`memoryd reindex`, daemon stopped); returns how many."""
        from memoryd.daemon.encoder.model import Encoder, EncoderUnavailable

        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        try:
            self.encoder = Encoder.load()
        except EncoderUnavailable as exc:
            self.state = f"unavailable: {exc}"
            return 0
        memories = list(live)
        for start in range(0, len(memories), 64):
            progress("embedding the memories", start, len(memories))
            batch = memories[start:start + 64]
            for memory, vector in zip(batch, self.encoder.encode([m.content for m in batch])):
                self._put(memory.id, memory.updated, vector)
        progress("embedding the memories", len(memories), len(memories))
        self.state = "ready"
        return len(memories)

    def save(self) -> None:
        """Write every vector held now (staged: durable at the pass's group commit)."""
        rows = [(i, memory_id) for i, memory_id in enumerate(self.ids) if memory_id is not None]
        at = [i for i, _ in rows]
        dims = 0 if self.matrix is None else self.matrix.shape[1]
        from memoryd.daemon.encoder.model import WEIGHTS_SHA256

        if not rows:
            matrix = scales = None
        elif len(at) == len(self.ids):  # no freed row: the arrays' heads, not a gathered copy
            matrix, scales = self.matrix[: len(at)], self.scales[: len(at)]
        else:
            matrix, scales = self.matrix[at], self.scales[at]
        self.write(self.path, vectorfile.file_bytes(WEIGHTS_SHA256, [m for _, m in rows], [self.stamps[i] for i in at],
                                                    dims, matrix, scales))
        self.dirty, self.saved_at = False, time.monotonic()

    def _run(self, snapshot: list[tuple[str, str, str]]) -> None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: the loop keeps the other
        with suppress(AttributeError, OSError):  # Linux nices threads one by one: the loop's calls get the CPU first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            from memoryd.daemon.encoder.model import Encoder, EncoderUnavailable

            encoder = Encoder.load()
        except (ImportError, EncoderUnavailable) as exc:
            self._outbox.append(("failed", str(exc) or type(exc).__name__))
            return
        self._outbox.append(("ready", encoder))
        todo = self._reuse_saved(snapshot)
        while True:
            batch = self._next_batch(todo)
            if batch is None:
                return
            while (wait := self.busy_at + QUIET_S - time.monotonic()) > 0:  # the loop's turn
                time.sleep(wait)
            vectors = encoder.encode([text for _, _, text in batch])
            self._outbox.append(("vectors", ([i for i, _, _ in batch], [s for _, s, _ in batch], vectors)))

    def _next_batch(self, todo: list[tuple[str, str, str]]) -> list[tuple[str, str, str]] | None:
        """New changes first, then the backlog; blocks while there is nothing to do."""
        batch: list[tuple[str, str, str]] = []
        while len(batch) < BATCH:
            idle = not batch and not todo
            # Idle with memory to hand back: wait only until `_release_free_memory` may run.
            trim_in = max(0.0, self._trimmed_at + TRIM_EVERY_S - time.monotonic()) if self._untrimmed else None
            try:
                item = self._inbox.get(block=idle, timeout=trim_in if idle else None)
            except queue.Empty:
                if not idle:
                    break
                _release_free_memory()
                self._trimmed_at, self._untrimmed = time.monotonic(), False
                continue
            if item is None:
                return None
            batch.append(item)
            self._untrimmed = True
        while len(batch) < BATCH and todo:
            batch.append(todo.pop())
        return batch

    def _reuse_saved(self, snapshot: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """Hand over the saved vectors that still match; returns what must be embedded (oldest first,
        so `pop` takes the newest). A file that cannot be trusted is thrown away, and health says so."""
        from memoryd.daemon.encoder.model import DIMENSIONS, WEIGHTS_SHA256

        found = None
        try:
            found = vectorfile.read(self.path, WEIGHTS_SHA256, DIMENSIONS)
        except (vectorfile.Refused, MemoryError, OSError) as exc:  # anything wrong: embed again
            self.file_note = f"state/vectors.bin discarded ({exc}); every memory embedded again"
            log.warning("%s", self.file_note)
        saved = {m: (s, i) for i, (m, s) in enumerate(zip(found[0], found[1]))} if found else {}
        keep = [(m, s) for m, s, _ in snapshot if saved.get(m, ("",))[0] == s]
        if keep and found:  # laid out here, off the loop (numpy copies without the GIL)
            import numpy as np

            count = len(keep)
            picked = np.fromiter((saved[m][1] for m, _ in keep), np.intp, count)
            matrix = np.zeros((count + max(1024, count // 8), found[2].shape[1]), np.int8)  # room to grow
            scales = np.zeros(len(matrix), np.float32)
            np.take(found[2], picked, axis=0, out=matrix[:count])
            np.take(found[3], picked, out=scales[:count])
            self._outbox.append(("saved", ([m for m, _ in keep], [s for _, s in keep], matrix, scales)))
        kept = {m for m, _ in keep}
        return [item for item in snapshot if item[0] not in kept]


def _release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's `malloc_trim`; why: docs/search.md,
    "When vectors are made"). Without glibc it does nothing."""
    try:
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return
    if trim is not None:
        trim(0)
