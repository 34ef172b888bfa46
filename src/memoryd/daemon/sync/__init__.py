"""Sync of the durable tier through a git remote (docs/sync.md).

Layer: assembly, beside `admin` and `reaper` (it reads and changes the memory tier, and is
imported by `admin`, `reaper` and `lifecycle`). Modules, bottom up:

    layout     the sync folder, record states and folder names: all a daemon start needs
    git        the one git backend: named operations in a child process, the daemon's identity
    merge      the pure merge rule: which of two versions of a record wins
    admission  the checks a pulled file must pass before the live store takes it
    clone      the files a job writes: the clone's working tree (records only) and the quarantine
    job        what a job is: the loop's snapshot in, the result out
    worker     one job's steps, in a thread: repair, export, fetch, merge by record, push, scan
    service    the loop's side: start a job, admit its result with group commit, events, status
    actions    the operator's verbs (`memoryd sync …`): set up, sync, status, show, resolve
"""
