"""`memoryd import FORMAT PATH`: each draft the importers parse becomes one `memory_write` on the daemon,
through every gate (docs/import.md). Exit codes: 0 the import ran (gate refusals are in its report);
1 some writes failed; 2 usage or unreadable input (nothing written); 3 the daemon is not running."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memoryd import names
from memoryd.cli.memories import OK, REFUSED, UNAVAILABLE, USAGE, one_line
from memoryd.cli.output import emit
from memoryd.errors import MemorydError
from memoryd.importers import FORMATS, Draft, Skipped, read

CLIENT = "memoryd-import"
SHOWN_PER_REASON = 5
PLAN_ITEMS = 5
BAR_WIDTH = 30
ACKNOWLEDGE = {"transient": "acknowledge_transient", "scope-mismatch": "acknowledge_scope_mismatch"}
DUPLICATE_STATUSES = ("duplicate", "previously_removed")
OUTCOMES = ("committed", "removed", "duplicate", "pending", "refused", "failed")


@dataclass
class Outcome:
    bucket: str  # one of OUTCOMES
    reason: str  # the gate's status, or the error
    draft: Draft
    memory_id: str | None = None
    pending_id: str | None = None


@dataclass
class Summary:
    fmt: str
    path: str
    outcomes: list[Outcome] = field(default_factory=list)
    stopped: str | None = None  # why the import ended early (the daemon went away)
    skipped: Skipped = field(default_factory=list)  # links the parser did not follow

    def counts(self) -> dict[str, int]:
        found = Counter(o.bucket for o in self.outcomes)
        return {bucket: found.get(bucket, 0) for bucket in OUTCOMES}

    def reasons(self) -> list[dict[str, Any]]:
        """Outcomes other than a plain commit, grouped by (bucket, reason), the first few named."""
        groups: dict[tuple[str, str], list[Outcome]] = {}
        for outcome in self.outcomes:
            if outcome.bucket != "committed":
                groups.setdefault((outcome.bucket, outcome.reason), []).append(outcome)
        return [{"outcome": bucket, "reason": reason, "count": len(items),
                 "items": [_item(o) for o in items[:SHOWN_PER_REASON]]}
                for (bucket, reason), items in groups.items()]

    def as_json(self) -> dict[str, Any]:
        return {"format": self.fmt, "path": self.path, "total": len(self.outcomes), "counts": self.counts(),
                "reasons": self.reasons(), "stopped": self.stopped, "skipped": _skipped_json(self.skipped),
                "committed_ids": [o.memory_id for o in self.outcomes if o.bucket == "committed"],
                "pending": [_item(o) for o in self.outcomes if o.bucket == "pending"]}


def _item(outcome: Outcome) -> dict[str, Any]:
    ids = {"id": outcome.memory_id, "pending_id": outcome.pending_id}
    return {"origin": outcome.draft.origin, "title": shown_title(outcome.draft, outcome.reason == "credential_warning"),
            **{key: value for key, value in ids.items() if value}}


def shown_title(draft: Draft, secret_found: bool = False) -> str:
    """The draft's title with every secret masked (the whole text, before a cut could split one);
    none at all when the daemon found a secret (`secret_found`) this scan does not."""
    from memoryd.daemon.memories.gates import redact_credentials

    masked = redact_credentials(draft.content)
    if secret_found and masked == draft.content:
        return "[text withheld: it holds a secret]"
    return replace(draft, content=masked).title


def _skipped_json(skipped: Skipped) -> list[dict[str, str]]:
    return [{"path": path, "reason": reason} for path, reason in skipped]


def _skipped_lines(skipped: Skipped) -> list[str]:
    shown = [f"skipped: {path}: {reason}" for path, reason in skipped[:SHOWN_PER_REASON]]
    return shown + _more(len(skipped), len(shown), " skipped")


def _more(total: int, shown: int, what: str = "") -> list[str]:
    return [f"  … and {total - shown} more{what}"] if total > shown else []


def main(ns: argparse.Namespace) -> int:
    skipped: Skipped = []
    if not ns.path and ns.format == "claude-code":  # every project's memory folder
        from memoryd.importers import claude_code

        ns.path = claude_code.default_root()
    if not ns.path:
        print(f"memoryd import: {ns.format} needs a PATH ({FORMATS[ns.format][1]})", file=sys.stderr)
        return USAGE
    try:
        drafts = read(ns.format, ns.path, ns.scope or project_scope(ns), skipped)
    except MemorydError as exc:
        print(f"memoryd import: {exc.message}", file=sys.stderr)
        return USAGE
    if ns.dry_run:
        emit(ns.json, plan(ns.format, str(ns.path), drafts, skipped), lambda shown: _plan_lines(shown, skipped))
        return OK
    summary = Summary(ns.format, str(ns.path), skipped=skipped)
    code = _run(ns, drafts, summary)
    if summary.stopped:
        print(f"memoryd import: {'stopped early: ' if summary.outcomes else ''}{summary.stopped}", file=sys.stderr)
        if not summary.outcomes:
            return code  # nothing was written: the one line says it all
    emit(ns.json, summary.as_json() if ns.json else summary, _summary_lines)
    return code


def project_scope(ns: argparse.Namespace) -> list[str]:
    """`projects:<project>` for markdown notes inside a git worktree (about that repo, and the
    scope-mismatch gate would stop every note naming it); else none."""
    from memoryd import identity

    if ns.format != "markdown":
        return []
    target = Path(ns.path).resolve()
    folder = target if target.is_dir() else target.parent
    project = identity.capture(str(folder)).get("project") if folder.is_dir() else None
    if not project:
        return []
    print(f"memoryd import: adding scope projects:{project} (the notes are in that repository; "
          "--scope sets the scopes instead)", file=sys.stderr)
    return [f"projects:{project}"]


def _run(ns: argparse.Namespace, drafts: list[Draft], summary: Summary) -> int:
    from memoryd.cli.memories import start_daemon
    from memoryd.client.connection import Operator, is_unavailable

    operator = Operator(CLIENT)
    progress = Progress(len(drafts), sys.stderr)
    try:
        start_daemon()
        waiting = already_pending(operator)
        for draft in drafts:
            summary.outcomes.append(import_one(operator, draft, ns, waiting.get(draft.content.strip())))
            progress.step(summary.counts())
    except MemorydError as exc:  # per-draft errors are outcomes; this is the connection itself
        if not is_unavailable(exc):
            summary.stopped = exc.message
            return REFUSED
        summary.stopped = f"the daemon is not running and could not be started ({exc.message}); memoryd doctor says why"
        return UNAVAILABLE
    finally:
        progress.done()
        operator.close()
    return REFUSED if summary.counts()["failed"] else OK


def already_pending(operator: Any) -> dict[str, str]:
    """Content → pending id of the unexpired pending writes (the duplicate gate sees only live memories)."""
    held = operator.admin("pending").get("pending") or []
    return {str(p["content"]).strip(): p["pending_id"] for p in held if p.get("content") and not p.get("expired")}


def import_one(operator: Any, draft: Draft, ns: argparse.Namespace, held: str | None = None) -> Outcome:
    """memory_write one draft, then verify, remove or confirm; `held`: the pending id an earlier run
    left for the same content. A tool error is the outcome `failed`; DaemonUnavailable propagates."""
    from memoryd.client.connection import is_unavailable

    if held and not ns.confirm_pending:
        return Outcome("pending", "already pending from an earlier import", draft, pending_id=held)
    overrides = {ACKNOWLEDGE[kind]: True for kind in ns.acknowledge or []}
    try:
        result: dict[str, Any] = {"status": "pending", "pending_id": held} if held else operator.tool(
            names.MEMORY_WRITE, content=draft.content, scopes=list(draft.scopes), category=draft.category,
            confidence=draft.confidence, source=draft.source, **overrides)
        if result.get("status") == "pending" and ns.confirm_pending and not draft.removed_reason:
            result = operator.admin("resolve", pending_id=result["pending_id"], decision="confirm")
        status = str(result.get("status"))
        if status == "committed":
            return _carry_over(operator, draft, result["id"])
        if status == "pending" and draft.removed_reason:  # a claim removed in the source tool: cancelled
            operator.tool(names.MEMORY_WRITE_CANCEL, pending_id=result["pending_id"])
            return Outcome("refused", "removed in the source tool and needs a confirmation: skipped", draft)
        if status == "pending":
            return Outcome("pending", "waits for your yes: memoryd pending confirm ID", draft,
                           pending_id=result["pending_id"])
        if status in DUPLICATE_STATUSES:
            matches = result.get("matches") or result.get("removed_matches") or []
            return Outcome("duplicate", status, draft, matches[0].get("id") if matches else None)
        return Outcome("refused", status, draft)
    except MemorydError as exc:
        if is_unavailable(exc):
            raise
        return Outcome("failed", f"error: {exc.message}", draft)


def _carry_over(operator: Any, draft: Draft, memory_id: str) -> Outcome:
    """The source tool's removal or verification, which memory_write cannot carry."""
    from memoryd.client.connection import is_unavailable

    tool = names.MEMORY_REMOVE if draft.removed_reason else names.MEMORY_VERIFY
    try:
        if draft.removed_reason:
            operator.tool(tool, id=memory_id, reason=draft.removed_reason)
            return Outcome("removed", "removed in the source tool: imported as a tombstone", draft, memory_id)
        if draft.verified_at:
            operator.tool(tool, id=memory_id,
                          note=f"verified in the source tool on {draft.verified_at} (before `memoryd import`)")
    except MemorydError as exc:
        if is_unavailable(exc):
            raise
        return Outcome("failed", f"written, but {tool} failed: {exc.message}", draft, memory_id)
    return Outcome("committed", "committed", draft, memory_id)


