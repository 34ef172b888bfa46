"""One sync on the clone, run in a worker thread so the daemon's loop keeps serving.

The worker touches only `$MEMORYD_HOME/sync/` (the clone, the quarantine, the config); the live
store is read (the record files to export, opened without following links) and never written
here — the loop admits what the worker brings back, in a normal pass with group commit.

One job:
1. **repair** a clone a killed sync left mid-way (a lock file, a merge in progress, files not
   committed): reset it to its last commit; what was not committed is exported again;
2. **export** the records changed on this machine since the clone and the store last agreed,
   and commit them;
3. **fetch**, then **merge by record** (never by text): for each record id, the side that changed
   it wins; changed on both, `merge.pick` decides and the loser is kept under
   `conflicts/<id>/<sha256>.md`; the merged tree is written with git's plumbing (the index,
   `write-tree`, `commit-tree`), so git never merges a file's text;
4. **push**; a rejected push (another machine pushed first) goes back to 3, at most
   PUSH_ATTEMPTS times;
5. **scan** the merged tree: every record that differs from the live store is checked
   (`admission.check`) and handed back, with the device that last committed it; anything
   else is quarantined under `sync/quarantine/` and reported once.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from memoryd.daemon import store
from memoryd.daemon.memories.gates import find_credentials
from memoryd.daemon.memories.records import Memory, sha256_hex
from memoryd.daemon.sync import admission
from memoryd.daemon.sync.git import Git, GitFailed
from memoryd.daemon.sync.layout import (
    BRANCH,
    CONFLICTS,
    LIVE,
    TOMB,
    Layout,
    branch_of,
    count_quarantined,
    escaped,
    write_atomic,
)
from memoryd.daemon.sync.merge import Version, horizon, pick, three_way

PUSH_ATTEMPTS = 3
FOLDER_OF = {LIVE: "memories", TOMB: "tombstones"}
TOP_FOLDERS = ("memories", "tombstones", "conflicts")
EMPTY = "0" * 40
# A pulled file's bytes are read only within the record size cap (`admission.size_cap`); the
# quarantine keeps at most this many bytes in all; one job hands the loop at most this many
# bytes of pulled records (the rest waits for the next sync): a remote cannot fill memory or disk.
QUARANTINE_MAX_BYTES = 64 << 20
PULL_MAX_BYTES = 256 << 20
# The clone's own attributes, which outrank every .gitattributes in the tree: a remote's
# `*.md text eol=crlf` or `filter=…` never changes a record's bytes when git reads or adds it.
ATTRIBUTES = b"* -text -eol -filter -diff -merge -ident -working-tree-encoding\n"
SUMMARY_ROWS = 100  # rows of each list a job's summary keeps (the totals are always there)


@dataclass
class Job:
    """What the loop hands the worker: a consistent picture of the live store at the start."""

    number: int
    kind: str                                   # "sync" or "init"
    remote: str | None = None                   # init only
    local: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (state, sha) of syncable records
    local_only: set[str] = field(default_factory=set)  # ids that never travel (handoffs, …)
    export: dict[str, tuple[str, str, Path]] = field(default_factory=dict)  # changed here since agreed
    agreed: dict[str, tuple[str, str]] = field(default_factory=dict)  # for the exported ids
    resolved: dict[str, set[str]] = field(default_factory=dict)  # conflict losers to drop
    folders: dict[str, Path] = field(default_factory=dict)  # state → the live store's folder of it
    max_content_bytes: int = 1_000_000


@dataclass
class Incoming:
    memory_id: str
    state: str
    sha: str
    data: bytes
    memory: Memory
    device: str | None
    expected: tuple[str, str] | None  # the live store's version when the job started


@dataclass
class Result:
    number: int
    kind: str
    status: str = "ok"                          # "ok" or "error"
    error: dict[str, str] | None = None         # {kind, message}
    pushed: list[tuple[str, str, str]] = field(default_factory=list)   # (id, state, sha)
    incoming: list[Incoming] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)    # new this job: {blob, path, reason}
    quarantined_total: int = 0
    decided: list[dict[str, str]] = field(default_factory=list)        # conflicts decided by this job
    restored: list[str] = field(default_factory=list)  # ids the remote lost without a tombstone, put back
    conflicts: dict[str, list[str]] = field(default_factory=dict)      # every kept loser in the tree
    kept_local: int = 0                         # records that hold a credential: never exported
    deferred: int = 0                           # changed while the job ran: next sync
    attempts: int = 0
    repaired: str | None = None
    rewritten: bool = False                     # the remote's history no longer holds what it held
    head: str | None = None
    remote: str | None = None
    device: str | None = None
    admitted: int = 0                           # pulled records the loop has admitted so far
    position: int = 0                           # how far the loop's admission has got

    def summary(self) -> dict[str, Any]:
        """What the CLI prints and the status keeps (ids and counts, no content; lists capped)."""
        return {"job": self.number, "kind": self.kind, "status": self.status, "error": self.error,
                "pushed": len(self.pushed), "pulled": len(self.incoming),
                "conflicts_decided": self.decided[:SUMMARY_ROWS], "conflicts_decided_total": len(self.decided),
                "conflicts": sum(len(v) for v in self.conflicts.values()),
                "restored_to_remote": self.restored[:SUMMARY_ROWS], "restored_to_remote_total": len(self.restored),
                "quarantined": [{k: q[k] for k in ("path", "reason", "blob")} for q in self.quarantined[:SUMMARY_ROWS]],
                "quarantined_new": len(self.quarantined),
                "quarantined_total": self.quarantined_total, "kept_local": self.kept_local,
                "deferred": self.deferred, "attempts": self.attempts, "repaired": self.repaired,
                "rewritten": self.rewritten,
                "head": self.head, "remote": self.remote}


# -- the sync folder --------------------------------------------------------------------------------

def check_plain(layout: Layout) -> None:
    """The sync folder and the clone must be real directories: a link there is never followed."""
    for path in (layout.dir, layout.repo):
        if os.path.islink(path) or (os.path.lexists(path) and not store.is_plain_dir(path)):
            raise GitFailed("local_error", f"{path} is a symbolic link or not a directory; memoryd follows "
                            "no link in its store: remove it, then memoryd sync init again")


def device_identity(layout: Layout) -> tuple[str, str]:
    """This machine's device id (generated once, kept in sync/config.json) and its name."""
    config = layout.read_config()
    device_id = config.get("device_id")
    if not (isinstance(device_id, str) and len(device_id) == 16):
        device_id = secrets.token_hex(8)
    name = config.get("device_name")
    if not isinstance(name, str) or not name:
        import socket  # here: only a store that syncs names its device (imports are ~1/3 of a start)

        name = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-_.")[:64] or "device"
    return device_id, name


