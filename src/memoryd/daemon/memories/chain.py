"""memory_write's gate chain (docs/tools.md): gates 1–6 in order (`GATES`), the first that fires decides;
a gate reads the tier only through `TierView`. Import contract: gates, records, scopes, text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Protocol

from memoryd.daemon.identity.scopes import unique
from memoryd.daemon.memories import gates
from memoryd.daemon.memories.records import Memory
from memoryd.daemon.search import text

SNIPPET_CHARS = 160
MAX_MATCHES = 5
MAX_RELATED = 5
FLAGS = ("acknowledge_credential", "acknowledge_transient", "acknowledge_scope_mismatch",
         "acknowledge_ungrounded", "force", "groundedness_check")


class TierView(Protocol):
    """What the gates need from the memory tier (a protocol so unit tests can fake it)."""

    @property
    def live(self) -> Mapping[str, Memory]: ...
    tombstones: dict[str, Memory]

    def known_projects(self) -> dict[str, str | None]: ...
    def similar_live(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]: ...
    def similar_removed(self, tokens: frozenset[str], threshold: float) -> list[tuple[str, float]]: ...


@dataclass
class Draft:
    """A proposed memory plus the caller's overrides; survives a restart inside a pending write."""

    content: str
    scopes: list[str]
    category: str = "fact"
    confidence: str = "medium"
    source: str = "explicit-statement"
    links: list[dict[str, str]] = field(default_factory=list)
    flags: dict[str, bool] = field(default_factory=dict)
    transcript: str | None = None
    duplicate_at: float = 0.75
    related_at: float = 0.40
    pinned: bool = False

    def __post_init__(self) -> None:
        self._similar: list[tuple[str, float]] | None = None

    @cached_property
    def terms(self) -> list[str]:
        """The content's index terms (`text.analyze`): analyzed once for dedup and the index."""
        return text.analyze(self.content)

    @cached_property
    def tokens(self) -> frozenset[str]:
        return frozenset(self.terms)

    def similar(self, tier: TierView) -> list[tuple[str, float]]:
        """Live memories at least `related_at` similar, best first (computed once per draft)."""
        if self._similar is None:
            self._similar = tier.similar_live(self.tokens, self.related_at)
        return self._similar

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def overrides(self) -> list[str]:
        return [name for name in FLAGS if self.flags.get(name)]


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def check_credential(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    return {"markers": markers} if (markers := gates.find_credentials(draft.content)) else None


def check_durability(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    return {"markers": markers} if (markers := gates.find_transient_markers(draft.content)) else None


def check_scope_mismatch(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    if not (matches := gates.find_scope_mismatches(draft.content, draft.scopes, tier.known_projects())):
        return None
    return {"matches": matches, "suggested_scopes": unique(m["suggested_scope"] for m in matches)}


def check_groundedness(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    if not draft.flags.get("groundedness_check") or draft.transcript is None:
        return None
    return {"claims": claims} if (claims := gates.find_ungrounded_claims(draft.content, draft.transcript)) else None


def check_duplicate(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    if not (dups := [(i, s) for i, s in draft.similar(tier) if s >= draft.duplicate_at][:MAX_MATCHES]):
        return None
    return {"matches": [{"id": i, "similarity": s, "snippet": snippet(tier.live[i].content)} for i, s in dups],
            "framing": "data"}


def check_previously_removed(tier: TierView, draft: Draft) -> dict[str, Any] | None:
    if not (found := tier.similar_removed(draft.tokens, draft.duplicate_at)[:MAX_MATCHES]):
        return None
    return {"removed_matches": [{"id": i, "similarity": s, "removed_reason": tier.tombstones[i].removed_reason}
                                for i, s in found], "framing": "data"}


@dataclass(frozen=True)
class Gate:
    kind: str                 # what the event log records
    status: str               # the result's status
    override: str             # the flag that skips this gate
    check: Callable[[TierView, Draft], dict[str, Any] | None]
    hint: str


GATES: tuple[Gate, ...] = (
    Gate("credential", "credential_warning", "acknowledge_credential", check_credential,
         "The content looks like it holds a secret (redacted in markers). Remove it and write again; if it is not a "
         "secret, pass acknowledge_credential=true."),
    Gate("durability", "transient_warning", "acknowledge_transient", check_durability,
         "This phrasing will not hold in a week. Rephrase it durably, put run state in episode_write, or pass "
         "acknowledge_transient=true."),
    Gate("scope_mismatch", "scope_mismatch", "acknowledge_scope_mismatch", check_scope_mismatch,
         "The content names another project. Add suggested_scopes, or pass acknowledge_scope_mismatch=true."),
    Gate("groundedness", "ungrounded", "acknowledge_ungrounded", check_groundedness,
         "These claims share little with source_transcript. Ground or drop them, or pass acknowledge_ungrounded=true."),
    Gate("duplicate", "duplicate", "force", check_duplicate,
         "A live memory says nearly the same: memory_update it instead, or pass force=true to keep both."),
    Gate("previously_removed", "previously_removed", "force", check_previously_removed,
         "A removed memory says nearly the same: memory_restore it, or pass force=true to write anew."),
)


def run_gates(tier: TierView, draft: Draft, chain: Sequence[Gate] = GATES) -> tuple[Gate, dict[str, Any]] | None:
    """The first gate of `chain` that fires and is not overridden, with its result; None = pass."""
    for gate in chain:
        if not draft.flags.get(gate.override) and (evidence := gate.check(tier, draft)) is not None:
            return gate, {"status": gate.status, **evidence, "hint": gate.hint}
    return None


def related(tier: TierView, draft: Draft) -> list[dict[str, Any]]:
    """Memories in the related band (dedup_related ≤ similarity < dedup_duplicate) for a commit."""
    rows = [(i, s) for i, s in draft.similar(tier) if s < draft.duplicate_at and i in tier.live]
    return [{"id": i, "similarity": s, "first_line": tier.live[i].first_line} for i, s in rows[:MAX_RELATED]]
