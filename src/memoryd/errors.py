"""The one exception tree of memoryd, with JSON-RPC codes (docs/wire.md, "Error codes") and the wire form:
the daemon turns them into replies in one place (`to_wire`), the client back in one (`from_wire`)."""

from __future__ import annotations

import errno as _errno
import os
from typing import Any

INVALID_PARAMS = -32602
RESOURCE_STATE = -32002
DAEMON_UNAVAILABLE = -32001
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
PARSE_ERROR = -32700
PROTOCOL_MISMATCH = -32003
INTERNAL_ERROR = -32603


class MemorydError(Exception):
    code = INTERNAL_ERROR
    kind = "internal_error"

    def __init__(self, message: str, data: dict[str, Any] | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = dict(data or {})
        if kind is not None:
            self.kind = kind

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "kind": self.kind, "message": self.message, "data": self.data}


class InvalidParams(MemorydError):
    code = INVALID_PARAMS
    kind = "invalid_params"

    def __init__(self, param: str, reason: str) -> None:
        super().__init__(f"invalid parameter '{param}': {reason}", {"param": param, "reason": reason})


class ResourceState(MemorydError):
    code = RESOURCE_STATE

    def __init__(self, kind: str, ident: str, message: str | None = None) -> None:
        super().__init__(message or f"{kind.replace('_', ' ')}: {ident}", {"kind": kind, "id": ident}, kind)


class StoreDamaged(MemorydError):
    """The daemon refuses to start, naming the file, line and repair (docs/storage.md, 'Reliability')."""

    code = RESOURCE_STATE
    kind = "store_damaged"

    def __init__(self, message: str, path: str, line: int | None = None, repair: str | None = None) -> None:
        super().__init__(message, {"kind": self.kind, "path": path, "line": line, "repair": repair})
        self.path, self.line, self.repair = path, line, repair


class StorageError(MemorydError):
    """The store's filesystem refused an operation: the call was not applied at all; the daemon serves on."""

    code = RESOURCE_STATE
    kind = "storage"

    def __init__(self, path: str, err: int, message: str | None = None) -> None:
        name = _errno.errorcode.get(err, str(err))
        text = message or (f"storage error on {path}: {os.strerror(err)} ({name}); nothing of this "
                           "call was applied; retry once the store is writable again")
        super().__init__(text, {"kind": self.kind, "path": path, "errno": err, "error": name})
        self.path, self.errno = path, err

    @classmethod
    def from_os(cls, exc: OSError, path: object = None) -> StorageError:
        """The typed form of an OSError from the store (`path` when the OSError names none)."""
        where = exc.filename if exc.filename is not None else path
        return cls(str(where or "?"), exc.errno or _errno.EIO)


class DaemonUnavailable(MemorydError):
    code = DAEMON_UNAVAILABLE
    kind = "daemon_unavailable"

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"memoryd daemon unavailable at {endpoint}: {reason}",
                         {"kind": "daemon_unavailable", "endpoint": endpoint})


class BadRequest(MemorydError):
    code = INVALID_REQUEST
    kind = "bad_request"


class ProtocolMismatch(MemorydError):
    code = PROTOCOL_MISMATCH
    kind = "protocol_mismatch"


class InternalError(MemorydError):
    pass


class BadImportInput(MemorydError):
    """A file given to `memoryd import` is not in the format it claims; raised before anything is written."""

    code = INVALID_PARAMS
    kind = "bad_import_input"

    def __init__(self, path: object, reason: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}", {"path": str(path), "line": line, "reason": reason})
        self.path, self.line, self.reason = str(path), line, reason


def from_wire(error: dict[str, Any]) -> MemorydError:
    """Rebuild the exception a daemon error reply describes (the inverse of `to_wire`)."""
    exc = MemorydError(str(error.get("message", "")), error.get("data") or {}, str(error.get("kind", "")))
    exc.code = int(error.get("code", INTERNAL_ERROR))
    return exc
