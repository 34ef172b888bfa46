"""The one git backend for sync, on the clone only: named operations, each a git child process
started by `Git.run` with the daemon's identity and settings (docs/sync.md, "One sync"), so no
user hook, signing or prompt runs or waits. A failure is a `GitFailed` whose `kind` a user can act on."""

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
# NO_PROGRAMS is shared with the staleness probe; the rest keep the user's config out of a sync.
_SETTINGS = (*NO_PROGRAMS, "commit.gpgsign=false", "tag.gpgsign=false", "core.autocrlf=false", "core.safecrlf=false",
             "gc.auto=0", "core.quotePath=false", "advice.detachedHead=false", "init.defaultBranch=main",
             "protocol.ext.allow=never", "submodule.recurse=false", "core.sparseCheckout=false")

# stderr fragments → failure kind, in order: an https auth failure also says "unable to access".
_KINDS = (
    ("auth_failed", ("authentication failed", "permission denied", "could not read username",
                     "could not read password", "403", "401", "access denied", "host key verification failed")),
    ("push_race", ("[rejected]", "non-fast-forward", "fetch first", "failed to push some refs", "cannot lock ref",
                   "stale info")),
    ("remote_unreachable", ("does not appear to be a git repository", "could not resolve host", "connection refused",
                            "unable to access", "no such file or directory", "could not read from remote repository",
                            "connection timed out", "network is unreachable", "not found",
                            "does not exist")),  # `git clone` of a missing path (sync init)
)


class GitFailed(Exception):
    """A git command that failed; `kind` names the failure, `message` is one line for the CLI."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def classify(stderr: str) -> str:
    low = stderr.lower()
    return next((kind for kind, needles in _KINDS if any(needle in low for needle in needles)), "git_error")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if line.lower().startswith(("fatal", "error", "remote:", " !", "!"))]
    return ((useful or lines or ["no output"])[-1])[:300]


def environment(device_id: str, device_name: str) -> dict[str, str]:
    """The user's environment (ssh agent, credential helpers) plus the identity, and no prompts."""
    # Never aimed at another repository: no GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE.
    env = {key: value for key, value in os.environ.items() if key not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    name, email = f"memoryd {device_name}", f"{device_id}@memoryd.invalid"
    env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
               GIT_COMMITTER_EMAIL=email, GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true",
               GIT_MERGE_AUTOEDIT="no", GIT_ASKPASS="true", SSH_ASKPASS="true", LC_ALL="C")
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=20")  # fail, never ask
    return env


