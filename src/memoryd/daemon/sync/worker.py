"""One sync job on the clone, in a worker thread so the loop keeps serving (the steps: docs/sync.md,
"One sync"). It writes only under `sync/` (through `clone`; git only through `git.Git`); the live
store is read without following links and never written: the loop admits what the job brings back."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from itertools import chain
from pathlib import Path
from typing import Any

from memoryd.daemon.credentials.detector import find_credentials
from memoryd.daemon.memories.records import sha256_hex
from memoryd.daemon.storage import frontmatter, nofollow
from memoryd.daemon.sync import admission, clone
from memoryd.daemon.sync.git import Git, GitFailed
from memoryd.daemon.sync.job import Incoming, Job, Result
from memoryd.daemon.sync.layout import BRANCH, CONFLICTS, TOMB, Layout, branch_of, count_quarantined, escaped
from memoryd.daemon.sync.merge import Version, horizon, pick, three_way

PUSH_ATTEMPTS = 3
EMPTY = "0" * 40  # the blob id that removes an index entry (`update-index --index-info`)
PULL_MAX_BYTES = 256 << 20  # pulled bytes one job hands the loop: a remote cannot fill memory


def device_identity(layout: Layout) -> tuple[str, str]:
    """This machine's device id (generated once, kept in sync/config.json) and its name."""
    config = layout.read_config()
    device_id = config.get("device_id")
    if not (isinstance(device_id, str) and len(device_id) == 16):
        device_id = secrets.token_hex(8)
    name = config.get("device_name")
    if not isinstance(name, str) or not name:
        import socket  # here: only a store that syncs needs it

        name = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-_.")[:64] or "device"
    return device_id, name

