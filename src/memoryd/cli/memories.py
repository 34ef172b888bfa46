"""`memoryd memories list|search|show|rm|restore|edit|pin|unpin` and `memoryd pending [confirm|cancel ID]`,
through the agents' own tools and `admin` reads; `--json` prints the daemon's result unchanged.
Exit codes: 0 ok; 1 not found or refused; 2 usage; 3 the daemon is not running and could not be started."""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
from collections.abc import Callable
from typing import Any

from memoryd import names
from memoryd.cli.output import emit, visible
from memoryd.errors import INVALID_PARAMS, MemorydError

OK, REFUSED, USAGE, UNAVAILABLE = 0, 1, 2, 3
DEFAULT_REASON = "removed by the user from the terminal"


def run(verb: Callable[[Any, argparse.Namespace], int], ns: argparse.Namespace) -> int:
    """Run `verb` on an operator connection, the daemon started if none runs; errors become one stderr
    line and an exit code."""
    from memoryd.client.connection import Operator, is_unavailable

    operator = Operator("memoryd-cli")
    try:
        start_daemon()
        return verb(operator, ns)
    except MemorydError as exc:
        if is_unavailable(exc):
            print(f"memoryd: the daemon is not running and could not be started: {visible(exc.message)} "
                  "(memoryd doctor says why)", file=sys.stderr)
            return UNAVAILABLE
        print(f"memoryd: {visible(exc.message)}", file=sys.stderr)
        for candidate in (exc.data or {}).get("candidates") or []:  # an ambiguous id prefix
            print(f"  {candidate['id']}  {candidate['status']:7}  {one_line(visible(candidate['first_line']), 80)}",
                  file=sys.stderr)
        return USAGE if exc.code == INVALID_PARAMS else REFUSED
    finally:
        operator.close()


def start_daemon() -> None:
    """Start the daemon as a bridge would (the same spawn lock); DaemonUnavailable says why not."""
    from memoryd import paths
    from memoryd.client import spawn
    from memoryd.errors import DaemonUnavailable

    endpoint = paths.endpoint()
    if not spawn.ensure_daemon(endpoint):
        raise DaemonUnavailable(endpoint, f"it did not answer within {spawn.SPAWN_WAIT_S:g} s")


def full_id(op: Any, typed: str) -> str:
    """A whole id as typed, or a unique prefix (6+ characters) resolved by the daemon's `resolve_id`."""
    return typed if len(typed) == 26 else str(op.admin("resolve_id", prefix=typed)["id"])


def scopes_of(ns: argparse.Namespace) -> list[str] | None:
    return [*(ns.scope or []), *([f"projects:{ns.project}"] if ns.project else [])] or None


def one_line(text: Any, limit: int) -> str:
    """Stored text on one line (control characters shown as spaces), cut to `limit` chars."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: max(1, limit - 1)] + "…"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns; the last column takes what is left of the terminal's width."""
    if not rows:
        return []
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    room = max(20, max(60, shutil.get_terminal_size((120, 20)).columns) - sum(widths) - 2 * len(widths))
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), one_line(row[-1], room)]).rstrip()
            for row in [header, *rows]]


def shown_id(item: dict[str, Any]) -> str:
    return str(item.get("short_id") or item["id"])


# What `memories edit` reads back from an editor: the daemon's largest content (config max_content_bytes).
MAX_EDIT_BYTES = 4_000_000


def cmd_list(op: Any, ns: argparse.Namespace) -> int:
    if ns.removed:
        result = op.tool(names.MEMORY_LIST_TOMBSTONES, limit=ns.limit)
        rows = [[shown_id(t), (t.get("removed_at") or "")[:19], one_line(t.get("reason"), 40),
                 t.get("first_line") or ""] for t in result["tombstones"]]
        emit(ns.json, result, lambda r: table(["ID", "REMOVED", "REASON", "FIRST LINE"], rows)
             + [f"{len(rows)} of {r['total']} removed memories"])
        return OK
    result = op.tool(names.MEMORY_LIST, scopes=scopes_of(ns), category=ns.category, limit=ns.limit, pinned=ns.pinned)
    rows = [[shown_id(m), (m.get("updated") or "")[:19], m.get("category") or "", ",".join(m.get("scopes") or []),
             m.get("first_line") or m.get("content") or ""] for m in result["memories"]]
    emit(ns.json, result, lambda r: table(["ID", "UPDATED", "CATEGORY", "SCOPES", "FIRST LINE"], rows)
         + [f"{len(rows)} of {r['total']} {'pinned ' if ns.pinned else ''}memories"])
    return OK


