"""The prefetch helper: a process forked for a start without `state/` that parses record files on the other
core while the daemon replays the log; it only reads files and writes to an anonymous file (docs/storage.md,
"Recovery at start"). Import contract: stdlib only."""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
from collections.abc import Callable, Iterator

Helper = tuple[int, int]  # (pid, the anonymous file it writes)
HELPER, DAEMON = 1, 2  # who took a chunk of shared work (`Shares`)


def start(work: Callable[[int], None]) -> Helper | None:
    """Run `work(fd)` in a forked child; None where there is no fork."""
    if not hasattr(os, "fork"):
        return None
    fd = _anonymous_file()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            _die_with(parent)
            work(fd)
            status = 0
        finally:
            os._exit(status)
    return pid, fd


def finish(helper: Helper) -> int:
    """Wait for the helper; the file it wrote (the caller closes it). ValueError if it failed."""
    pid, fd = helper
    if (code := os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) != 0:
        os.close(fd)
        raise ValueError(f"a start helper exited with status {code}")
    return fd


class Shares:
    """`count` chunks the helper takes from the front and the daemon from the back, each marked in a
    byte both map; where they meet both may do one chunk (the caller keeps one result)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.marks = mmap.mmap(-1, max(count, 1))  # anonymous and shared: the fork maps the same bytes

    def take(self, taker: int) -> Iterator[int]:
        """The chunks `taker` (HELPER or DAEMON) claims, up to the first the other has marked."""
        for index in range(self.count) if taker == HELPER else range(self.count - 1, -1, -1):
            if self.marks[index]:
                return
            self.marks[index] = taker
            yield index


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    if len(data) != size:
        raise ValueError("a start helper's file was cut short")
    return data


def _die_with(parent: int) -> None:
    """Linux: end this helper if the daemon dies: no orphan parses on."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before that took hold
        os._exit(1)


def _anonymous_file() -> int:
    """A read-write file no one else can open, gone when closed (memfd on Linux)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("memoryd-helper", os.MFD_CLOEXEC)
    import tempfile

    with tempfile.TemporaryFile() as handle:
        return os.dup(handle.fileno())
