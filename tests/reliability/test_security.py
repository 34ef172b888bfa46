"""The daemon trusts only its own user: the 0700 runtime dir first, the peer's uid (ZAP) second."""

from __future__ import annotations

import json
import os
import stat

import pytest

from harness import Env
from memoryd.protocol import decode, encode, request

NOBODY = 65534


def _status_from(endpoint: str, uid: int | None) -> bool:
    """Ask `status` from a forked child running as `uid`; True when the daemon answered.

    The child makes its own fresh zmq context after fork and never touches the parent's.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        answered = b"0"
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            import zmq

            ctx = zmq.Context()
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            sock.send(encode(request(1, "status", {}, "intruder")))
            if sock.poll(1500) and decode(sock.recv()).get("ok"):
                answered = b"1"
            sock.close()
            ctx.term()
        finally:
            os.write(write_fd, answered)
            os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    return os.read(read_fd, 1) == b"1"


def test_runtime_dir_and_socket_are_private_to_the_user(daemon: Env) -> None:
    assert stat.S_IMODE(daemon.runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((daemon.runtime / "memoryd.sock").stat().st_mode) == 0o600
    assert stat.S_IMODE((daemon.runtime / "memoryd.status").stat().st_mode) == 0o600


def test_daemon_refuses_a_runtime_dir_open_to_others(env: Env) -> None:
    env.runtime.mkdir(parents=True)
    os.chmod(env.runtime, 0o777)
    result = env.memoryd("serve", timeout=20)
    assert result.returncode != 0 and "writable" in result.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another uid (CI runs as root)")
def test_another_uid_is_refused_even_with_the_socket_loosened_to_0666(daemon: Env) -> None:
    endpoint = daemon.status()["endpoint"]
    for path in (daemon.base, daemon.runtime):
        os.chmod(path, 0o755)
    os.chmod(daemon.runtime / "memoryd.sock", 0o666)
    assert _status_from(endpoint, uid=None), "our own uid must still be served"
    assert not _status_from(endpoint, uid=NOBODY), "another uid must be refused"
    status = json.loads(daemon.memoryd("status", "--json").stdout)
    assert status["refused_peers"] >= 1  # refused by the ZAP uid check, not by file modes
