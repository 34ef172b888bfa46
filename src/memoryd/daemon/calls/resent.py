"""The requests the log holds, so a write resent after a restart is answered, not run twice."""

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
        self.cold_reqs = cold_reqs  # a checkpoint's keys, still packed, decoded when one of `cold_conns` calls again
        self.cold_conns = cold_conns

    def note(self, event: dict[str, Any]) -> None:
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
        """Decode the checkpoint's request keys before the newer ones (dropped if they do not decode)."""
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
