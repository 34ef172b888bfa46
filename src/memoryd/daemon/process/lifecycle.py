"""Daemon start and stop (docs/wire.md): flock → open store → bind → status file → notify → serve.
The flock comes before the bind: it is the only single-instance guard (docs/wire.md)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from memoryd import PROTOCOL, __version__, config, fsio, paths
from memoryd.daemon.core import Core
from memoryd.daemon.domain import Progress, no_progress
from memoryd.daemon.process import checkpoint
from memoryd.daemon.storage.clock import iso
from memoryd.errors import StorageError, StoreDamaged

log = logging.getLogger("memoryd.daemon")

# What `memoryd reindex` deletes: every derived file of `state/` (not pending.json, the drafts' only copy).
DERIVED_STATE = ("episodes.cache", "memories.cache", "search.index", "vectors.bin", checkpoint.NAME)


# The start report in the text log: these counts always, then only the counters that are not zero.
_REPORT_COUNTS = ("memories", "tombstones", "pending_reloaded")
_REPORT_HOW = ("replayed_from_seq", "search_index_restored", "memory_folders_deferred", "temp_files_swept",
               "session_records", "session_notes")


def configure_logging(log_format: str = "text") -> None:
    """The daemon log: readable lines, or (`--log-format json`) one JSON object per line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format == "json" else
                         logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": iso(record.created), "level": record.levelname.lower(), "logger": record.name,
                "message": record.getMessage(), **getattr(record, "fields", {})}
        return json.dumps(line, default=str)


def report_line(report: dict[str, Any]) -> str:
    """The start report in words: `12 memories, 1 tombstones, 0 pending reloaded; log replayed from seq 3`."""
    words = [", ".join(f"{report.get(key, 0):,} {key.replace('_', ' ')}" for key in _REPORT_COUNTS)]
    seq = report.get("replayed_from_seq")
    words.append(f"log replayed from seq {seq}" if seq else "log replayed from the start")
    found = [f"{key.replace('_', ' ')} {value}" for key, value in report.items()
             if value and key not in _REPORT_COUNTS and key not in _REPORT_HOW]
    return "; ".join([*words, *found])


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None) -> None:
        super().__init__(f"already running (pid {pid})" if pid else "already running")
        self.pid = pid


