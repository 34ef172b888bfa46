"""Which requests the log already holds, so that a write resent after a lost reply or a restart is
answered from what it did (its `Tool.replay`) instead of running twice: each logged event that
carries a request key (`<conn>:<request id>`) leaves what a replayer reads, the newest
MAX_APPLIED_REQS of them. A start from the checkpoint keeps the older keys packed (`cold_reqs`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("memoryd.daemon")

MAX_APPLIED_REQS = 50_000
REPLAYED_FIELDS = ("kind", "status", "outcome", "memory_id", "pending_id", "episode_id")


class Retries:
    def __init__(self, cold_reqs: Callable[[], OrderedDict[str, Sequence[Any]]] | None = None,
                 cold_conns: frozenset[str] = frozenset()) -> None:
        self.applied_reqs: OrderedDict[str, Sequence[Any]] = OrderedDict()  # req -> REPLAYED_FIELDS values
        # Older request keys a checkpoint restored, still packed (a thunk that decodes them), and
        # the connections they belong to: decoded only when one of those connections calls again
        # (a bridge resending across the restart), or at the next checkpoint (`thaw`).
        self.cold_reqs = cold_reqs
        self.cold_conns = cold_conns

    def note(self, event: dict[str, Any]) -> None:
        """Keep what the event of request `event["req"]` says, as far as a retry's replayer reads it."""
        self.applied_reqs[event["req"]] = tuple(map(event.get, REPLAYED_FIELDS))  # not a dict: 50k of them
        if len(self.applied_reqs) > MAX_APPLIED_REQS:
            self.applied_reqs.popitem(last=False)

    def applied(self, req: str) -> dict[str, Any] | None:
        """What the logged event of request `req` said, as far as a retry's replayer reads it."""
        values = self.applied_reqs.get(req)
        if values is None and self.cold_reqs is not None and req.partition(":")[0] in self.cold_conns:
            self.thaw()
            values = self.applied_reqs.get(req)
        return None if values is None else {k: v for k, v in zip(REPLAYED_FIELDS, values) if v is not None}

    def thaw(self) -> None:
        """Decode the checkpoint's request keys into `applied_reqs`, before the newer ones. Keys
        that do not decode are dropped with a warning: a retry from before the restart would
        then run again, as it would with no checkpoint holding it."""
        thunk, self.cold_reqs, self.cold_conns = self.cold_reqs, None, frozenset()
        if thunk is None:
            return
        try:
            older = thunk()
        except (TypeError, ValueError) as exc:
            log.warning("the checkpoint's request keys do not decode (%s); dropped", exc)
            return
        older.update(self.applied_reqs)
        while len(older) > MAX_APPLIED_REQS:
            older.popitem(last=False)
        self.applied_reqs = older
