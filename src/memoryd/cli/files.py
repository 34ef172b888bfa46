"""Writing the user's files (client configs, service units): one atomic replace for every verb.

Import contract: stdlib only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_text(path: Path, text: str, mode: int) -> None:
    """Make `path` hold `text` in one rename (a reader sees the old file or the new, never half),
    with permission bits `mode`, flushed to disk before the rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
