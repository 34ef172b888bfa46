"""A small store for the web view's tests: memories (one holding `<script>`), a link, a pending
write, finished sessions with handoffs and episodes — all written through the daemon's wire."""

from __future__ import annotations

from typing import Any

from memoryd.client.connection import Connection

SCRIPT_TEXT = "<script>window.__pwned = 1; document.title = 'pwned'</script> renders as text"


class Agent:
    def __init__(self, endpoint: str, worktree: str, project: str = "web") -> None:
        self.conn = Connection({"client": "agent/1", "worktree": worktree, "project": project},
                               endpoint=endpoint, autospawn=False)
        self.conn.connect()

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.conn.call("call", {"tool": tool, "arguments": arguments})  # type: ignore[no-any-return]


def seed(endpoint: str, worktree: str = "/w/web") -> dict[str, Any]:
    """Write the store; returns the ids the tests look for."""
    first = Agent(endpoint, worktree)
    deploy = first.call("memory_write", content="Deploys go through the staging cluster first.",
                        scopes=["projects:web"])["id"]
    replica = first.call("memory_write", content="Staging has its own database replica for load tests.",
                         scopes=["projects:web"], links=[{"type": "extends", "target_id": deploy}])["id"]
    script = first.call("memory_write", content=SCRIPT_TEXT, scopes=["projects:web"], force=True)["id"]
    first.call("episode_write", body="wrote the deploy notes", takeaway="deploy notes drafted")
    first.call("memory_session_finish", session_id=first.conn.session_id, summary="deploy notes",
               handoff="Next: <b>finish</b> the rollback section of the deploy notes.")
    first.conn.close()
    second = Agent(endpoint, worktree)
    pending = second.call("memory_write", content="The user prefers small pull requests.", scopes=["user"],
                          category="user-inference")["pending_id"]
    return {"deploy": deploy, "replica": replica, "script": script, "pending": pending,
            "first_session": first.conn.session_id, "second": second}