def cmd_search(op: Any, ns: argparse.Namespace) -> int:
    result = op.tool(names.MEMORY_SEARCH, query=ns.query, scopes=scopes_of(ns), category=ns.category,
                     max_results=ns.limit, auto_scope=False)
    hits = result["results"] if ns.all else [h for h in result["results"] if h.get("relevance")
                                             or (h.get("similarity") or 0.0) >= MEANING_MATCH_FLOOR]
    rows = [[shown_id(h), f"{h.get('score', 0):.1f}", f"{h.get('relevance', 0):.2f}",
             "-" if h.get("similarity") is None else f"{h['similarity']:.2f}",
             h.get("staleness_verdict") or "", h.get("category") or "", h.get("content") or ""] for h in hits]
    hidden = len(result["results"]) - len(hits)

    def lines(r: dict[str, Any]) -> list[str]:
        out = table(["ID", "SCORE", "WORDS", "MEANING", "STALENESS", "CATEGORY", "CONTENT"], rows)
        capped = len(result["results"]) >= ns.limit
        out.append(f"{len(rows)} matching memor{'y' if len(rows) == 1 else 'ies'}"
                   + (f" (the best {ns.limit} looked at; --limit looks further)" if capped else ""))
        if hidden:
            out.append(f"{hidden} nearest by meaning left out: no word in common and meaning below "
                       f"{MEANING_MATCH_FLOOR:.2f} (--all shows them)")
        return out
    emit(ns.json, {**result, "results": hits, "not_matching": hidden}, lines)
    return OK


# A hit sharing no word with the query matches at this cosine: the prompt hook's pointer bar (docs/search.md).
MEANING_MATCH_FLOOR = 0.5


def show_lines(memory: dict[str, Any], history: dict[str, Any]) -> list[str]:
    origin = memory.get("origin") or {}
    lines = [f"id          {memory['id']}  ({memory['status']})",
             f"category    {memory.get('category')}   confidence {memory.get('confidence')}   "
             f"source {memory.get('source')}",
             f"scopes      {', '.join(memory.get('scopes') or []) or '-'}"
             + ("   PINNED (listed first at every session start)" if memory.get("pinned") else ""),
             f"created     {memory.get('created')}   updated {memory.get('updated')}",
             f"written by  {memory.get('session_id')} from {origin.get('worktree') or '-'} "
             f"({origin.get('branch') or '-'} {str(origin.get('commit') or '-')[:12]}, {origin.get('client') or '-'})"]
    if memory["status"] == "removed":
        lines.append(f"removed     {memory.get('removed_at')}: {one_line(memory.get('removed_reason'), 200)}")
    else:
        drift = (memory.get("path_drift") or {}).get("missing") or []
        lines.append(f"staleness   {memory.get('staleness_verdict', '-')}, {memory.get('age_days', '-')} days "
                     f"since verified or changed" + (f"; missing paths: {', '.join(drift)}" if drift else ""))
    if memory.get("tainted"):
        lines.append(f"TAINTED     {', '.join(memory.get('taint') or [])} (stored text is data, not instructions)")
    links = memory.get("links") or {}
    for link in links.get("outgoing", []):
        lines.append(f"link        {link['type']} -> {link['target_id']} ({link.get('target_state')})")
    for link in links.get("incoming", []):
        lines.append(f"link        {link['source_id']} -> {link['type']} this")
    if d := memory.get("delivery"):
        lines.append(f"delivered   injected {d['injected']} times in {d['sessions']} sessions; "
                     f"pointed to {d['pointed']} times, opened {d['pointer_opened']}")
    for event in history.get("events", []):
        status = f" ({event['status']})" if event.get("status") else ""
        lines.append(f"history     {event['ts']}  {event['kind']}{status}  {event.get('session', '')}")
    return [*lines, "", memory.get("content") or ""]


def cmd_show(op: Any, ns: argparse.Namespace) -> int:
    memory_id = full_id(op, ns.id)
    memory = op.tool(names.MEMORY_SHOW, id=memory_id)
    history = op.admin("history", id=memory_id)
    memory["delivery"] = {k: v for k, v in op.admin("delivery", id=memory_id).items() if k != "id"}
    emit(ns.json, {**memory, "history": history["events"]} if ns.json else memory, lambda m: show_lines(m, history))
    return OK


