"""Saved vectors come back at a start as one block the loop adopts (memories/semantic.py,
`_reuse_saved` and `_adopt_saved`): every still-current memory gets exactly its saved row, one
changed since the file was written is embedded again, one changed since the thread looked frees
its row, and a vector embedded later lands in the room left for growth."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memoryd.daemon.encoder.files import WEIGHTS_SHA256
from memoryd.daemon.encoder.model import DIMENSIONS
from memoryd.daemon.memories import vectorfile
from memoryd.daemon.memories.semantic import Semantic

DIMS = DIMENSIONS


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return vector / np.linalg.norm(vector)


def nearest(vectors: Semantic, seed: int) -> str:
    (memory_id, cosine), = vectors.nearest(unit(seed), 1, lambda _: True)
    assert cosine > 0.99  # the same vector, but for int8 rounding
    return memory_id


def test_saved_vectors_are_adopted_whole_and_only_where_still_current(tmp_path: Path) -> None:
    path = tmp_path / "vectors.bin"
    ids, stamps = [f"m{n}" for n in range(6)], [f"t{n}" for n in range(6)]
    rows, scales = vectorfile.quantize(np.stack([unit(n) for n in range(6)]))
    path.write_bytes(vectorfile.file_bytes(WEIGHTS_SHA256, ids, stamps, DIMS, rows, scales))
    vectors = Semantic(path, lambda p, data: None)
    # The live store as the thread sees it: m5 gone, m4 edited since the file was saved.
    live = {"m0": "t0", "m1": "t1", "m2": "t2", "m3": "t3", "m4": "t4-edited"}
    todo = vectors._reuse_saved([(m, s, "text") for m, s in live.items()])
    assert todo == [("m4", "t4-edited", "text")]  # only the edited one is embedded again
    live["m2"] = "t2-edited"  # edited after the thread looked, before the loop takes the block
    assert vectors.pump(live.get) == 3
    assert sorted(vectors.rows) == ["m0", "m1", "m3"]
    for n in (0, 1, 3):
        assert nearest(vectors, n) == f"m{n}"
    assert len(vectors.matrix) > len(vectors.ids)  # room to grow: the next vector is not a copy
    held = vectors.matrix
    vectors._put("m4", "t4-edited", unit(4))
    assert vectors.matrix is held and nearest(vectors, 4) == "m4"
