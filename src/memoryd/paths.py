"""Where memoryd keeps things: runtime dir, socket, lock, status, store, config, logs.
Import contract: stdlib + platformdirs only (the bridge imports this on its fast path)."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

APP = "memoryd"
# ZeroMQ refuses ipc paths longer than sun_path (108 bytes on Linux, 104 on macOS) minus the NUL.
MAX_IPC_PATH_BYTES = 103 if os.uname().sysname == "Darwin" else 107


class PathError(RuntimeError):
    """A runtime path that cannot be used (too long, wrong owner, loose permissions)."""


def _platformdirs() -> ModuleType:
    import platformdirs

    return platformdirs


def _from_env(var: str) -> Path | None:
    env = os.environ.get(var)
    return Path(env).expanduser().absolute() if env else None


def store_root() -> Path:
    return _from_env("MEMORYD_HOME") or Path(_platformdirs().user_data_dir(APP))


def config_file() -> Path:
    return _from_env("MEMORYD_CONFIG") or Path(_platformdirs().user_config_dir(APP)) / "config.yaml"


def daemon_log_file() -> Path:
    if os.environ.get("MEMORYD_HOME") and not os.environ.get("MEMORYD_LOG_DIR"):
        return store_root() / "log" / "memoryd.log"  # tests and throwaway stores keep their log beside the store
    return (_from_env("MEMORYD_LOG_DIR") or Path(_platformdirs().user_log_dir(APP))) / "memoryd.log"


def _fallback_runtime_dir() -> Path:
    return Path(_platformdirs().user_cache_dir(APP)) / "run"


def runtime_dir() -> Path:
    """The 0700 dir of socket, lock and status; XDG_RUNTIME_DIR may vanish at logout: then the cache dir."""
    if env := _from_env("MEMORYD_RUNTIME_DIR"):
        return env
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg) and os.access(xdg, os.W_OK):
        return Path(xdg) / APP
    return Path(_platformdirs().user_runtime_dir(APP)) if os.uname().sysname == "Darwin" else _fallback_runtime_dir()


def _in_runtime_dir(name: str) -> Callable[[], Path]:
    def path() -> Path:
        return runtime_dir() / name
    return path


# The daemon's socket, single-instance lock, spawn lock, status file and start progress.
socket_path, lock_path, spawn_lock_path, status_path, starting_path = map(
    _in_runtime_dir, ("memoryd.sock", "memoryd.lock", "memoryd.spawn.lock", "memoryd.status", "memoryd.starting"))


def endpoint() -> str:
    """The daemon's ipc endpoint, refusing paths ZeroMQ would silently mangle."""
    path = str(socket_path())
    if len(path.encode()) > MAX_IPC_PATH_BYTES:
        raise PathError(f"socket path is {len(path.encode())} bytes, over the ipc limit of {MAX_IPC_PATH_BYTES}: "
                        f"{path} (set MEMORYD_RUNTIME_DIR to a shorter directory)")
    return "ipc://" + path


def ensure_private_dir(path: Path) -> Path:
    """Create `path` 0700 if needed and refuse one owned by another user or open to others."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise PathError(f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PathError(f"{path} is group- or world-writable (mode {oct(st.st_mode & 0o777)}); chmod 700 it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def quiet_platformdirs() -> None:
    warnings.filterwarnings("ignore", module="platformdirs")