# -- the job ----------------------------------------------------------------------------------------

class Worker:
    """Runs at most one job at a time in a thread; `take` hands the finished result to the loop."""

    def __init__(self, root: Path) -> None:
        self.layout = Layout(root)
        self.thread: threading.Thread | None = None
        self.running: Job | None = None
        self.done: Result | None = None
        self.lock = threading.Lock()
        self.sha_of_blob: dict[str, str] = {}  # git blob id → sha256 of its bytes (both are stable)
        self.jobs = 0  # the last job number handed out (the CLI waits for its own)
        self.admitting: Result | None = None  # a finished job the loop is admitting, batch by batch
        self.device = ""  # this machine's device id, for commit messages (set by each sync)
        self.branch = BRANCH  # the remote's branch this store syncs on (config.json, set by each sync)
        self.phase = ""   # what the running job is doing, for `memoryd sync` (a plain str: atomic)
        self.quarantined: set[str] = set()  # blobs sync/quarantine/ lists (`load_quarantine`)
        self.quarantine_used = 0  # and the bytes it holds

    def start(self, job: Job) -> None:
        self.running, self.phase = job, "starting"
        self.thread = threading.Thread(target=self._run, args=(job,), name=f"memoryd-sync-{job.number}",
                                       daemon=True)
        self.thread.start()

    def busy(self) -> bool:
        return self.running is not None

    def take(self) -> Result | None:
        """The finished job's result, once; None while it runs or when there is none."""
        with self.lock:
            result, self.done = self.done, None
        if result is not None:
            self.running = None
        return result

    def _run(self, job: Job) -> None:
        result = Result(job.number, job.kind)
        try:
            if job.kind == "init":
                self.init(job, result)
            else:
                self.sync(job, result)
        except GitFailed as exc:
            result.status, result.error = "error", {"kind": exc.kind, "message": escaped(exc.message)}
        except OSError as exc:
            result.status, result.error = "error", {"kind": "local_error", "message": escaped(f"{exc}")[:300]}
        except Exception as exc:  # noqa: BLE001 - a bug must reach the CLI as an answer, not hang it
            result.status, result.error = "error", {"kind": "internal_error", "message": repr(exc)[:300]}
        with self.lock:
            self.done = result

    # -- init -------------------------------------------------------------------------------------

    def init(self, job: Job, result: Result) -> None:
        layout, remote = self.layout, job.remote or ""
        check_plain(layout)
        result.remote = remote
        current = layout.read_config().get("remote")
        if layout.is_set_up():
            if current != remote:
                raise GitFailed("already_set_up", f"sync is already set up with {current}; remove "
                                f"{layout.dir} to start over with another remote")
            return
        import shutil  # here: only setting sync up needs it (imports are ~1/3 of a daemon start)

        device_id, name = device_identity(layout)
        shutil.rmtree(layout.repo, ignore_errors=True)  # a half-made clone of an earlier attempt
        layout.repo.mkdir(mode=0o700, parents=True)
        git = Git(layout.repo, device_id, name, admission.size_cap(job.max_content_bytes))
        try:
            # A clone, not init + fetch: only a clone learns the branch an empty remote's HEAD
            # names. No checkout (records are written by `checkout` below), no local shortcut.
            git.run("clone", "-q", "--no-checkout", "--no-local", "--no-tags", "--origin", "origin", "--",
                    remote, ".")
            harden(layout.repo)
            branch = pick_branch(git)
            git.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
            for ref in git.out("for-each-ref", "--format=%(refname)", "refs/heads/").split():
                if ref != f"refs/heads/{branch}":  # the clone's branch for a HEAD not followed
                    git.run("update-ref", "-d", ref)
            theirs = git.rev(remote_ref(branch))
            if theirs is not None:
                checkout(git, None, theirs, full=True)
        except GitFailed:
            shutil.rmtree(layout.repo, ignore_errors=True)
            raise
        layout.write_json(layout.config, {"remote": remote, "device_id": device_id, "device_name": name,
                                          "branch": branch})
        result.head, result.device = git.rev("HEAD"), device_id

    # -- sync -------------------------------------------------------------------------------------

    def sync(self, job: Job, result: Result) -> None:
        layout = self.layout
        check_plain(layout)
        config = layout.read_config()
        if not layout.is_set_up():
            raise GitFailed("not_set_up", "sync is not set up: run `memoryd sync init REMOTE` first")
        result.remote = config["remote"]
        self.branch = branch_of(config)
        git = Git(layout.repo, config["device_id"], config.get("device_name") or "device",
                  admission.size_cap(job.max_content_bytes))
        self.device = config["device_id"]
        # A clone without our attributes was made (and checked out whole) by an older memoryd:
        # checked out again, records only.
        result.repaired = repair(git, layout.repo, full=harden(layout.repo))
        start = git.rev("HEAD")
        self.phase = f"exporting {len(job.export)} changed records"
        exported = self.export(git, job, result)
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            result.attempts = attempt
            known = git.rev(remote_ref(self.branch))
            self.phase = "fetching, merging, pushing" + (f" (attempt {attempt})" if attempt > 1 else "")
            fetch(git)
            if known is not None and not is_ancestor(git, known, git.rev(remote_ref(self.branch))):
                result.rewritten = True  # force-pushed or replaced: merged record by record all the same
            if self.integrate(git, job, result):
                break
        else:
            raise GitFailed("push_race", f"another machine pushed {PUSH_ATTEMPTS} times while this one "
                            "synced; run `memoryd sync` again")
        result.pushed = exported
        result.head = git.rev("HEAD")
        self.phase = "checking pulled files"
        self.scan(git, job, result, start)
        # git's own upkeep, in this job (never detached: the next job must find no gc running);
        # it acts only past thousands of loose objects, so most syncs pay one quick check.
        git.run("-c", "gc.auto=6700", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet", check=False)

    def export(self, git: Git, job: Job, result: Result) -> list[tuple[str, str, str]]:
        """Write the records changed here into the clone and commit them; returns what went in."""
        repo = self.layout.repo
        for folder in TOP_FOLDERS:
            clear_non_dir(repo / folder)
        written: list[tuple[str, str, str]] = []
        for memory_id, (state, sha, path) in sorted(job.export.items()):
            try:
                data = store.read_nofollow(path)
            except (OSError, store.BadRecord):
                result.deferred += 1
                continue
            if sha256_hex(data) != sha:  # changed since the job started: the next sync takes it
                result.deferred += 1
                continue
            if _holds_credential(data):
                result.kept_local += 1
                continue
            if self._export_loses(repo, job, memory_id, Version(state, data), result):
                continue
            place(repo, memory_id, state, data)
            written.append((memory_id, state, sha))
        for memory_id, shas in job.resolved.items():
            for sha in shas:
                drop_kept(repo, repo / CONFLICTS / memory_id / f"{sha}.md")
        stage(git)
        if git.run("diff", "--cached", "--quiet", check=False).returncode != 0:
            git.run("commit", "-q", "--no-verify", "-m", f"memoryd: {len(written)} records from {self.device}")
        return written

    def _export_loses(self, repo: Path, job: Job, memory_id: str, ours: Version, result: Result) -> bool:
        """The clone may hold a version the live store never took (pulled while this record was
        being changed here): then both changed it, and the merge rule decides. True when the
        local version lost (it is kept under conflicts/ and the clone's version stays)."""
        there = read_clone_record(repo, memory_id)
        if there is None or there.sha == ours.sha or (there.state, there.sha) == job.agreed.get(memory_id):
            return False
        decision = pick(ours, there, horizon())
        keep_loser(repo, memory_id, decision.loser.data)
        result.decided.append({"id": memory_id, "winner": decision.winner.sha, "loser": decision.loser.sha,
                               "rule": decision.rule})
        return decision.winner is there

    def integrate(self, git: Git, job: Job, result: Result) -> bool:
        """Bring the fetched remote branch in and push; False when the push lost a race."""
        ours, theirs = git.rev("HEAD"), git.rev(remote_ref(self.branch))
        if theirs is not None and ours is None:
            checkout(git, None, theirs)
            return True
        if ours is None:
            return True  # nothing here, nothing there
        if theirs is not None and theirs != ours:
            base = merge_base(git, ours, theirs)
            if base == ours:
                checkout(git, ours, theirs)
            elif base != theirs:
                self.merge(git, base, ours, theirs, result)
        self.restore_missing(git, job, result)
        if theirs == git.rev("HEAD"):
            return True
        try:
            git.run("push", "-q", "origin", f"HEAD:refs/heads/{self.branch}")
        except GitFailed as exc:
            if exc.kind == "push_race":
                return False
            raise
        return True

    def merge(self, git: Git, base: str | None, ours: str, theirs: str, result: Result) -> None:
        """Merge two commits record by record into a commit with both as parents."""
        trees = [by_key(git.tree(rev)) for rev in (base, ours, theirs)]
        changes: list[str] = []     # `git update-index --index-info` lines
        contested: list[tuple[str, Any, Any]] = []
        not_after = horizon()  # a stamp past it wins nothing (a lie, or a clock far ahead)
        for key in sorted(set(trees[1]) | set(trees[2])):
            b, o, t = (tree.get(key) for tree in trees)
            side = three_way(b, o, t)
            if side == "conflict" and (o is None or t is None):
                side = "ours" if t is None else "theirs"  # one side has it, the other lost it: keep it
            if side == "conflict" and key[0] == "record":
                contested.append((key[1], o, t))
            elif side == "theirs":
                changes += replace_lines(o, t)
        blobs = git.blobs(sorted({v[2] for _id, o, t in contested for v in (o, t)}))
        for memory_id, o, t in contested:
            mine, other = Version(o[0], blobs.get(o[2], b"")), Version(t[0], blobs.get(t[2], b""))
            decision = pick(mine, other, not_after)
            if decision.winner is other:
                changes += replace_lines(o, t)
            loser = t if decision.winner is mine else o
            changes.append(f"100644 {loser[2]}\t{CONFLICTS}/{memory_id}/{decision.loser.sha}.md")
            result.decided.append({"id": memory_id, "winner": decision.winner.sha,
                                   "loser": decision.loser.sha, "rule": decision.rule})
        if changes:
            git.run("update-index", "--index-info", stdin=("\n".join(changes) + "\n").encode())
        tree = git.out("write-tree")
        message = f"memoryd: merge by {self.device} ({len(contested)} conflicts)"
        commit = git.out("commit-tree", tree, "-p", ours, "-p", theirs, "-m", message)
        checkout(git, ours, commit)

    def restore_missing(self, git: Git, job: Job, result: Result) -> None:
        """Put back every record this machine holds that the merged tree has neither as a memory
        nor as a tombstone: no machine drops a record that way (a removal is a tombstone), so it
        was `git rm`ed on the remote or lost in a rewritten history; left out, this machine would
        go on believing it agreed and a new machine would never receive it. Committed here, pushed
        with the merge, and reported (`restored_to_remote`)."""
        head = git.rev("HEAD")
        if head is None:
            return
        present = {named[0] for path, (mode, _blob) in git.tree(head).items()
                   if mode in admission.REGULAR_MODES and (named := admission.record_path(path))}
        restored = []
        for memory_id, (state, sha) in sorted(job.local.items()):
            if memory_id in present or state not in job.folders:
                continue
            try:
                data = store.read_nofollow(job.folders[state] / f"{memory_id}.md")
            except (OSError, store.BadRecord):
                continue  # gone or changed since the snapshot: the next sync sees it again
            if sha256_hex(data) != sha or _holds_credential(data):  # changed, or never travels
                continue
            place(self.layout.repo, memory_id, state, data)
            restored.append(memory_id)
        if restored:
            stage(git)
            git.run("commit", "-q", "--no-verify", "-m",
                    f"memoryd: {len(restored)} records the remote lost, put back by {self.device}")
            result.restored += [i for i in restored if i not in result.restored]

    # -- what the live store is offered -----------------------------------------------------------

    def scan(self, git: Git, job: Job, result: Result, start: str | None) -> None:
        """Check every file of the merged tree that the live store does not have yet."""
        entries = git.tree(git.rev("HEAD"))
        current = {blob for _mode, blob in entries.values()}
        self.sha_of_blob = {b: s for b, s in self.sha_of_blob.items() if b in current}  # only this tree's
        # Bounded reads (a first sync may see 100k blobs); one over the cap is never read, and
        # with no sha it never matches a local record: it is refused below without its bytes.
        for blob, data in git.iter_blobs(sorted(current - self.sha_of_blob.keys())):
            self.sha_of_blob[blob] = sha256_hex(data)
        candidates: dict[str, tuple[str, str]] = {}
        for path, (mode, blob) in entries.items():
            sha = self.sha_of_blob.get(blob, "")
            named = admission.record_path(path)
            kept = admission.conflict_path(path)
            if kept is not None and mode in admission.REGULAR_MODES:
                result.conflicts.setdefault(kept[0], []).append(kept[1])
            elif named is not None and named[0] in job.local_only:
                candidates[path] = (mode, blob)  # refused below: that id stays on this machine
            elif named is None or (named[1], sha) != job.local.get(named[0]):
                candidates[path] = (mode, blob)
        paths_of: dict[str, list[tuple[str, str]]] = {}  # blob → (path, mode) of the candidates
        for path, (mode, blob) in sorted(candidates.items()):
            paths_of.setdefault(blob, []).append((path, mode))
        ids = sorted(paths_of)
        sizes = git.sizes(ids)
        devices = last_devices(git, start, [p for p in candidates if admission.record_path(p)])
        self.load_quarantine()
        seen: dict[str, Incoming] = {}
        held = 0  # bytes of pulled records handed to the loop
        unread = ((b, None) for b in ids if sizes.get(b, git.cap + 1) > git.cap)  # too big, or no blob
        for blob, data in chain(git.iter_blobs(ids), unread):
            for path, mode in paths_of[blob]:
                try:
                    if data is None and blob in sizes:
                        raise admission.Refused(f"over the size cap ({sizes[blob]} bytes)")
                    if admission.record_path(path) and admission.record_path(path)[0] in job.local_only:  # type: ignore[index]
                        raise admission.Refused("names a record that stays on this machine")
                    ok = admission.check(path, mode, data or b"", job.max_content_bytes)
                except admission.Refused as exc:
                    self.quarantine(path, blob, data, exc.reason, result)
                    continue
                assert data is not None  # admitted: a regular file within the cap, so it was read
                if held + len(data) > PULL_MAX_BYTES:
                    result.deferred += 1  # taken by the next sync
                    continue
                held += len(data)
                item = Incoming(ok.memory_id, ok.state, sha256_hex(data), data, ok.memory, devices.get(path),
                                job.local.get(ok.memory_id))
                other = seen.get(ok.memory_id)  # the same id as a memory and a tombstone: the rule decides
                if other is None or pick(Version(other.state, other.data), Version(item.state, data)).winner.data == data:
                    seen[ok.memory_id] = item
        result.incoming = [item for item in seen.values()
                           if (item.state, item.sha) != job.local.get(item.memory_id)]
        result.quarantined_total = count_quarantined(self.layout)

    def load_quarantine(self) -> None:
        """What sync/quarantine/ already lists (reported once) and the bytes it holds."""
        folder = self.layout.quarantine
        self.quarantined, self.quarantine_used = set(), 0
        try:
            self.quarantine_used = sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(folder))
            with open(folder / "index.jsonl", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    try:
                        self.quarantined.add(json.loads(line)["blob"])
                    except (ValueError, KeyError, TypeError):
                        continue
        except OSError:
            pass

    def quarantine(self, path: str, blob: str, data: bytes | None, reason: str, result: Result) -> None:
        """Keep a refused file's bytes under sync/quarantine/ (never a link) and report it once.
        The folder holds at most QUARANTINE_MAX_BYTES: bytes that do not fit (or were never read,
        over the size cap) are not kept, only the row; a row that does not fit either is not
        written, and the file is reported again by the next sync. The path is kept as text
        (`escaped`): a name that is not UTF-8 must not break a reply or last.json."""
        if blob in self.quarantined:
            return
        self.quarantined.add(blob)
        folder = self.layout.quarantine
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        row = {"blob": blob, "path": escaped(path)[:300], "reason": reason}
        if data is not None and self.quarantine_used + len(data) + 1024 <= QUARANTINE_MAX_BYTES:
            write_atomic(folder / f"{blob}.bad", data)
            self.quarantine_used += len(data)
        elif data is not None:
            row["reason"] += "; bytes not kept (the quarantine is full)"
        line = json.dumps(row) + "\n"
        if self.quarantine_used + len(line) <= QUARANTINE_MAX_BYTES:
            with open(folder / "index.jsonl", "a", encoding="utf-8") as handle:
                handle.write(line)
            self.quarantine_used += len(line)
        result.quarantined.append(row)


# -- helpers on the clone ---------------------------------------------------------------------------

def remote_ref(branch: str) -> str:
    return f"refs/remotes/origin/{branch}"


def pick_branch(git: Git) -> str:
    """The branch to sync on, right after the clone (its HEAD is what the remote's HEAD names, or
    `main` when the remote names none): `main` when the remote has it (every earlier memoryd pushed
    there); else what the remote's HEAD names when that branch does not exist yet — a new bare
    repository's `master` — so a plain `git clone` checks the memories out; or when it holds
    memoryd's folders (another machine followed it). Otherwise `main`: a remote whose default
    branch holds something else keeps it untouched."""
    if git.rev(remote_ref(BRANCH)) is not None:
        return BRANCH
    named = git.run("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.decode(errors="replace").strip()
    if branch_of({"branch": named}) != named or named == BRANCH:
        return BRANCH
    head = git.rev(remote_ref(named))
    if head is None:
        return named
    top = set(git.out("ls-tree", "--name-only", head).split("\n"))
    return named if top & {"memories", "tombstones"} else BRANCH


def fetch(git: Git) -> None:
    git.run("fetch", "-q", "--prune", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*")


def is_ancestor(git: Git, older: str, newer: str | None) -> bool:
    if newer is None:
        return False
    return git.run("merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def merge_base(git: Git, ours: str, theirs: str) -> str | None:
    done = git.run("merge-base", ours, theirs, check=False)
    return done.stdout.decode().strip() or None if done.returncode == 0 else None


def repair(git: Git, repo: Path, full: bool = False) -> str | None:
    """Reset a clone that a killed sync left mid-way (or, `full`, any clone) to its last commit;
    says what it found, or None."""
    found = []
    lock = repo / ".git" / "index.lock"
    if lock.exists():  # one sync at a time per store: no other git runs here now
        lock.unlink()
        found.append("a stale index lock")
    if (repo / ".git" / "MERGE_HEAD").exists():
        found.append("a merge in progress")
    # --ignored: a pulled .gitignore (git reads it from the index) must not hide a stray file
    if git.run("status", "--porcelain", "-z", "--untracked-files=all", "--ignored", check=False).stdout:
        found.append("uncommitted files")
    if found or full:
        checkout(git, None, git.rev("HEAD"), full=True)
    return "reset the clone after a half-finished sync (" + ", ".join(found) + ")" if found else None


def harden(repo: Path) -> bool:
    """Write the clone's attributes (ATTRIBUTES); True when they were not there yet."""
    path = repo / ".git" / "info" / "attributes"
    try:
        if store.read_nofollow(path) == ATTRIBUTES:
            return False
    except (OSError, store.BadRecord):
        pass
    write_atomic(path, ATTRIBUTES)
    return True


def checkout(git: Git, old: str | None, new: str | None, full: bool = False) -> None:
    """Move HEAD, the index and the working tree from commit `old` to `new` — never with git's
    own checkout. Only records are ever on disk (`memories/<ulid>.md`, `tombstones/<ulid>.md`,
    `conflicts/<ulid>/<sha256>.md`: regular files within the size cap), written from their blobs
    byte for byte; whatever else a remote pushed (a bare repository with a hostile config, a
    gigabyte of zeros, a .gitattributes) stays in the tree but never in the working tree: its
    index entry is marked skip-worktree, so git takes it as unchanged and keeps it in every
    commit. `full`: empty the working tree and write every record (a clone a killed sync left,
    or one an older memoryd checked out whole); otherwise only the entries that changed."""
    repo = git.repo
    before, after = ({} if full else git.tree(old)), git.tree(new)
    changed = {path: entry for path, entry in after.items() if before.get(path) != entry}
    records = {path: blob for path, (mode, blob) in changed.items() if mode in admission.REGULAR_MODES
               and (admission.record_path(path) or admission.conflict_path(path))}
    if full:
        for entry in os.scandir(repo):
            if entry.name != ".git":
                shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
        (repo / ".git" / "index").unlink(missing_ok=True)  # rebuilt from `new`, no stale flag kept
    for path, entry in before.items():  # gone or changed: its old file goes (if it was written)
        if after.get(path) != entry and os.path.lexists(repo / path) and not store.is_plain_dir(repo / path):
            if admission.conflict_path(path):
                drop_kept(repo, repo / path)  # settled on another machine: its folder goes too
            else:
                real_parents(repo, repo / path).unlink(missing_ok=True)
    data = git.blobs(sorted(set(records.values())))
    for path, blob in records.items():
        if blob in data:
            write_atomic(real_parents(repo, repo / path), data[blob])
    if new is None:
        git.run("read-tree", "--empty")
        return
    git.run("reset", "-q", "--mixed", new)
    left_out = [os.fsencode(path) for path, (_mode, blob) in changed.items() if records.get(path) not in data]
    if left_out:
        git.run("update-index", "--skip-worktree", "-z", "--stdin", stdin=b"\0".join(left_out) + b"\0")


def stage(git: Git) -> None:
    """`git add` all the worker wrote: forced (-f), since a pulled .gitignore or the user's
    excludes must not keep a record out; and a file written where checkout left the tree's entry
    out (a record the remote holds over the size cap) is tracked again first — `add` passes over
    a skip-worktree entry."""
    listed = git.run("ls-files", "-v", "-z").stdout.split(b"\0")
    written = [e[2:] for e in listed if e.startswith(b"S ") and os.path.lexists(git.repo / os.fsdecode(e[2:]))]
    if written:
        git.run("update-index", "--no-skip-worktree", "-z", "--stdin", stdin=b"\0".join(written) + b"\0")
    git.run("add", "-A", "-f")  # no pathspec: "." matching only skip-worktree entries is an error


def clear_non_dir(path: Path) -> None:
    """A synced folder must be a real directory: a link or file there (pulled from a hostile
    remote) is removed before anything is written under it."""
    if os.path.lexists(path) and not store.is_plain_dir(path):
        path.unlink()


def real_parents(repo: Path, path: Path) -> Path:
    """`path` (under the clone) once every directory between the clone and it is a real one:
    a link or a file where a directory belongs — `conflicts/<id>` pulled as a link to
    `~/.claude/commands` — is removed (the link, never what it points at) and a directory made,
    so nothing is written or deleted through a link at any depth; the next commit drops it."""
    while True:
        try:
            if not store.check_no_links(repo, path):
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return path
        except store.LinkRefused as exc:
            if exc.path == path:  # not under the clone at all: a caller's bug, never unlink it
                raise
            exc.path.unlink()


def place(repo: Path, memory_id: str, state: str, data: bytes) -> None:
    """Put a record into the clone's working tree in its state's folder, out of the other one."""
    for other in (LIVE, TOMB):
        if other != state:
            target = real_parents(repo, repo / FOLDER_OF[other] / f"{memory_id}.md")
            if os.path.lexists(target):
                target.unlink()
    write_atomic(real_parents(repo, repo / FOLDER_OF[state] / f"{memory_id}.md"), data)


def drop_kept(repo: Path, path: Path) -> None:
    """Remove a kept loser (`conflicts/<id>/<sha256>.md`) and, once it was the last, its folder
    and an emptied `conflicts/`: a settled conflict leaves nothing behind. `real_parents` has made
    every directory on the way real, and `rmdir` removes an empty directory, never a link's target."""
    target = real_parents(repo, path)
    if not os.path.islink(target) and target.is_file():
        target.unlink()
    for folder in (target.parent, target.parent.parent):
        try:
            os.rmdir(folder)
        except OSError:  # not empty (another kept version), or gone already
            return


def keep_loser(repo: Path, memory_id: str, data: bytes) -> None:
    write_atomic(real_parents(repo, repo / CONFLICTS / memory_id / f"{sha256_hex(data)}.md"), data)


def read_clone_record(repo: Path, memory_id: str) -> Version | None:
    """The clone's version of a record; None when it has none (a linked folder holds none)."""
    for state in (LIVE, TOMB):
        path = repo / FOLDER_OF[state] / f"{memory_id}.md"
        try:
            store.check_no_links(repo, path)
            return Version(state, store.read_nofollow(path))
        except (OSError, store.BadRecord):
            continue
    return None


def by_key(entries: dict[str, tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """A tree's entries keyed by record id (a record may move between memories/ and
    tombstones/) or, for any other path, by the path: value (state or "", path, blob, mode)."""
    keyed: dict[tuple[str, str], Any] = {}
    for path, (mode, blob) in entries.items():
        named = admission.record_path(path)
        if named is not None and mode in admission.REGULAR_MODES:
            previous = keyed.get(("record", named[0]))
            if previous is None or named[1] == TOMB:  # both present (hand-made tree): the tombstone
                keyed[("record", named[0])] = (named[1], path, blob, mode)
        elif path.split("/", 1)[0] in TOP_FOLDERS and "/" not in path:
            continue  # a link or file where a synced folder belongs: never merged in
        else:
            keyed[("path", path)] = ("", path, blob, mode)
    return keyed


def replace_lines(ours: Any, theirs: Any) -> list[str]:
    """Index lines that swap our entry for theirs (either may be None)."""
    lines = []
    if ours is not None and (theirs is None or ours[1] != theirs[1]):
        lines.append(f"0 {EMPTY}\t{ours[1]}")
    if theirs is not None:
        lines.append(f"{theirs[3]} {theirs[2]}\t{theirs[1]}")
    return lines


def last_devices(git: Git, start: str | None, paths: list[str]) -> dict[str, str]:
    """For each path, the device id that last committed it since `start` (from the commit
    author's address, `<device>@memoryd.invalid`); paths not touched since then are absent."""
    if not paths:
        return {}
    span = f"{start}..HEAD" if start else "HEAD"
    raw = git.run("log", "--no-merges", "--no-show-signature", "--format=%x00%ae", "--name-only", span, "--",
                  *sorted({p.split("/", 1)[0] for p in paths})).stdout.decode(errors="replace")
    wanted, found = set(paths), {}
    for chunk in raw.split("\0")[1:]:
        email, *names = chunk.strip("\n").split("\n")
        device = email.split("@", 1)[0] if email.endswith("@memoryd.invalid") else None
        for name in names:
            if name in wanted and name not in found and device:
                found[name] = device
    return found


def _holds_credential(data: bytes) -> bool:
    """A record holding a credential the user acknowledged stays on this machine."""
    try:
        meta, body = store.parse(data)
    except (store.BadRecord, UnicodeDecodeError):
        return False
    notes = " ".join(str(meta.get(k) or "") for k in ("verification_note", "removed_reason"))
    return bool(find_credentials(body) or find_credentials(notes))