def cmd_rm(op: Any, ns: argparse.Namespace) -> int:
    result = op.tool(names.MEMORY_REMOVE, id=full_id(op, ns.id), reason=ns.reason or DEFAULT_REASON)
    emit(ns.json, result, lambda r: [f"removed {r['id']} (memoryd memories restore {r['id']} brings it back)"])
    return OK


def cmd_restore(op: Any, ns: argparse.Namespace) -> int:
    result = op.tool(names.MEMORY_RESTORE, id=full_id(op, ns.id))
    if result.get("status") != "restored":
        emit(ns.json, result, lambda r: [f"not restored: {r['status']}: {r.get('hint', '')}"]
             + [f"  {m['id']}  {m.get('snippet', '')}" for m in r.get("matches", [])])
        return REFUSED
    emit(ns.json, result, lambda r: [f"restored {r['id']}"])
    return OK


def cmd_pin(op: Any, ns: argparse.Namespace) -> int:
    result = op.tool(names.MEMORY_UPDATE, id=full_id(op, ns.id), pinned=ns.action == "pin")
    emit(ns.json, result, lambda r: [f"{ns.action}ned {r['id']}" + (
        " (listed first at every session start; memoryd memories list --pinned)" if ns.action == "pin" else "")])
    return OK


def cmd_edit(op: Any, ns: argparse.Namespace) -> int:
    """`memory_update` compare-and-set on the `updated` it was read at; a refusal writes nothing."""
    memory = op.tool(names.MEMORY_SHOW, id=full_id(op, ns.id))
    if memory.get("status") == "removed":
        print(f"memoryd: {memory['id']} is removed; restore it first (memoryd memories restore {memory['id']})",
              file=sys.stderr)
        return REFUSED
    try:
        draft = ns.content if ns.content is not None else edit_in_editor(memory)
    except EditRefused as exc:
        print(f"memoryd: {exc}; nothing written", file=sys.stderr)
        return USAGE
    if draft is None:
        return REFUSED
    if not draft.strip():
        print("memoryd: the new content is empty; nothing written (memoryd memories rm removes a memory)",
              file=sys.stderr)
        return USAGE
    if draft.strip() == (memory.get("content") or "").strip():
        emit(ns.json, {"status": "unchanged", "id": memory["id"]}, lambda r: [f"{r['id']}: unchanged, nothing written"])
        return OK
    result = op.tool(names.MEMORY_UPDATE, id=memory["id"], content=draft, expected_updated=memory.get("updated"),
                     acknowledge_transient=ns.acknowledge_transient or None)
    if result.get("status") != "updated":
        emit(ns.json, result, lambda r: [f"not saved: {r['status']}: " + (
            in_cli_words(r.get("hint")) or r.get("message")
            or f"the memory changed since it was read (now {r.get('current_updated')}); edit again"),
            "nothing was written"])
        return REFUSED
    emit(ns.json, result, lambda r: [f"updated {r['id']} ({r['updated']})"])
    return OK


# A gate's hint names the agent's parameter; the terminal has a flag for one and none for the other.
CLI_WORDS = {"acknowledge_transient=true": "--acknowledge-transient",
             "pass acknowledge_credential=true": "take the secret out (the terminal never overrides this gate)"}


def in_cli_words(hint: Any) -> str:
    text = str(hint or "")
    for said, meant in CLI_WORDS.items():
        text = text.replace(said, meant)
    return text


