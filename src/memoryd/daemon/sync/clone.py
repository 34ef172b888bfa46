"""The files a sync job writes: the clone's working tree (records only, byte for byte, never through
a link: docs/sync.md, "The working tree holds records only"; not fsynced: "Speed") and the quarantine."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path

from memoryd.daemon.memories.records import sha256_hex
from memoryd.daemon.storage import frontmatter, nofollow
from memoryd.daemon.sync import admission
from memoryd.daemon.sync.git import Git, GitFailed
from memoryd.daemon.sync.layout import CONFLICTS, FOLDER_OF, escaped, write_atomic
from memoryd.daemon.sync.merge import Version

TOP_FOLDERS = (*FOLDER_OF.values(), CONFLICTS)
# They outrank every .gitattributes in the tree: a remote's `eol=crlf` or `filter=…` never changes a record.
ATTRIBUTES = b"* -text -eol -filter -diff -merge -ident -working-tree-encoding\n"
QUARANTINE_MAX_BYTES = 64 << 20  # refused files' bytes and rows, in all: a remote cannot fill the disk


def check_plain(*paths: Path) -> None:
    """`GitFailed` unless each of `paths` is a real directory or missing: a link is never followed."""
    for path in paths:
        if os.path.islink(path) or (os.path.lexists(path) and not nofollow.is_plain_dir(path)):
            raise GitFailed("local_error", f"{path} is a symbolic link or not a directory; memoryd follows "
                            "no link in its store: remove it, then memoryd sync init again")


def harden(repo: Path) -> bool:
    """Write the clone's attributes (ATTRIBUTES); True when they were not there yet."""
    path = repo / ".git" / "info" / "attributes"
    try:
        if nofollow.read_nofollow(path) == ATTRIBUTES:
            return False
    except (OSError, frontmatter.BadRecord):
        pass
    write_atomic(path, ATTRIBUTES)
    return True


def repair(git: Git, full: bool = False) -> str | None:
    """Reset a clone a killed sync left mid-way (or, `full`, any) to HEAD; what it found, or None."""
    found = []
    lock = git.repo / ".git" / "index.lock"
    if lock.exists():  # one sync at a time per store: no other git runs here now
        lock.unlink()
        found.append("a stale index lock")
    if (git.repo / ".git" / "MERGE_HEAD").exists():
        found.append("a merge in progress")
    if git.is_dirty():
        found.append("uncommitted files")
    if found or full:
        checkout(git, None, git.rev("HEAD"), full=True)
    return "reset the clone after a half-finished sync (" + ", ".join(found) + ")" if found else None


def checkout(git: Git, old: str | None, new: str | None, full: bool = False) -> None:
    """Move HEAD, the index and the records on disk from commit `old` to `new` (docs/sync.md, "The working
    tree holds records only"); `full`: empty the working tree and write every record."""
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
    for path, was in before.items():  # gone or changed: its old file goes (if it was written)
        if after.get(path) != was and os.path.lexists(repo / path) and not nofollow.is_plain_dir(repo / path):
            if admission.conflict_path(path):
                drop_kept(repo, repo / path)  # settled on another machine: its folder goes too
            else:
                real_parents(repo, repo / path).unlink(missing_ok=True)
    data = dict(git.iter_blobs(sorted(set(records.values()))))
    for path, blob in records.items():
        if blob in data:
            write_atomic(real_parents(repo, repo / path), data[blob], durable=False)
    git.reset_index(new)
    left_out = [os.fsencode(path) for path, (_mode, blob) in changed.items() if records.get(path) not in data]
    if left_out:  # none when `new` is None
        git.skip_worktree(left_out)


def clear_top(repo: Path) -> None:
    """Remove a link or file where a synced folder belongs, before anything is written under it."""
    for folder in TOP_FOLDERS:
        if os.path.lexists(repo / folder) and not nofollow.is_plain_dir(repo / folder):
            (repo / folder).unlink()


def real_parents(repo: Path, path: Path) -> Path:
    """`path` (under the clone) once every directory above it is real: a link or file where one belongs
    is removed, never its target, so nothing is written or deleted through a link at any depth."""
    while True:
        try:
            if not nofollow.check_no_links(repo, path):
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return path
        except nofollow.LinkRefused as exc:
            if exc.path == path:  # not under the clone at all: a caller's bug, never unlink it
                raise
            exc.path.unlink()