class Worker:
    """Runs at most one job at a time in a thread; `take` hands the finished result to the loop."""

    def __init__(self, root: Path) -> None:
        self.layout = Layout(root)
        self.thread: threading.Thread | None = None
        self.running: Job | None = None
        self.done: Result | None = None
        self.lock = threading.Lock()
        self.sha_of_blob: dict[str, str] = {}  # git blob id → sha256 of its bytes
        self.jobs = 0  # the last job number handed out
        self.admitting: Result | None = None  # a finished job the loop is admitting, batch by batch
        self.device = ""  # set by each sync, like `branch`
        self.branch = BRANCH
        self.phase = ""  # what the running job does, for `memoryd sync` (a plain str: atomic)
        self.quarantine = clone.Quarantine(self.layout.quarantine)

    def start(self, job: Job) -> None:
        self.running, self.phase = job, "starting"
        self.thread = threading.Thread(target=self._run, args=(job,), name=f"memoryd-sync-{job.number}", daemon=True)
        self.thread.start()

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
            (self.init if job.kind == "init" else self.sync)(job, result)
        except GitFailed as exc:
            result.status, result.error = "error", {"kind": exc.kind, "message": escaped(exc.message)}
        except OSError as exc:
            result.status, result.error = "error", {"kind": "local_error", "message": escaped(f"{exc}")[:300]}
        except Exception as exc:  # noqa: BLE001 - a bug must reach the CLI as an answer, not hang it
            result.status, result.error = "error", {"kind": "internal_error", "message": repr(exc)[:300]}
        with self.lock:
            self.done = result

    def init(self, job: Job, result: Result) -> None:
        layout, remote = self.layout, job.remote or ""
        clone.check_plain(layout.dir, layout.repo)
        # 0700 like the rest of the store: as a parent of repo/ it was made with the umask's 0755.
        layout.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(layout.dir, 0o700)
        result.remote = remote
        if layout.is_set_up():
            if (current := layout.read_config().get("remote")) != remote:
                raise GitFailed("already_set_up", f"sync is already set up with {current}; remove "
                                f"{layout.dir} to start over with another remote")
            return
        device_id, name = device_identity(layout)
        shutil.rmtree(layout.repo, ignore_errors=True)  # a half-made clone of an earlier attempt
        layout.repo.mkdir(mode=0o700, parents=True)
        git = Git(layout.repo, device_id, name, admission.size_cap(job.max_content_bytes))
        try:
            git.clone(remote)
            clone.harden(layout.repo)
            branch = pick_branch(git)
            git.keep_only_branch(branch)
            if (theirs := git.remote_head(branch)) is not None:
                clone.checkout(git, None, theirs, full=True)
        except GitFailed:
            shutil.rmtree(layout.repo, ignore_errors=True)
            raise
        layout.write_json(layout.config, {"remote": remote, "device_id": device_id, "device_name": name,
                                          "branch": branch})
        result.head, result.device = git.rev("HEAD"), device_id

    def sync(self, job: Job, result: Result) -> None:
        layout = self.layout
        clone.check_plain(layout.dir, layout.repo)
        config = layout.read_config()
        if not layout.is_set_up():
            raise GitFailed("not_set_up", "sync is not set up: run `memoryd sync init REMOTE` first")
        result.remote = config["remote"]
        self.branch = branch_of(config)
        git = Git(layout.repo, config["device_id"], config.get("device_name") or "device",
                  admission.size_cap(job.max_content_bytes))
        self.device = config["device_id"]
        # A clone without our attributes was checked out whole by an older memoryd: rewrite it.
        result.repaired = clone.repair(git, full=clone.harden(layout.repo))
        start = git.rev("HEAD")
        self.phase = f"exporting {len(job.export)} changed records"
        exported = self.export(git, job, result)
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            result.attempts = attempt
            known = git.remote_head(self.branch)
            self.phase = "fetching, merging, pushing" + (f" (attempt {attempt})" if attempt > 1 else "")
            git.fetch()
            if known is not None and not git.is_ancestor(known, git.remote_head(self.branch)):
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
        git.tidy()

    def export(self, git: Git, job: Job, result: Result) -> list[tuple[str, str, str]]:
        """Write the records changed here into the clone and commit them; returns what went in."""
        repo = self.layout.repo
        clone.clear_top(repo)
        written: list[tuple[str, str, str]] = []
        for memory_id, (state, sha, path) in sorted(job.export.items()):
            data = read_live(path, sha)
            if data is None:  # gone or changed since the job started: the next sync takes it
                result.deferred += 1
                continue
            if _holds_credential(data):
                result.kept_local += 1
                continue
            if self._export_loses(repo, job, memory_id, Version(state, data), result):
                continue
            clone.place(repo, memory_id, state, data)
            written.append((memory_id, state, sha))
        for memory_id, shas in job.resolved.items():
            for sha in shas:
                clone.drop_kept(repo, repo / CONFLICTS / memory_id / f"{sha}.md")
        git.commit_all(f"memoryd: {len(written)} records from {self.device}")
        return written

    def _export_loses(self, repo: Path, job: Job, memory_id: str, ours: Version, result: Result) -> bool:
        """True when the clone holds a version the store never took that beats ours (ours is kept)."""
        there = clone.read_clone_record(repo, memory_id)
        if there is None or there.sha == ours.sha or (there.state, there.sha) == job.agreed.get(memory_id):
            return False
        decision = pick(ours, there, horizon())
        clone.keep_loser(repo, memory_id, decision.loser.data)
        result.decided.append({"id": memory_id, "winner": decision.winner.sha, "loser": decision.loser.sha,
                               "rule": decision.rule})
        return decision.winner is there

    def integrate(self, git: Git, job: Job, result: Result) -> bool:
        """Bring the fetched remote branch in and push; False when the push lost a race."""
        ours, theirs = git.rev("HEAD"), git.remote_head(self.branch)
        if ours is None:  # nothing here: theirs, if there is anything there
            if theirs is not None:
                clone.checkout(git, None, theirs)
            return True
        if theirs is not None and theirs != ours:
            base = git.merge_base(ours, theirs)
            if base == ours:
                clone.checkout(git, ours, theirs)
            elif base != theirs:
                self.merge(git, base, ours, theirs, result)
        self.restore_missing(git, job, result)
        return theirs == git.rev("HEAD") or git.push(self.branch)

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
        blobs = dict(git.iter_blobs(sorted({v[2] for _id, o, t in contested for v in (o, t)})))
        for memory_id, o, t in contested:
            mine, other = Version(o[0], blobs.get(o[2], b"")), Version(t[0], blobs.get(t[2], b""))
            decision = pick(mine, other, not_after)
            if decision.winner is other:
                changes += replace_lines(o, t)
            loser = t if decision.winner is mine else o
            changes.append(f"100644 {loser[2]}\t{CONFLICTS}/{memory_id}/{decision.loser.sha}.md")
            result.decided.append({"id": memory_id, "winner": decision.winner.sha,
                                   "loser": decision.loser.sha, "rule": decision.rule})
        message = f"memoryd: merge by {self.device} ({len(contested)} conflicts)"
        clone.checkout(git, ours, git.commit_merge(changes, ours, theirs, message))

    def restore_missing(self, git: Git, job: Job, result: Result) -> None:
        """Commit again every record held here that the merged tree lacks (docs/sync.md, "Merging")."""
        if (head := git.rev("HEAD")) is None:
            return
        present = {named[0] for path, (mode, _blob) in git.tree(head).items()
                   if mode in admission.REGULAR_MODES and (named := admission.record_path(path))}
        restored = []
        for memory_id, (state, sha) in sorted(job.local.items()):
            if memory_id in present or state not in job.folders:
                continue
            data = read_live(job.folders[state] / f"{memory_id}.md", sha)
            if data is None or _holds_credential(data):  # gone or changed (the next sync), or never travels
                continue
            clone.place(self.layout.repo, memory_id, state, data)
            restored.append(memory_id)
        if restored:
            git.commit_all(f"memoryd: {len(restored)} records the remote lost, put back by {self.device}")
            result.restored += [i for i in restored if i not in result.restored]

    def scan(self, git: Git, job: Job, result: Result, start: str | None) -> None:
        """Check every file of the merged tree that the live store does not have yet."""
        entries = git.tree(git.rev("HEAD"))
        current = {blob for _mode, blob in entries.values()}
        self.sha_of_blob = {b: s for b, s in self.sha_of_blob.items() if b in current}  # only this tree's
        # A blob over the cap is never read: with no sha it matches no local record, and is refused.
        unknown = sorted(current - self.sha_of_blob.keys())
        self.sha_of_blob.update((b, sha256_hex(d)) for b, d in git.iter_blobs(unknown))
        candidates: dict[str, tuple[str, str]] = {}
        for path, (mode, blob) in entries.items():
            named, sha = admission.record_path(path), self.sha_of_blob.get(blob, "")
            if (kept := admission.conflict_path(path)) is not None and mode in admission.REGULAR_MODES:
                result.conflicts.setdefault(kept[0], []).append(kept[1])
            elif named is None or named[0] in job.local_only or (named[1], sha) != job.local.get(named[0]):
                candidates[path] = (mode, blob)  # a local-only id is refused below
        paths_of: dict[str, list[tuple[str, str]]] = {}  # blob → (path, mode) of the candidates
        for path, (mode, blob) in sorted(candidates.items()):
            paths_of.setdefault(blob, []).append((path, mode))
        ids = sorted(paths_of)
        sizes = git.sizes(ids)
        devices = git.last_devices(start, [p for p in candidates if admission.record_path(p)])
        self.quarantine.load()
        seen: dict[str, Incoming] = {}
        held = 0  # bytes of pulled records handed to the loop
        unread = ((b, None) for b in ids if sizes.get(b, git.cap + 1) > git.cap)  # too big, or no blob
        for blob, data in chain(git.iter_blobs(ids), unread):
            for path, mode in paths_of[blob]:
                try:
                    if data is None and blob in sizes:
                        raise admission.Refused(f"over the size cap ({sizes[blob]} bytes)")
                    if (named := admission.record_path(path)) and named[0] in job.local_only:
                        raise admission.Refused("names a record that stays on this machine")
                    ok = admission.check(path, mode, data or b"", job.max_content_bytes)
                except admission.Refused as exc:
                    self.quarantine.keep(path, blob, data, exc.reason, result.quarantined)
                    continue
                assert data is not None  # admitted: a regular file within the cap, so it was read
                if held + len(data) > PULL_MAX_BYTES:
                    result.deferred += 1  # taken by the next sync
                    continue
                held += len(data)
                item = Incoming(ok.memory_id, ok.state, sha256_hex(data), data, ok.memory, devices.get(path),
                                job.local.get(ok.memory_id))
                other = seen.get(ok.memory_id)  # the same id as a memory and a tombstone: the rule decides
                if other is None or pick(Version(other.state, other.data), Version(ok.state, data)).winner.data == data:
                    seen[ok.memory_id] = item
        result.incoming = [item for item in seen.values() if (item.state, item.sha) != job.local.get(item.memory_id)]
        result.quarantined_total = count_quarantined(self.layout)


