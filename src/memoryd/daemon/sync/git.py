"""Git in a child process, on the sync clone only, never on the live store.

Every call passes the daemon's own identity and settings with `-c`, so a machine without a
global git identity (a fresh CI container) works, a user's hooks or signing settings cannot
run or block, and no prompt or editor can ever wait for a terminal the daemon does not have.
A failure is a `GitFailed` whose `kind` says what happened in words a user can act on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.daemon.memories.staleness import NO_PROGRAMS

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator

GIT_TIMEOUT_S = 120.0  # read at each call (a test shortens it)
BATCH_BYTES = 16 << 20  # blob bytes one `cat-file --batch` read may hold
# NO_PROGRAMS (no discovered bare repository, no hooks, no signature program) lives with the
# staleness probe, the other git caller: sync may import a tier, not the reverse. And the ones that make git non-interactive and keep the user's config from changing what a
# sync does: no signing, no line-ending rewrites, no automatic gc in the middle of a sync.
_SETTINGS = (*NO_PROGRAMS, "commit.gpgsign=false", "tag.gpgsign=false", "core.autocrlf=false",
             "core.safecrlf=false", "gc.auto=0", "core.quotePath=false", "advice.detachedHead=false",
             "init.defaultBranch=main", "protocol.ext.allow=never", "submodule.recurse=false",
             "core.sparseCheckout=false")

# stderr fragments → the failure kind a user sees. Checked in order: auth before reachability,
# since an https auth failure also says "unable to access".
_KINDS = (
    ("auth_failed", ("authentication failed", "permission denied", "could not read username",
                     "could not read password", "403", "401", "access denied", "host key verification failed")),
    ("push_race", ("[rejected]", "non-fast-forward", "fetch first", "failed to push some refs",
                   "cannot lock ref", "stale info")),
    ("remote_unreachable", ("does not appear to be a git repository", "could not resolve host",
                            "connection refused", "unable to access", "no such file or directory",
                            "could not read from remote repository", "connection timed out",
                            "network is unreachable", "not found",
                            "does not exist")),  # `git clone` of a missing path (sync init)
)


class GitFailed(Exception):
    """A git command that failed; `kind` is auth_failed, remote_unreachable, push_race,
    timeout or git_error, `message` one line for the CLI."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def classify(stderr: str) -> str:
    low = stderr.lower()
    for kind, needles in _KINDS:
        if any(needle in low for needle in needles):
            return kind
    return "git_error"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if line.lower().startswith(("fatal", "error", "remote:", " !", "!"))]
    return ((useful or lines or ["no output"])[-1])[:300]


def environment(device_id: str, device_name: str) -> dict[str, str]:
    """The child's environment: the user's (ssh agent, credential helpers need it) plus the
    daemon's identity and everything that stops git from waiting for a human."""
    env = dict(os.environ)
    name, email = f"memoryd {device_name}", f"{device_id}@memoryd.invalid"
    env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
               GIT_COMMITTER_EMAIL=email, GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true",
               GIT_MERGE_AUTOEDIT="no", GIT_ASKPASS="true", SSH_ASKPASS="true", LC_ALL="C")
    # An ssh remote must fail at once rather than ask for a passphrase or a host key.
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=20")
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # never aim at another repository
        env.pop(key, None)
    return env


class Git:
    """Runs git in `repo` (the sync clone) with the device's identity; `cap` is the largest blob
    `blobs` reads (a record's size cap: anything larger is never a record)."""

    def __init__(self, repo: Path, device_id: str, device_name: str, cap: int = 1 << 20) -> None:
        self.repo = repo
        self.env = environment(device_id, device_name)
        self.cap = cap

    def run(self, *args: str, stdin: bytes | None = None, check: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess[bytes]:
        import subprocess  # here: only a store that syncs runs git (a daemon start does not)

        command = ["git", *[part for setting in _SETTINGS for part in ("-c", setting)], *args]
        timeout = timeout or GIT_TIMEOUT_S
        try:  # its own process group: a timeout kills git's children too (ssh, a credential helper)
            proc = subprocess.Popen(command, cwd=self.repo, env=self.env, start_new_session=True,
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise GitFailed("git_missing", "git is not installed (or not on PATH)") from None
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise GitFailed("timeout", f"git {args[0]} did not finish within {timeout:g} s") from None
        except BaseException:
            kill_group(proc)
            raise
        done = subprocess.CompletedProcess(command, proc.returncode, out, err)
        if check and done.returncode != 0:
            text = err.decode(errors="replace")
            raise GitFailed(classify(text), f"git {args[0]}: {_last_line(text)}")
        return done

    def out(self, *args: str, stdin: bytes | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout.decode(errors="replace").strip()

    def rev(self, name: str) -> str | None:
        """The commit `name` points to, or None (an unborn branch, a missing ref)."""
        done = self.run("rev-parse", "--verify", "-q", f"{name}^{{commit}}", check=False)
        return done.stdout.decode().strip() or None if done.returncode == 0 else None

    def tree(self, rev: str | None) -> dict[str, tuple[str, str]]:
        """path → (mode, blob id) of every file of `rev` (empty for None). A name that is not
        UTF-8 keeps its bytes as surrogates (`escaped` makes it text for anything shown)."""
        if rev is None:
            return {}
        raw = self.run("ls-tree", "-r", "-z", "--full-tree", rev).stdout
        entries: dict[str, tuple[str, str]] = {}
        for item in raw.split(b"\0"):
            if not item:
                continue
            meta, _, path = item.partition(b"\t")
            mode, _kind, blob = meta.decode().split(" ")
            entries[path.decode("utf-8", errors="surrogateescape")] = (mode, blob)
        return entries

    def sizes(self, ids: list[str]) -> dict[str, int]:
        """The size of each blob of `ids` the repository has (`cat-file --batch-check`: no bytes read)."""
        if not ids:
            return {}
        raw = self.run("cat-file", "--batch-check", stdin="".join(f"{i}\n" for i in ids).encode()).stdout
        found = {}
        for line in raw.decode().splitlines():
            blob, kind, *size = line.split(" ")
            if kind == "blob" and size:
                found[blob] = int(size[0])
        return found

    def iter_blobs(self, ids: list[str]) -> Iterator[tuple[str, bytes]]:
        """(id, bytes) of the blobs of `ids` no larger than `cap`, read in `cat-file --batch`
        runs of at most BATCH_BYTES: the sizes are checked first, so a pushed gigabyte of zeros
        (a few KB packed) is never read into the daemon."""
        sizes = self.sizes(ids)
        chunk: list[str] = []
        held = 0
        for blob in ids:
            size = sizes.get(blob, self.cap + 1)
            if size > self.cap:
                continue
            if chunk and held + size > BATCH_BYTES:
                yield from self._read(chunk)
                chunk, held = [], 0
            chunk.append(blob)
            held += size
        if chunk:
            yield from self._read(chunk)

    def blobs(self, ids: list[str]) -> dict[str, bytes]:
        """The contents of the blobs of `ids` no larger than `cap` (larger ones are left out)."""
        return dict(self.iter_blobs(ids))

    def _read(self, ids: list[str]) -> Iterator[tuple[str, bytes]]:
        raw = self.run("cat-file", "--batch", stdin="".join(f"{i}\n" for i in ids).encode()).stdout
        pos = 0
        for blob in ids:
            end = raw.index(b"\n", pos)
            header = raw[pos:end].decode().split(" ")
            pos = end + 1
            if len(header) < 3:  # "<id> missing"
                continue
            size = int(header[2])
            yield blob, raw[pos:pos + size]
            pos += size + 1


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill git and whatever it started (its process group), and reap it."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()