class Git:
    """Runs git in `repo`; `cap` is the largest blob `iter_blobs` reads (a record's size cap)."""

    def __init__(self, repo: Path, device_id: str, device_name: str, cap: int = 1 << 20) -> None:
        self.repo, self.env, self.cap = repo, environment(device_id, device_name), cap

    def run(self, *args: str, stdin: bytes | None = None, check: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess[bytes]:
        import subprocess  # here: a daemon start does not run git

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

    def _answer(self, *args: str) -> str | None:
        """What git printed, or None when it printed nothing or said no (a non-zero exit)."""
        done = self.run(*args, check=False)
        return done.stdout.decode(errors="replace").strip() or None if done.returncode == 0 else None

    def clone(self, remote: str) -> None:
        """Clone without a checkout (not init + fetch: only a clone learns an empty remote's HEAD)."""
        self.run("clone", "-q", "--no-checkout", "--no-local", "--no-tags", "--origin", "origin", "--", remote, ".")

    def head_branch(self) -> str | None:
        """The branch HEAD names (right after the clone: the remote's HEAD)."""
        return self._answer("symbolic-ref", "-q", "--short", "HEAD")

    def keep_only_branch(self, branch: str) -> None:
        self.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
        for ref in self.out("for-each-ref", "--format=%(refname)", "refs/heads/").split():
            if ref != f"refs/heads/{branch}":
                self.run("update-ref", "-d", ref)

    def rev(self, name: str) -> str | None:
        """The commit `name` points to, or None (an unborn branch, a missing ref)."""
        return self._answer("rev-parse", "--verify", "-q", f"{name}^{{commit}}")

    def remote_head(self, branch: str) -> str | None:
        """The commit the last fetch saw on the remote's `branch`, or None."""
        return self.rev(f"refs/remotes/origin/{branch}")

    def fetch(self) -> None:
        self.run("fetch", "-q", "--prune", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*")

    def push(self, branch: str) -> bool:
        """Push HEAD to the remote's `branch`; False when another machine pushed first."""
        try:
            self.run("push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        except GitFailed as exc:
            if exc.kind == "push_race":
                return False
            raise
        return True

    def is_ancestor(self, older: str, newer: str | None) -> bool:
        return newer is not None and self.run("merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

    def merge_base(self, ours: str, theirs: str) -> str | None:
        return self._answer("merge-base", ours, theirs)

    def last_devices(self, start: str | None, paths: list[str]) -> dict[str, str]:
        """path → the device that last committed it since `start`, for those of `paths` committed."""
        if not paths:
            return {}
        span = f"{start}..HEAD" if start else "HEAD"
        raw = self.run("log", "--no-merges", "--no-show-signature", "--format=%x00%ae", "--name-only", span, "--",
                       *sorted({p.split("/", 1)[0] for p in paths})).stdout.decode(errors="replace")
        wanted, found = set(paths), {}
        for chunk in raw.split("\0")[1:]:
            email, *names = chunk.strip("\n").split("\n")
            device = email.split("@", 1)[0] if email.endswith("@memoryd.invalid") else None
            for name in names:
                if name in wanted and name not in found and device:
                    found[name] = device
        return found

    def tidy(self) -> None:
        """git's own upkeep, never detached: the next job must find no gc running."""
        self.run("-c", "gc.auto=6700", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet", check=False)

    def is_dirty(self) -> bool:
        """Anything in the clone not committed (--ignored: a pulled .gitignore must hide nothing)."""
        return bool(self.run("status", "--porcelain", "-z", "--untracked-files=all", "--ignored", check=False).stdout)

    def reset_index(self, rev: str | None) -> None:
        """Point HEAD and the index at `rev` (None: empty the index); the working tree is not touched."""
        if rev is None:
            self.run("read-tree", "--empty")
        else:
            self.run("reset", "-q", "--mixed", rev)

    def skip_worktree(self, paths: list[bytes], skip: bool = True) -> None:
        """Mark the index entries of `paths` as never on disk, or (`skip=False`) on disk again."""
        self.run("update-index", "--skip-worktree" if skip else "--no-skip-worktree", "-z", "--stdin",
                 stdin=b"\0".join(paths) + b"\0")

    def commit_all(self, message: str) -> None:
        """Commit whatever was written (`add -f`: no pulled .gitignore keeps a record out); a
        skip-worktree entry written since is tracked again first (`add` passes over one)."""
        listed = self.run("ls-files", "-v", "-z").stdout.split(b"\0")
        written = [e[2:] for e in listed if e.startswith(b"S ") and os.path.lexists(self.repo / os.fsdecode(e[2:]))]
        if written:
            self.skip_worktree(written, skip=False)
        # bigFileThreshold=1: one pack, not a loose object per blob (docs/sync.md, "Speed"). No
        # pathspec: "." matching only skip-worktree entries is an error.
        self.run("-c", "core.bigFileThreshold=1", "add", "-A", "-f")
        if self.run("diff", "--cached", "--quiet", check=False).returncode != 0:
            self.run("commit", "-q", "--no-verify", "-m", message)

    def commit_merge(self, index_lines: list[str], ours: str, theirs: str, message: str) -> str:
        """A commit of `ours` and `theirs` whose tree is the index changed by `index_lines` (--index-info)."""
        if index_lines:
            self.run("update-index", "--index-info", stdin=("\n".join(index_lines) + "\n").encode())
        return self.out("commit-tree", self.out("write-tree"), "-p", ours, "-p", theirs, "-m", message)

    def top_level(self, rev: str) -> set[str]:
        return set(self.out("ls-tree", "--name-only", rev).split("\n"))

    def tree(self, rev: str | None) -> dict[str, tuple[str, str]]:
        """path → (mode, blob id) of every file of `rev`; a non-UTF-8 name keeps its bytes as surrogates."""
        if rev is None:
            return {}
        raw = self.run("ls-tree", "-r", "-z", "--full-tree", rev).stdout
        entries: dict[str, tuple[str, str]] = {}
        for item in filter(None, raw.split(b"\0")):
            meta, _, path = item.partition(b"\t")
            mode, _kind, blob = meta.decode().split(" ")
            entries[path.decode("utf-8", errors="surrogateescape")] = (mode, blob)
        return entries

    def sizes(self, ids: list[str]) -> dict[str, int]:
        """The size of each blob of `ids` the repository has (no bytes read)."""
        if not ids:
            return {}
        raw = self.run("cat-file", "--batch-check", stdin="".join(f"{i}\n" for i in ids).encode()).stdout
        rows = [line.split(" ") for line in raw.decode().splitlines()]  # "<id> blob <size>", or "<id> missing"
        return {row[0]: int(row[2]) for row in rows if len(row) == 3 and row[1] == "blob"}

    def iter_blobs(self, ids: list[str]) -> Iterator[tuple[str, bytes]]:
        """(id, bytes) of the blobs of `ids` within `cap`, sizes checked first (a blob over it is never read)."""
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
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()