class Progress:
    """A bar on a terminal; elsewhere a line at each quarter of an import of 100+ items."""

    def __init__(self, total: int, stream: Any) -> None:
        self.total, self.stream, self.done_count, self.next_quarter = total, stream, 0, 1
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def step(self, counts: dict[str, int]) -> None:
        self.done_count += 1
        if self.tty:
            filled = BAR_WIDTH * self.done_count // max(1, self.total)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            tally = "  ".join(f"{k} {v}" for k, v in counts.items() if v)
            self.stream.write(f"\r[{bar}] {self.done_count}/{self.total}  {tally}\x1b[K")
            self.stream.flush()
        elif self.total >= 100 and self.done_count * 4 >= self.next_quarter * self.total:
            self.stream.write(f"memoryd import: {self.done_count}/{self.total}\n")
            self.next_quarter += 1

    def done(self) -> None:
        if self.tty and self.done_count:
            self.stream.write("\n")
            self.stream.flush()


def _summary_lines(summary: Summary) -> list[str]:
    counts = summary.counts()
    lines = [f"imported {summary.path} ({summary.fmt}): {len(summary.outcomes)} memories read",
             "  " + ", ".join(f"{counts[b]} {b}" for b in OUTCOMES)]
    for group in summary.reasons():
        lines.append(f"{group['outcome']}: {group['reason']} ({group['count']})")
        for item in group["items"]:
            ident = item.get("pending_id") or item.get("id") or ""
            lines.append(f"  {item['origin']}  {ident + '  ' if ident else ''}{one_line(item['title'], 70)}")
        lines += _more(group["count"], len(group["items"]))
    if counts["pending"]:
        lines.append("pending writes expire (pending_ttl_seconds); confirm with: memoryd pending confirm ID, "
                     "or re-run with --confirm-pending")
    lines += _skipped_lines(summary.skipped)
    if counts["committed"] or counts["removed"]:
        lines.append(f"see them: memoryd memories list --scope import:{summary.fmt}")
    return lines