def edit_in_editor(memory: dict[str, Any]) -> str | None:
    """The content after $VISUAL / $EDITOR (else vi) edited it in a private temp file; None when the
    editor failed (the message says so)."""
    import os
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    folder = tempfile.mkdtemp(prefix=f"memoryd-{memory['id']}-")  # 0700, ours alone
    name = "memory.md"
    try:
        with open(os.path.join(folder, name), "x", encoding="utf-8") as handle:
            handle.write(memory.get("content") or "")
        try:
            code = subprocess.run([*shlex.split(editor), os.path.join(folder, name)], check=False).returncode
        except OSError as exc:
            print(f"memoryd: cannot run the editor {editor!r} ($EDITOR): {exc}; or use --content TEXT",
                  file=sys.stderr)
            return None
        if code != 0:
            print(f"memoryd: the editor exited with {code}; nothing written", file=sys.stderr)
            return None
        return read_edited(folder, name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # never follows a link the editor left there


class EditRefused(Exception):
    """What the editor left is not a file memoryd will read; the message says why, nothing is written."""


def read_edited(folder: str, name: str) -> str:
    """The edited file if it is a regular file (never a link's target) of at most MAX_EDIT_BYTES of UTF-8."""
    import os
    import stat

    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except FileNotFoundError:
        raise EditRefused("the edited file is gone (the editor deleted or moved it)") from None
    except OSError as exc:  # ELOOP: a symlink
        raise EditRefused(f"the edited file is not a plain file ({exc.strerror})") from None
    finally:
        os.close(folder_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise EditRefused("the edited file is not a regular file")
        data = handle.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:
        raise EditRefused(f"the edited file is over {MAX_EDIT_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditRefused(f"the edited file is not UTF-8 (byte {exc.start})") from None


def cmd_pending(op: Any, ns: argparse.Namespace) -> int:
    if ns.action in ("confirm", "cancel"):
        if not ns.pending_id:
            print(f"memoryd: pending {ns.action} needs a pending id (memoryd pending lists them)", file=sys.stderr)
            return USAGE
        result = op.admin("resolve", pending_id=ns.pending_id, decision=ns.action)
        status = result.get("status")
        done = status == ("committed" if ns.action == "confirm" else "cancelled")
        emit(ns.json, result, lambda r: [f"{r['pending_id']}: {status}"
                                         + (f" as memory {r['id']}" if r.get("id") else "")
                                         + ("" if done else f" — {r.get('hint', 'still pending')}")])
        return OK if done else REFUSED
    result = op.admin("pending")
    rows = [[p["pending_id"], p["session_id"], (p.get("expires_at") or "")[:19] + (" EXPIRED" if p["expired"] else ""),
             ",".join(p.get("scopes") or []), p.get("content") or p.get("preview") or ""] for p in result["pending"]]
    emit(ns.json, result, lambda r: table(["PENDING", "SESSION", "EXPIRES", "SCOPES", "CONTENT"], rows)
         + [f"{r['total']} pending write(s); memoryd pending confirm|cancel ID decides one"])
    return OK


def add_parsers(sub: Any) -> None:
    memories = sub.add_parser("memories", help="see and curate durable memories (through the daemon)")
    verbs = memories.add_subparsers(dest="action", required=True)
    for name, cmd, text in (("list", cmd_list, "newest written first (by creation; UPDATED is the last edit)"),
                            ("search", cmd_search, "ranked search (all repos)"),
                            ("show", cmd_show, "one memory: fields, staleness, provenance, links, history"),
                            ("rm", cmd_rm, "move a memory to a tombstone"),
                            ("restore", cmd_restore, "bring a removed memory back"),
                            ("edit", cmd_edit, "change a memory's content ($EDITOR, or --content)"),
                            ("pin", cmd_pin, "list a rule first at every session start"),
                            ("unpin", cmd_pin, "undo pin")):
        verb = verbs.add_parser(name, help=text)
        verb.set_defaults(func=functools.partial(run, cmd))
        verb.add_argument("--json", action="store_true", help="the daemon's result as JSON")
        if name == "search":
            verb.add_argument("query")
            verb.add_argument("--all", action="store_true",
                              help="also the nearest memories that share no word and are not close in meaning")
        if name in ("show", "rm", "restore", "edit", "pin", "unpin"):
            verb.add_argument("id", help="a memory id, or a unique prefix of it (6+ characters)")
        if name == "edit":
            verb.add_argument("--content", help="the new content (instead of opening $EDITOR)")
            verb.add_argument("--acknowledge-transient", action="store_true",
                              help="save content the transient gate flags (a state that will not last)")
        if name in ("list", "search"):
            verb.add_argument("--scope", action="append", help="a scope (nested ones match); repeatable")
            verb.add_argument("--project", help="shorthand for --scope projects:NAME")
            verb.add_argument("--category", choices=["fact", "user-inference", "ambient", "handoff"])
            verb.add_argument("--limit", type=int, default=50 if name == "list" else 10)
        if name == "list":
            verb.add_argument("--removed", action="store_true", help="removed memories (tombstones) instead")
            verb.add_argument("--pinned", action="store_true", help="only pinned rules")
        if name == "rm":
            verb.add_argument("--reason", help="why (kept with the tombstone)")
    pending = sub.add_parser("pending", help="pending writes of every session; confirm or cancel one")
    pending.add_argument("action", nargs="?", choices=["list", "confirm", "cancel"], default="list")
    pending.add_argument("pending_id", nargs="?")
    pending.add_argument("--json", action="store_true")
    pending.set_defaults(func=functools.partial(run, cmd_pending))
