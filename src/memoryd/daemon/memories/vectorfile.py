"""`state/vectors.bin`: the saved meaning vectors, written by the daemon and read back untrusted (layout:
docs/storage.md, "Caches in `state/`"; checks: docs/security.md). Any refusal (`Refused`) means: throw the file
away and embed again. Import contract: stdlib and numpy (the encoder thread's side only).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

MAGIC = b"MDVEC3\n"
MAX_HEADER_BYTES = 64 << 20   # ids and stamps of ~1M memories
MAX_DIMS = 4096


class Refused(Exception):
    """The file cannot be trusted; the reason says why."""


def _checksum(listed: str, *body: Any) -> str:
    """blake2b-128 over `listed` (`[model, dims, ids, stamps]` as JSON) and then the rows' bytes (`body`: one
    buffer, or the scales' and the rows' in turn)."""
    digest = hashlib.blake2b(listed.encode(), digest_size=16)
    for part in body:
        digest.update(part)
    return digest.hexdigest()


def quantize(vectors: Any) -> tuple[Any, Any]:
    """Unit vectors (n, dims) float32 → int8 rows and a float32 scale per row (row * scale ≈ vector)."""
    import numpy as np

    scales = np.maximum(np.abs(vectors).max(axis=1), 1e-12).astype(np.float32) / 127
    return np.round(vectors / scales[:, None]).astype(np.int8), scales


def file_bytes(model: str, ids: list[str], stamps: list[str], dims: int, rows: Any, scales: Any) -> bytes:
    """The file for these rows, built in one copy of them, with the ids and stamps put into JSON once
    for the checksum and the header alike (~40 MB every 30 s at 100k memories)."""
    body = [memoryview(scales).cast("B"), memoryview(rows).cast("B")] if ids else []
    ids_json, stamps_json, model_json = json.dumps(ids), json.dumps(stamps), json.dumps(model)
    checksum = _checksum(f"[{model_json}, {dims}, {ids_json}, {stamps_json}]", *body)
    header = (f'{{"model": {model_json}, "dims": {dims}, "ids": {ids_json}, "stamps": {stamps_json}, '
              f'"checksum": {json.dumps(checksum)}}}').encode()
    return b"".join([MAGIC, len(header).to_bytes(8, "little"), header, *body])


def read(path: Path, model: str, dims: int) -> tuple[list[str], list[str], Any, Any] | None:
    """(ids, stamps, int8 rows, float32 scales) saved for `model`; None when there is no file or another
    model made it; `Refused` when it cannot be trusted (rows not `dims` wide included)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symbolic link planted in place of the file
        raise Refused(f"cannot be opened as a plain file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused("not a regular file")
        header, body_at = _header(handle, info.st_size)
        if header["model"] != model:
            return None
        if header["dims"] != dims:
            raise Refused(f"its rows have {header['dims']} values, the model's {dims}")
        return _body(handle, header, info.st_size - body_at)


def _header(handle: Any, size: int) -> tuple[dict[str, Any], int]:
    if handle.read(len(MAGIC)) != MAGIC:
        raise Refused("not a vectors file of this version")
    length = int.from_bytes(handle.read(8), "little")
    at = len(MAGIC) + 8
    if length > min(MAX_HEADER_BYTES, size - at):
        raise Refused(f"its header claims {length} bytes, more than the file's {size}")
    try:
        header = json.loads(handle.read(length))
    except ValueError:
        raise Refused("its header is not JSON") from None
    ids, stamps, dims = (header.get(k) if isinstance(header, dict) else None for k in ("ids", "stamps", "dims"))
    if not (isinstance(ids, list) and isinstance(stamps, list) and len(ids) == len(stamps)
            and all(isinstance(v, str) for v in ids + stamps) and isinstance(dims, int)
            and 0 <= dims <= MAX_DIMS and isinstance(header.get("model"), str)
            and isinstance(header.get("checksum"), str)):
        raise Refused("its header is not the shape this daemon writes")
    return header, at + length


def _body(handle: Any, header: dict[str, Any], left: int) -> tuple[list[str], list[str], Any, Any]:
    import numpy as np

    ids, stamps, dims = header["ids"], header["stamps"], header["dims"]
    count = len(ids)
    if left != count * (4 + dims):
        raise Refused(f"{left} bytes of rows where {count} rows of {dims} need {count * (4 + dims)}")
    body = handle.read(left)
    if _checksum(json.dumps([header["model"], dims, ids, stamps]), body) != header["checksum"]:
        raise Refused("its checksum does not match its rows")
    scales = np.frombuffer(body[: 4 * count], np.float32)
    rows = np.frombuffer(body[4 * count :], np.int8).reshape(count, dims)
    return ids, stamps, rows, scales
