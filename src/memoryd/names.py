"""The names of the tools that code outside the daemon calls, each written once, so a misspelt call
fails under mypy, not as an unknown-tool reply (docs/architecture.md, "Where to change what").

Import contract: nothing (every hook process imports it).
"""

EPISODE_WRITE = "episode_write"
EPISODE_SEARCH = "episode_search"
EPISODE_HANDOFF = "episode_handoff"
EPISODE_PROMOTE = "episode_promote"
MEMORY_WRITE = "memory_write"
MEMORY_WRITE_CONFIRM = "memory_write_confirm"
MEMORY_WRITE_CANCEL = "memory_write_cancel"
MEMORY_SEARCH = "memory_search"
MEMORY_SHOW = "memory_show"
MEMORY_LIST = "memory_list"
MEMORY_UPDATE = "memory_update"
MEMORY_REMOVE = "memory_remove"
MEMORY_RESTORE = "memory_restore"
MEMORY_LIST_TOMBSTONES = "memory_list_tombstones"
MEMORY_VERIFY = "memory_verify"
MEMORY_HEALTH = "memory_health"
MEMORY_DIGEST = "memory_digest"
MEMORY_SESSION_FINISH = "memory_session_finish"
