"""Sync of the durable tier through a git remote (docs/sync.md; its modules: the opening there).

Layer: assembly, beside `admin` and `reaper` (it reads and changes the memory tier, and is
imported by `admin`, `reaper` and `lifecycle`)."""
