"""Sync of the durable tier through a git remote (docs/sync.md).

Layer: assembly, beside `admin` and `reaper` (it reads and changes the memory tier, and is
imported by `admin`, `reaper` and `lifecycle`). Modules, bottom up:

    git        runs git in a child process with the daemon's own identity; classifies failures
    merge      the pure merge rule: which of two versions of a record wins
    admission  the checks a pulled file must pass before the live store takes it
    worker     one sync on the clone, in a thread: export, fetch, merge by record, push
    service    the loop's side: start a job, admit its result with group commit, events, status
"""