def take_lock(path: Path) -> IO[str]:
    handle = open(path, "a+")
    os.chmod(path, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise AlreadyRunning(read_status().get("pid")) from None
    return handle


def read_status() -> dict[str, Any]:
    try:
        data = json.loads(paths.status_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_status(endpoint: str, store: Path, started: float) -> None:
    body = {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL, "endpoint": endpoint,
            "store": str(store), "started_at": iso(started)}
    fsio.replace_atomic(paths.status_path(), json.dumps(body).encode())


def remove_status() -> None:
    paths.status_path().unlink(missing_ok=True)


def sd_notify(message: str) -> None:
    """Tell systemd we are ready (Type=notify) when it asked; a few lines instead of a dependency."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    import socket  # only under systemd

    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(message.encode(), address)
        except OSError as exc:
            log.warning("sd_notify failed: %s", exc)


def run() -> int:
    from memoryd.daemon.server import Server  # zmq is imported only once we know we will serve

    runtime = paths.ensure_private_dir(paths.runtime_dir())
    endpoint = paths.endpoint()
    try:
        lock = take_lock(paths.lock_path())
        settings = config.load(paths.config_file())
    except (AlreadyRunning, config.ConfigError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 0 if isinstance(exc, AlreadyRunning) else 2
    root = paths.ensure_private_dir(paths.store_root())
    # Handlers go in before the store opens: a SIGTERM during a long start must still stop cleanly.
    serving: dict[str, Any] = {"server": None, "stop": False}

    def stop(signum: int, frame: Any) -> None:
        serving["stop"] = True
        if serving["server"] is not None:
            serving["server"].running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        core, report = open_store(root, settings, StartProgress())
    except StoreDamaged as exc:  # refuse to start; the message names the file, line and repair
        log.error("memoryd cannot open the store: %s", exc.message)  # stderr / the daemon log
        paths.starting_path().unlink(missing_ok=True)
        return 3
    log.info("store %s opened: %s", root, report_line(report), extra={"fields": {"store": str(root), **report}})
    server = Server(core, endpoint, on_stop=remove_status)
    server.running = not serving["stop"]
    serving["server"] = server
    read_fd, write_fd = os.pipe()  # the signal wakeup pipe makes the poller return at once
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    server.wakeup_fd = read_fd
    (runtime / "memoryd.sock").unlink(missing_ok=True)  # a stale socket of a dead daemon; we hold the lock
    server.bind()
    write_status(endpoint, root, core.started)
    paths.starting_path().unlink(missing_ok=True)  # after the status file: no moment shows neither
    sd_notify("READY=1")
    log.info("memoryd %s serving on %s (pid %d)", __version__, endpoint, os.getpid())
    try:
        server.serve_forever()
    finally:
        remove_status()
        sd_notify("STOPPING=1")
        close_store(core)
        server.close()
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        log.info("memoryd stopped")
    return 0


def open_store(root: Path, settings: config.Config, progress: Progress) -> tuple[Core, dict[str, Any]]:
    """Recovery at start (docs/storage.md): the open core and the recovery report. Raises StoreDamaged."""
    core = Core(root, settings)
    core.attach_tiers = _attach_tiers  # `Core.reload` (after a failed commit) attaches them again
    core.progress = progress
    _attach_tiers(core)
    gc.disable()  # the cyclic GC walking the growing heap was a third of a 100k start; what is loaded lives on
    try:
        report = core.open(checkpoint.restore(core))
        from memoryd.daemon.sessions.records import convert_captured_handoffs

        report["handoffs_converted"] = convert_captured_handoffs(core)  # stores from before notes
    finally:
        gc.freeze()
        gc.enable()
    core.progress = no_progress
    with contextlib.suppress(OSError, AttributeError):  # glibc: the free C heap back, ~100 MB at 100k memories
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return core, report


class StartProgress:
    """A start's progress in the starting file (`memoryd status`, client/spawn.py) and the daemon log."""

    FILE_EVERY_S, LOG_EVERY_S = 0.5, 5.0

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.file_at, self.log_at = -math.inf, 0.0
        self("opening the store", 0, 0)

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.file_at >= self.FILE_EVERY_S:
            self.file_at = now
            body = {"pid": os.getpid(), "phase": phase, "done": done, "total": total,
                    "seconds": round(now - self.began, 1)}
            try:
                fsio.replace_atomic(paths.starting_path(), json.dumps(body).encode())
            except OSError as exc:  # progress is a courtesy: never a reason not to start
                log.warning("could not write %s: %s", paths.starting_path(), exc)
        if now - self.log_at >= self.LOG_EVERY_S and now - self.began >= self.LOG_EVERY_S:
            self.log_at = now
            log.info("starting: %s %s", phase, f"{done:,}/{total:,}" if total else f"{done:,}")


def reindex(progress: Progress) -> dict[str, Any]:
    """`memoryd reindex`: rebuild `state/` with the daemon stopped — a cold start, then a clean stop
    that writes every cache again. Raises AlreadyRunning, ConfigError, StoreDamaged."""
    paths.ensure_private_dir(paths.runtime_dir())
    lock = take_lock(paths.lock_path())
    try:
        settings = config.load(paths.config_file())
        root = paths.ensure_private_dir(paths.store_root())
        for name in DERIVED_STATE:
            (root / "state" / name).unlink(missing_ok=True)
        core, report = open_store(root, settings, progress)
        if core.memories is not None:  # no reply to hurry: build the text index a serve would defer
            core.progress = progress
            core.memories.index.finish_text()
            core.progress = no_progress
        if settings.search_by_meaning and core.memories is not None:
            report["vectors"] = core.memories.semantic.rebuild(core.memories.live.values(), progress)
        progress("writing the caches", 0, 0)
        close_store(core)
        return report
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _attach_tiers(core: Core) -> None:
    """Let the tiers that keep their own indexes (memories, …) join replay and recovery."""
    from memoryd.daemon.memories.tier import attach
    from memoryd.daemon.sessions import records
    from memoryd.daemon.sync import service as sync_service

    attach(core)
    records.attach(core)
    sync_service.attach(core)


def close_store(core: Core) -> None:
    """A clean stop: `daemon_stop`, the episode cache and the checkpoint, all made durable. Never
    raises: the caches are speed-ups, and an unlogged stop is recovered like a crash."""
    for step in (lambda: core.record("daemon_stop", pid=os.getpid()),
                 lambda: core.journal.save_cache(core.log.seq)):
        try:
            step()
        except StorageError as exc:
            log.warning("at stop: %s", exc.message)
    try:
        core.sync()
        checkpoint.save(core)  # the log is durable and complete: the next start resumes here
        core.sync()
        core.files.sync_dirs()
        core.log.close()
    except (StorageError, OSError) as exc:
        log.error("could not record the stop (%s); the next start recovers", exc)
