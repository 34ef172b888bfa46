"""What sibling sessions committed since a client session's last hook (docs/architecture.md, 'Live
awareness between concurrent agents'). Import contract: core, identity, memories — no file reads."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memoryd import names
from memoryd.daemon.core import Core
from memoryd.daemon.identity.scopes import is_hidden, under
from memoryd.daemon.identity.session_table import Session, is_operator_client
from memoryd.daemon.memories.reads import shown_by_default_search
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.storage.events import WRITE, WRITE_CONFIRM

RING_SIZE = 512        # recent commits kept; a hook shows at most NEWS_MAX of them anyway
MAX_CURSORS = 4096     # client sessions whose cursor is kept
NEWS_MAX = 3
TEXT_CHARS = 300       # of each item's text: the hook's 800-char section holds three lines
HANDOFF = "handoff"    # finish handoffs are continuity (the session-start hook's), not news


@dataclass(frozen=True, slots=True)
class Commit:
    seq: int
    ts: str
    kind: str        # "memory" | "takeaway"
    record_id: str
    session_id: str


class News:
    """The ring of recent commits and each client session's cursor into it."""

    def __init__(self) -> None:
        self.ring: deque[Commit] = deque(maxlen=RING_SIZE)
        self.cursors: OrderedDict[str, int] = OrderedDict()

    def observe(self, event: dict[str, Any]) -> None:
        """`Core.record`'s listener: note a commit another session may want to hear about."""
        kind, session = event["kind"], event.get("session")
        if not session:
            return
        if kind in (WRITE, WRITE_CONFIRM) and event.get("status") == "committed" and event.get("gate") != HANDOFF:
            self.ring.append(Commit(event["seq"], event["ts"], "memory", event["memory_id"], session))
        elif kind == names.EPISODE_WRITE:
            self.ring.append(Commit(event["seq"], event["ts"], "takeaway", event["episode_id"], session))

    def take(self, core: Core, caller: Session, identity: dict[str, Any], mark: bool = True,
             exclude: Iterable[str] = ()) -> dict[str, Any]:
        """Sibling items committed after the caller's cursor, newest first: at most NEWS_MAX, none shown before or
        in `exclude`, no text twice; `more` counts the rest. `mark`: the cursor moves to now, the items are shown."""
        key = identity.get("client_session") or caller.id
        cursor = self.cursors.get(key)
        if cursor is not None:  # a failed commit rolled the log back below it: those seqs come again
            cursor = min(cursor, core.log.seq)
        fresh = [c for c in self.ring if (c.seq > cursor if cursor is not None else c.ts >= caller.started_at)]
        visible = shown_by_default_search(caller, identity)
        items = list(_unique(filter(None, (_item(core, c, caller, identity, visible) for c in reversed(fresh))),
                             {*caller.injected, *exclude}))
        shown = items[:NEWS_MAX]
        if mark:
            self.cursors[key] = core.log.seq
            self.cursors.move_to_end(key)
            while len(self.cursors) > MAX_CURSORS:
                self.cursors.popitem(last=False)
            caller.injected = {*caller.injected, *(i["id"] for i in shown)}
        return {"news": shown, "more": len(items) - len(shown)}


def _unique(items: Iterable[dict[str, Any]], seen_ids: Iterable[str]) -> Iterable[dict[str, Any]]:
    """Items whose id was not shown and whose text did not come up already (two agents, one fact)."""
    ids, texts = set(seen_ids), set()
    for item in items:
        text = " ".join(item["text"].split()).lower()
        if item["id"] not in ids and text not in texts:
            ids.add(item["id"])
            texts.add(text)
            yield item


def _item(core: Core, commit: Commit, caller: Session, identity: dict[str, Any],
          visible: Callable[[Memory], bool]) -> dict[str, Any] | None:
    """What the caller may hear of `commit`, or None (its own, not a sibling's, gone or hidden)."""
    facts = _facts(core, commit, visible)
    writer = core.sessions.get(facts["writer"]) if facts is not None else None
    if facts is None or writer is None or writer.id == caller.id or is_operator_client(writer.client):
        return None
    if writer.client_session and writer.client_session == caller.client_session:
        return None  # the caller's own, from an earlier bracket of the same client session
    repo = facts["repo"] if commit.kind == "memory" else writer.repo
    sibling = repo == caller.repo and (caller.repo is not None or _same(facts["worktree"], caller.worktree)
                                       or _same(facts["swarm"], identity.get("swarm_id")))
    if not (sibling or facts["user_wide"]) or is_hidden(facts["scopes"], caller.disabled_scopes):
        return None
    text = " ".join(facts["text"][:TEXT_CHARS * 4].split())  # (a cut before the split: contents run to MBs)
    return {"id": commit.record_id, "kind": facts["label"], "session": writer.id, "ts": commit.ts,
            "text": text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1].rstrip() + "…",
            "user_wide": facts["user_wide"] and repo != caller.repo, "tainted": facts["tainted"]}


def _facts(core: Core, commit: Commit, visible: Callable[[Memory], bool]) -> dict[str, Any] | None:
    """The record behind `commit`; None when it is gone, a handoff, or a memory not `visible`."""
    if commit.kind == "memory":
        memory = core.memories.live.get(commit.record_id) if core.memories is not None else None
        if memory is None or memory.category == HANDOFF or not visible(memory):
            return None
        return {"writer": memory.session_id or commit.session_id,  # an operator's confirm: the stager
                "scopes": memory.scopes, "text": memory.content, "label": memory.category, "repo": memory.repo,
                "worktree": memory.origin.get("worktree"), "swarm": None, "tainted": memory.tainted,
                "user_wide": not any(under(s, "projects") for s in memory.scopes)}
    episode = core.journal.by_id.get(commit.record_id)
    if episode is None or not episode.takeaway:
        return None
    return {"writer": commit.session_id, "scopes": episode.scopes, "text": episode.takeaway, "label": "takeaway",
            "repo": None, "worktree": episode.worktree, "swarm": episode.swarm_id, "tainted": False,
            "user_wide": False}


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and a == b
