"""Receipts: what each automatic injection put in front of an agent, logged as one `inject` event and
counted against the session's budget (docs/search.md, 'Receipts'). The readers scan the log's files:
operator views, not hot paths. Import contract: core, identity, logcheck, memories (short ids)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from memoryd.daemon.core import Core
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.session_table import Session
from memoryd.daemon.memories.shortids import is_short_id
from memoryd.daemon.storage import logcheck
from memoryd.daemon.storage.clock import iso
from memoryd.daemon.storage.events import SHOW
from memoryd.errors import InvalidParams

HOOKS = ("session-start", "prompt", "pre-tool", "news")
TIERS = ("full", "pointer", "listed", "news")
MAX_ITEMS = 40
MAX_RECEIPTS = 500            # per session: a runaway client cannot grow the log without bound
MAX_CHARS = 100_000
STATS_DAYS = 7


def record(core: Core, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Log one injection's receipt and count its characters against the session."""
    hook, items, chars = args.get("hook"), args.get("items"), args.get("chars")
    if hook not in HOOKS:
        raise InvalidParams("hook", f"must be one of {', '.join(HOOKS)}")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise InvalidParams("items", f"must be a list of at most {MAX_ITEMS} {{id, tier}}")
    if not isinstance(chars, int) or isinstance(chars, bool) or not 0 <= chars <= MAX_CHARS:
        raise InvalidParams("chars", f"must be an integer 0-{MAX_CHARS}")
    session.auto_chars += chars
    recorded = session.receipts < MAX_RECEIPTS
    if recorded:
        ids, tiers = _known(core, items)
        session.receipts += 1
        core.record("inject", session, hook=hook, injected=ids, tiers=tiers, chars=chars)
    return {"recorded": recorded, "auto_chars": session.auto_chars}


def _known(core: Core, items: list[Any]) -> tuple[list[str], list[str]]:
    """The memories named (whole or short ids), with their tiers; any other id is left out."""
    tier = core.memories
    known: dict[str, str] = {}  # id -> its tier, as first named
    for item in items:
        if not isinstance(item, dict) or item.get("tier") not in TIERS or not isinstance(item.get("id"), str):
            continue
        named = item["id"]
        if is_short_id(named):
            found = tier.short_ids.resolve(named)
            named = found[0] if len(found) == 1 else ""
        if idents.is_ulid(named) and (named in tier.live or named in tier.tombstones):
            known.setdefault(named, item["tier"])
    return list(known), list(known.values())


def budget_left(core: Core, session: Session) -> int:
    return max(0, core.config.hook_session_chars - session.auto_chars)


def _events(core: Core, kinds: tuple[str, ...], since: str | None = None) -> Iterator[dict[str, Any]]:
    core.log.flush()  # reads' events wait for the next fsync (domain.READ_EVENTS_SYNC_S): hand them to the file
    needles = tuple(f'"kind":"{k}"' for k in kinds)
    for segment in logcheck.segments(core.root / "events"):
        with open(segment, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not any(n in line for n in needles):
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("kind") in kinds and (since is None or event["ts"] >= since):
                    yield event


def _pairs(event: dict[str, Any]) -> zip[tuple[Any, Any]]:
    """An `inject` event's (memory id, tier) pairs."""
    return zip(event.get("injected") or [], event.get("tiers") or [])


def session_injections(core: Core, session_id: str) -> dict[str, Any]:
    rows = [{"ts": e.get("ts"), "hook": e.get("hook"), "chars": e.get("chars", 0),
             "items": [{"id": i, "tier": t} for i, t in _pairs(e)]}
            for e in _events(core, ("inject",)) if e.get("session") == session_id]
    return {"session_id": session_id, "injections": rows, "chars": sum(r["chars"] for r in rows)}


def _tally(events: Iterator[dict[str, Any]], only: str | None = None) -> dict[str, Counter[Any]]:
    """Per session: injections, chars; per memory: injections, pointers, pointers opened (`only`: its own)."""
    tally: dict[str, Counter[Any]] = {k: Counter() for k in ("sessions", "chars", "injected", "pointed", "opened")}
    for event in events:
        if event["kind"] == SHOW:
            if event.get("pointed"):
                tally["opened"][str(event.get("memory_id"))] += 1
            continue
        pairs = [(named, tier) for named, tier in _pairs(event) if only in (None, named)]
        if only is not None and not pairs:
            continue
        tally["sessions"][str(event.get("session"))] += 1
        tally["chars"][str(event.get("session"))] += int(event.get("chars") or 0)
        for named, tier in pairs:
            tally["injected"][named] += 1
            tally["pointed"][named] += tier == "pointer"
    return tally


def delivery(core: Core, memory_id: str) -> dict[str, Any]:
    """How often `memory_id` was injected, in how many sessions, and how often its pointer was opened."""
    tally = _tally(_events(core, ("inject", SHOW)), memory_id)
    return {"injected": tally["injected"][memory_id], "sessions": len(tally["sessions"]),
            "pointed": tally["pointed"][memory_id], "pointer_opened": tally["opened"][memory_id]}


def stats(core: Core, days: int = STATS_DAYS) -> dict[str, Any]:
    """The last `days` days of automatic injection: per-session rates, pointer open rate, top and unopened ids."""
    since = iso(time.time() - days * 86400)
    tally = _tally(_events(core, ("inject", SHOW), since))
    per_session, pointed, opened = tally["sessions"], tally["pointed"], tally["opened"]
    sessions = len(per_session) or 1
    return {
        "days": days, "since": since, "sessions": len(per_session), "injections": per_session.total(),
        "injections_per_session": round(per_session.total() / sessions, 2),
        "chars_per_session": round(tally["chars"].total() / sessions), "pointers": pointed.total(),
        "pointers_opened": opened.total(),
        "pointer_open_rate": round(opened.total() / max(1, pointed.total()), 3),
        "most_injected": [{"id": i, "times": n} for i, n in tally["injected"].most_common(10)],
        "never_opened": [i for i, n in pointed.most_common() if n and not opened[i]][:10],
    }