def place(repo: Path, memory_id: str, state: str, data: bytes) -> None:
    """Put a record into the clone's working tree in its state's folder, out of the other one."""
    for other, folder in FOLDER_OF.items():
        if other != state:
            real_parents(repo, repo / folder / f"{memory_id}.md").unlink(missing_ok=True)
    write_atomic(real_parents(repo, repo / FOLDER_OF[state] / f"{memory_id}.md"), data, durable=False)


def drop_kept(repo: Path, path: Path) -> None:
    """Remove a kept loser and the folders it leaves empty (`rmdir` never removes a link's target)."""
    target = real_parents(repo, path)
    if not os.path.islink(target) and target.is_file():
        target.unlink()
    for folder in (target.parent, target.parent.parent):
        try:
            os.rmdir(folder)
        except OSError:  # not empty (another kept version), or gone already
            return


def keep_loser(repo: Path, memory_id: str, data: bytes) -> None:
    write_atomic(real_parents(repo, repo / CONFLICTS / memory_id / f"{sha256_hex(data)}.md"), data, durable=False)


def read_clone_record(repo: Path, memory_id: str) -> Version | None:
    """The clone's version of a record; None when it has none (a linked folder holds none)."""
    for state, folder in FOLDER_OF.items():
        path = repo / folder / f"{memory_id}.md"
        try:
            nofollow.check_no_links(repo, path)
            return Version(state, nofollow.read_nofollow(path))
        except (OSError, frontmatter.BadRecord):
            continue
    return None


class Quarantine:
    """Refused files' bytes (`<blob>.bad`) and rows (index.jsonl), each reported once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.listed: set[str] = set()  # blobs index.jsonl lists
        self.ids: set[str] = set()  # the record ids its rows name
        self.used = 0  # bytes the folder holds

    def load(self) -> None:
        self.listed, self.ids, self.used = set(), set(), 0
        try:
            self.used = sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(self.folder))
        except OSError:
            return
        rows = self._rows()
        self.listed, self.ids = {row["blob"] for row in rows}, {_record_id(row) for row in rows}

    def _rows(self) -> list[dict[str, str]]:
        """index.jsonl's rows that parse (a link there is never read)."""
        try:
            text = nofollow.read_nofollow(self.folder / "index.jsonl").decode("utf-8", "replace")
        except (OSError, frontmatter.BadRecord):
            return []
        rows = []
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("blob"), str) and isinstance(row.get("path"), str):
                rows.append(row)
        return rows

    def release(self, admitted: Collection[str]) -> int:
        """Drop the rows and bytes of records now `admitted` in another version; how many rows went."""
        if self.ids.isdisjoint(admitted):
            return 0
        rows = self._rows()
        kept = [row for row in rows if _record_id(row) not in admitted]
        write_atomic(self.folder / "index.jsonl", "".join(json.dumps(row) + "\n" for row in kept).encode())
        for blob in {row["blob"] for row in rows} - {row["blob"] for row in kept}:
            if len(blob) == 40 and all(c in "0123456789abcdef" for c in blob):
                (self.folder / f"{blob}.bad").unlink(missing_ok=True)  # unlink never follows a link
        self.load()
        return len(rows) - len(kept)

    def keep(self, path: str, blob: str, data: bytes | None, reason: str, rows: list[dict[str, str]]) -> None:
        """Keep a refused file's bytes (within QUARANTINE_MAX_BYTES) and row, unless reported before."""
        if blob in self.listed:
            return
        self.listed.add(blob)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        row = {"blob": blob, "path": escaped(path)[:300], "reason": reason}
        self.ids.add(_record_id(row))
        if data is not None and self.used + len(data) + 1024 <= QUARANTINE_MAX_BYTES:
            write_atomic(self.folder / f"{blob}.bad", data)
            self.used += len(data)
        elif data is not None:
            row["reason"] += "; bytes not kept (the quarantine is full)"
        line = json.dumps(row) + "\n"
        if self.used + len(line) <= QUARANTINE_MAX_BYTES:
            try:  # never appended through a link planted at the index
                fd = os.open(self.folder / "index.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            except OSError:
                pass  # the row still reaches the job's report; the next sync tries again
            else:
                with os.fdopen(fd, "a", encoding="utf-8") as handle:
                    handle.write(line)
                self.used += len(line)
        rows.append(row)


def _record_id(row: dict[str, str]) -> str:
    """The record id a quarantine row's path names, or ""."""
    named = admission.record_path(row["path"])
    return named[0] if named is not None else ""
