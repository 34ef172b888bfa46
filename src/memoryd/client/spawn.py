"""Finding a live daemon, and starting one when none answers (docs/wire.md, "Finding or starting the
daemon"). Import contract: stdlib, paths, protocol, errors; zmq only inside `ping`."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memoryd import paths
from memoryd.errors import DaemonUnavailable
from memoryd.protocol import decode_reply, encode, request

SPAWN_WAIT_S = 5.0
START_WAIT_S = 300.0  # for a daemon that shows start-up progress (a cold 100k-memory store)
PING_TIMEOUT_S = 0.5
REASON_CHARS = 500  # the daemon's last log line quoted in an error


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_status() -> dict[str, Any] | None:
    return _read_json(paths.status_path())


def read_starting() -> dict[str, Any] | None:
    """{pid, phase, done, total, seconds} of a live daemon still opening its store, else None."""
    data = _read_json(paths.starting_path())
    return data if data is not None and pid_alive(data.get("pid")) else None


def pid_alive(pid: Any) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as gone."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no procfs (macOS): trust kill(0)
    return state != "Z"


def ping(endpoint: str, timeout_s: float = PING_TIMEOUT_S, op: str = "status") -> Any:
    """The daemon's result for `op` (one that needs no hello), or None when it refused or was silent."""
    import zmq

    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        sock.send(encode(request(1, op, {}, "ping-" + os.urandom(6).hex())))
        if not sock.poll(int(timeout_s * 1000)):
            return None
        reply = decode_reply(sock.recv())
        return reply.get("result") if isinstance(reply, dict) and reply.get("ok") else None
    except zmq.ZMQError:
        return None
    finally:
        sock.close(linger=0)


def daemon_running(endpoint: str) -> bool:
    """Known from the status file (written only after bind) and confirmed by a short ping."""
    status = read_status()
    return status is not None and pid_alive(status.get("pid")) and ping(endpoint) is not None


def spawn(args: list[str]) -> subprocess.Popen[bytes]:
    """Start `memoryd <args>` in a new session (it must outlive the bridge's process group), logging."""
    log_file = paths.daemon_log_file()
    paths.ensure_private_dir(log_file.parent)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen([sys.executable, "-m", "memoryd", *args], stdin=subprocess.DEVNULL,
                                stdout=fd, stderr=fd, start_new_session=True, close_fds=True)
    finally:
        os.close(fd)


def _log_size() -> int:
    try:
        return paths.daemon_log_file().stat().st_size
    except OSError:
        return 0


def log_reason(since: int) -> str | None:
    """The last line the daemon log gained after offset `since` (why a spawn failed), or None."""
    try:
        with open(paths.daemon_log_file(), "rb") as handle:
            handle.seek(since)
            tail = handle.read()[-64 * 1024:]
    except OSError:
        return None
    lines = [line.strip() for line in tail.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:REASON_CHARS] if lines else None


def detach(endpoint: str, wait_s: float = SPAWN_WAIT_S,
           serve_args: list[str] | tuple[str, ...] = ()) -> tuple[bool, str]:
    """`serve --detach`: start the daemon as a grandchild; return once it (or one still starting) answers."""
    if daemon_running(endpoint):
        return True, f"already running (pid {(read_status() or {}).get('pid')})"
    since = _log_size()
    child = spawn(["serve", *serve_args])
    began = time.monotonic()
    deadline = began + wait_s
    while time.monotonic() < deadline:
        if daemon_running(endpoint):
            return True, f"running (pid {(read_status() or {}).get('pid')})"
        if child.poll() not in (None, 0) and not daemon_running(endpoint):
            reason = log_reason(since) or f"see {paths.daemon_log_file()}"
            return False, f"the daemon exited with {child.returncode}: {reason}"
        if read_starting() is not None:  # a big store opening (this daemon or another): wait for it
            deadline = max(deadline, min(time.monotonic() + 1.0, began + START_WAIT_S))
        time.sleep(0.02)
    starting = read_starting()
    if starting is not None:
        return False, (f"the daemon is still starting after {time.monotonic() - began:.0f} s "
                       f"({starting.get('phase')} {starting.get('done')}/{starting.get('total')})")
    return False, f"the daemon did not answer within {wait_s:g} s"


def ensure_daemon(endpoint: str, wait_s: float = SPAWN_WAIT_S) -> bool:
    """True once a daemon answers (spawned under the spawn lock), False if not in time; a failed spawn raises
    `DaemonUnavailable` quoting the log's last line."""
    if daemon_running(endpoint):
        return True
    paths.ensure_private_dir(paths.runtime_dir())
    with open(paths.spawn_lock_path(), "a+") as lock:
        os.chmod(paths.spawn_lock_path(), 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # the winner spawns; the others wait here, then see it running
        if daemon_running(endpoint):
            return True
        since = _log_size()
        launcher = spawn(["serve", "--detach"])
        try:
            launcher.wait(timeout=START_WAIT_S + 5)  # it returns once the daemon answers (or gave up)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()
        if daemon_running(endpoint):
            return True
        reason = log_reason(since) if launcher.returncode not in (None, 0, -9) else None
        if reason is None:
            return False
        error = DaemonUnavailable(endpoint, f"could not start the daemon: {reason}")
        error.data.update(reason=reason, log=str(paths.daemon_log_file()))
        raise error
