"""The names of the tools that code outside the daemon calls — the CLI, the hooks, the web view,
the bridge's resources, the bench and the eval — each written once. The tools' declarations
(`daemon/<tier>/tools.py`) and the event kinds named after them use these too, so renaming a tool
is one edit here and a misspelt call fails at import and under mypy, not as an unknown-tool reply.
A tool only the agent calls keeps its name in its declaration alone.

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