def pick_branch(git: Git) -> str:
    """The branch to sync on, right after the clone (the rule: docs/sync.md, "Merging")."""
    named = None if git.remote_head(BRANCH) is not None else git.head_branch()
    if named is None or branch_of({"branch": named}) != named or named == BRANCH:
        return BRANCH
    head = git.remote_head(named)
    return named if head is None or git.top_level(head) & {"memories", "tombstones"} else BRANCH


def by_key(entries: dict[str, tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """A tree's entries by record id (it may move between folders) or path: (state, path, blob, mode)."""
    keyed: dict[tuple[str, str], Any] = {}
    for path, (mode, blob) in entries.items():
        named = admission.record_path(path)
        if named is not None and mode in admission.REGULAR_MODES:
            if ("record", named[0]) not in keyed or named[1] == TOMB:  # both present (hand-made tree): the tombstone
                keyed[("record", named[0])] = (named[1], path, blob, mode)
        elif path.split("/", 1)[0] in clone.TOP_FOLDERS and "/" not in path:
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


def read_live(path: Path, sha: str) -> bytes | None:
    """A live store's record file (no link followed) when it is still the version `sha`."""
    try:
        data = nofollow.read_nofollow(path)
    except (OSError, frontmatter.BadRecord):
        return None
    return data if sha256_hex(data) == sha else None


def _holds_credential(data: bytes) -> bool:
    """A record holding a credential the user acknowledged stays on this machine."""
    try:
        meta, body = frontmatter.parse(data)
    except (frontmatter.BadRecord, UnicodeDecodeError):
        return False
    notes = " ".join(str(meta.get(k) or "") for k in ("verification_note", "removed_reason"))
    return bool(find_credentials(body) or find_credentials(notes))