def plan(fmt: str, path: str, drafts: list[Draft], skipped: Skipped) -> dict[str, Any]:
    """What an import would write, the first few drafts' titles with secrets masked."""
    return {"format": fmt, "path": path, "dry_run": True, "total": len(drafts), "skipped": _skipped_json(skipped),
            "removed": sum(1 for d in drafts if d.removed_reason),
            "by_category": dict(Counter(d.category for d in drafts)),
            "by_scope": dict(Counter(s for d in drafts for s in d.scopes)),
            "items": [{"origin": d.origin, "category": d.category, "scopes": list(d.scopes), "title": shown_title(d),
                       **({"removed": True} if d.removed_reason else {})} for d in drafts[:PLAN_ITEMS]]}


def _plan_lines(shown: dict[str, Any], skipped: Skipped) -> list[str]:
    lines = [f"dry run: {shown['total']} memories from {shown['path']} ({shown['format']}); nothing written",
             (f"  {shown['removed']} removed in the source tool (written, then removed again)"
              if shown["removed"] else ""),
             "  by category: " + ", ".join(f"{k} {v}" for k, v in shown["by_category"].items()),
             "  by scope:    " + ", ".join(f"{k} {v}" for k, v in shown["by_scope"].items())]
    lines += [f"  {item['origin']}  [{item['category']}] {','.join(item['scopes'])}  {one_line(item['title'], 60)}"
              f"{'  (removed)' if item.get('removed') else ''}" for item in shown["items"]]
    lines += _more(shown["total"], len(shown["items"])) + _skipped_lines(skipped)
    return [line for line in lines if line]


def add_parser(sub: Any) -> None:
    verb = sub.add_parser("import", help="bring memories in from another memory tool, through the write gates",
                          description="PATH per format: " + "; ".join(f"{k}: {v}" for k, (_, v) in FORMATS.items()))
    verb.add_argument("format", choices=list(FORMATS))
    verb.add_argument("path", nargs="?", help="what to read (claude-code: defaults to ~/.claude/projects)")
    verb.add_argument("--dry-run", action="store_true", help="parse and show what would be written; no daemon needed")
    verb.add_argument("--scope", action="append", help="add this scope to every memory (e.g. projects:web); repeatable")
    verb.add_argument("--acknowledge", action="append", choices=list(ACKNOWLEDGE),
                      help="let this warning through (time-bound wording, a project named without its scope)")
    verb.add_argument("--confirm-pending", action="store_true",
                      help="confirm claims about the user now instead of leaving them pending")
    verb.add_argument("--json", action="store_true", help="the summary as JSON")
    verb.set_defaults(func=main)
