"""Every field the durable memory tier keeps, and the small reads on them: `tier.MemoryTier` adds the changes
and `recovery` fills the fields at start, so neither imports the other. Import contract: core and the tier's
records, parse_cache, index, live, semantic, shortids, staleness."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity import idents
from memoryd.daemon.memories import parse_cache as memory_cache
from memoryd.daemon.memories.index import LiveIndex, TombIndex, project_scope_name
from memoryd.daemon.memories.live import LiveMemories
from memoryd.daemon.memories.records import Memory, PendingWrite
from memoryd.daemon.memories.semantic import Semantic
from memoryd.daemon.memories.shortids import ShortIds
from memoryd.daemon.memories.staleness import GitProbe


class TierState:

    def __init__(self, core: Core) -> None:
        self.core = core
        self.live_dir = core.root / "memories"
        self.tomb_dir = core.root / "tombstones"
        self.snapshot_path = core.root / "state" / "pending.json"
        self.cache_path = core.root / "state" / memory_cache.CACHE_NAME
        self.index_path = core.root / "state" / memory_cache.INDEX_NAME
        self.index_restored = False                 # start-up used the search index snapshot
        self.file_sha: dict[str, str] = {}          # id -> sha256 of its file, where not the logged one
        self.file_stat: dict[str, tuple[int, int]] = {}  # memory id -> (size, mtime_ns) when written
        self._unstatted: set[str] = set()           # written this pass: stat them once renamed
        self.cache_stale = False                    # a record file changed since the cache was written
        self.unverified: list[str] = []             # loaded from the cache, file not yet compared
        self.cache_gen: str | None = None           # the parse cache's gen when it lists exactly these
        self.trusted_gen: str | None = None         # the gen the restored checkpoint vouches for
        self.unlisted: list[str] = []               # "m" / "t": folders still to list after start
        self.listing: Any = None                    # the open scandir of the folder being listed
        self.found_late: list[str] = []             # files the after-start check parsed
        self.dropped_late = 0                       # cache-loaded records whose file was gone
        self.helper: Any = None                     # the prefetch helper (recovery.prefetch), while it runs
        self.save_after_start: Callable[[], None] | None = None
        self.loaded = False                         # replay is over: events now are live ones
        self.live: LiveMemories = LiveMemories(self.project_of)
        self.tombstones: dict[str, Memory] = {}
        self.short_ids = ShortIds(self.live, self.tombstones)
        self.index = LiveIndex()
        self.semantic = Semantic(core.root / "state" / "vectors.bin", core.files.write_file)
        self.index.semantic = self.semantic
        self.tomb_index = TombIndex()
        self.pending: dict[str, PendingWrite] = {}
        self.expired: dict[str, str] = {}          # expired pending id -> owner session
        self.probe = GitProbe(str(core.root))  # git never runs inside the store (the sync clone)
        # Derived from the event log as it is appended (and replayed at start):
        self.logged_sha: dict[str, str] = {}       # memory id -> sha256 of the last file logged
        self.logged_state: dict[str, str] = {}     # memory id -> "live" | "tomb"
        self.retrievals: Counter[str] = Counter()
        self.pending_seq = 0
        self.pending_logged: set[str] = set()
        self.pending_resolved: set[str] = set()
        self.pending_expired_total = 0
        self.reaper_last_run: str | None = None
        self.episodes_pruned = 0
        # Found at start (memory_health reports them):
        self.bad_files: list[dict[str, str]] = []
        self.hand_edited: list[str] = []
        self.unaccounted: list[str] = []
        self.missing: list[str] = []

    def text_of(self, memory_id: str) -> str | None:
        memory = self.live.get(memory_id) or self.tombstones.get(memory_id)
        return memory.content if memory is not None else None

    def counts(self) -> dict[str, int]:
        return {"memories": len(self.live), "tombstones": len(self.tombstones), "pending": len(self.pending)}

    def project_of(self, memory: Memory) -> str | None:
        """Its first `projects:<x>` scope (what the writer said), else the project it was written from."""
        name = next(filter(None, map(project_scope_name, memory.scopes)), None)
        project = memory.origin.get("project")
        return name or (project if isinstance(project, str) and project else None)

    def tables(self, kind: str) -> tuple[LiveIndex | TombIndex, dict[str, Memory]]:
        """The index and records of live memories (`kind` m) or of tombstones (t)."""
        return (self.index, self.live) if kind == "m" else (self.tomb_index, self.tombstones)

    def path(self, kind: str, memory_id: str) -> Path:
        assert idents.is_ulid(memory_id)  # ids reach paths only after validation or minting
        return (self.live_dir if kind == "m" else self.tomb_dir) / f"{memory_id}.md"

    def live_path(self, memory_id: str) -> Path:
        return self.path("m", memory_id)

    def tomb_path(self, memory_id: str) -> Path:
        return self.path("t", memory_id)

    def sha_on_disk(self, memory_id: str) -> str | None:
        """The sha256 of the record's file as it is now (hand edits included)."""
        return self.file_sha.get(memory_id) or self.logged_sha.get(memory_id)
