"""`memoryd sync [init REMOTE | status [--show ID] | resolve ID]`: sync the durable tier through a git remote.

The daemon does the work (docs/sync.md); these verbs start its job through `admin` and poll `sync_status`.
Exit codes: 0 done; 1 the sync failed or was refused; 2 usage; 3 the daemon is not running."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.cli.memories import REFUSED, full_id, run
from memoryd.cli.output import emit, visible

POLL_S = 0.2
WAIT_LIMIT_S = 3600.0


def add_parser(sub: Any) -> None:
    sync = sub.add_parser("sync", help="sync durable memories through a git remote (push and pull now)")
    sync.set_defaults(func=main, sync_action=None)
    actions = sync.add_subparsers(dest="sync_action")
    init = actions.add_parser("init", help="set up sync with a git remote (a bare repo path, ssh or https)")
    init.add_argument("remote")
    status = actions.add_parser("status", help="the remote, this device, the last sync, open conflicts")
    status.add_argument("--show", metavar="ID",
                        help="print both sides of one memory's conflict: the current text and each kept version")
    resolve = actions.add_parser("resolve", help="settle a kept conflict of one memory")
    resolve.add_argument("id", help="the memory's id or a unique prefix of at least 6 characters")
    resolve.add_argument("--keep", choices=["current", "other"], default="current",
                         help="current: keep what the store has; other: the newest kept version wins")
    for parser in (sync, init, status, resolve):
        parser.add_argument("--json", action="store_true")


def main(ns: argparse.Namespace) -> int:
    verbs = {None: sync_now, "init": init, "status": status, "resolve": resolve}
    return run(verbs[ns.sync_action], ns)


def _wait(operator: Any, job: int) -> dict[str, Any]:
    """Poll until job `job` (or a later one) has finished; its summary."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    said = ""
    while time.monotonic() < deadline:
        state = operator.admin("sync_status")
        last, running = state.get("last") or {}, state.get("running") or {}
        if isinstance(last.get("job"), int) and last["job"] >= job and running.get("job") != job:
            return last
        phase = str(running.get("phase") or "")
        if phase and phase != said and sys.stderr.isatty():  # progress for a person, not for a pipe
            print(f"memoryd: sync: {phase}…", file=sys.stderr)
            said = phase
        time.sleep(POLL_S)
    raise TimeoutError(f"sync job {job} did not finish within {WAIT_LIMIT_S:g} s")


def _failed(last: dict[str, Any]) -> int:
    error = last.get("error") or {}
    print(f"memoryd: sync failed ({error.get('kind', 'error')}): {visible(str(error.get('message', '')))}",
          file=sys.stderr)
    return REFUSED


def sync_now(operator: Any, ns: argparse.Namespace) -> int:
    started = operator.admin("sync")
    if started.get("joined") and not ns.json:
        print(f"a sync is already running (job {started['job']}); waiting for it", file=sys.stderr)
    last = _wait(operator, started["job"])
    emit(ns.json, last, result_lines)
    return 0 if last.get("status") == "ok" else _failed(last)


def result_lines(last: dict[str, Any]) -> list[str]:
    lines = [f"synced with {last.get('remote')}: pushed {last.get('pushed', 0)}, pulled {last.get('pulled', 0)}"
             + (f", deferred {last['deferred']} (changed during the sync; next sync)" if last.get("deferred") else "")]
    if last.get("repaired"):
        lines.append(f"  {last['repaired']}")
    if last.get("rewritten"):
        lines.append("  the remote's history was rewritten or replaced since the last sync: merged record by "
                     "record, nothing dropped")
    lines += [f"  conflict {row['id']}: kept version {row['winner'][:12]} (rule: {row['rule']}), the other "
              f"({row['loser'][:12]}) kept under conflicts/" for row in last.get("conflicts_decided") or []]
    if last.get("conflicts"):
        lines.append(f"  {last['conflicts']} kept version(s) wait to be settled: memoryd sync status")
    lines += [f"  quarantined {visible(row['path'])}: {row['reason']}" for row in last.get("quarantined") or []]
    lines += [f"  put back on the remote {memory_id}: it had been removed there without a tombstone"
              for memory_id in last.get("restored_to_remote") or []]
    for name in ("conflicts_decided", "quarantined", "restored_to_remote"):
        total, shown = last.get(f"{name}_total", last.get(f"{name}_new", 0)), len(last.get(name) or [])
        if total > shown:
            lines.append(f"  … {total - shown} more {name.replace('_', ' ')} (memoryd sync --json, or the event log)")
    if last.get("kept_local"):
        lines.append(f"  {last['kept_local']} record(s) hold a credential and stay on this machine")
    return lines


def init(operator: Any, ns: argparse.Namespace) -> int:
    started = operator.admin("sync_init", remote=ns.remote)
    last = _wait(operator, started["job"])
    if last.get("status") != "ok":
        return _failed(last)
    emit(ns.json, operator.admin("sync_status"),
         lambda state: [f"sync set up with {state.get('remote')} (this device: {state.get('device_name')}, "
                        f"{state.get('device')}); run `memoryd sync` to push and pull"])
    return 0


def status(operator: Any, ns: argparse.Namespace) -> int:
    if ns.show:
        emit(ns.json, operator.admin("sync_show", id=full_id(operator, ns.show)), show_lines)
    else:
        emit(ns.json, operator.admin("sync_status"), status_lines)
    return 0


def status_lines(state: dict[str, Any]) -> list[str]:
    if not state.get("set_up"):
        return ["sync is not set up: memoryd sync init REMOTE"]
    interval = state.get("interval_seconds") or 0
    lines = [f"remote:   {state.get('remote')} (branch {state.get('branch')})",
             f"device:   {state.get('device_name')} ({state.get('device')})",
             f"interval: {f'every {interval} s' if interval else 'off (memoryd sync by hand)'}"]
    if running := state.get("running"):
        lines.append(f"running:  job {running.get('job')}")
    if last := state.get("last"):
        outcome = "ok" if last.get("status") == "ok" else f"failed: {(last.get('error') or {}).get('message')}"
        lines.append(f"last:     {last.get('finished_at')} {outcome}; pushed {last.get('pushed', 0)}, "
                     f"pulled {last.get('pulled', 0)}")
    conflicts = state.get("conflicts") or {}
    lines.append(f"conflicts: {conflicts.get('total', 0)}")
    for row in conflicts.get("items") or []:
        lines.append(f"  {row['id']}  {len(row['kept_versions'])} kept version(s)  "
                     f"{visible(str(row.get('first_line') or ''))[:80]}")
    if conflicts.get("total"):
        lines.append("  settle one: memoryd sync resolve ID --keep current|other")
    lines.append(f"quarantined: {state.get('quarantined', 0)} (files under {state.get('clone', '')[:-5]}/quarantine)")
    return lines


def show_lines(result: dict[str, Any]) -> list[str]:
    blocks = [_version_block("current (what this store serves; --keep current)", result.get("current"))]
    for row in result.get("kept") or []:
        label = "kept, settled (goes at the next sync)" if row.get("settled") else "kept (--keep other)"
        blocks.append(_version_block(label, row))
    return [f"{result['id']}\n\n" + "\n\n".join(blocks),
            f"\nsettle it: memoryd sync resolve {result['id']} --keep current|other"]


def _version_block(label: str, row: dict[str, Any] | None) -> str:
    if row is None:
        return f"== {label}: none (this store has no version of it)"
    if row.get("text") is None:
        return f"== {label}: {str(row.get('sha', ''))[:12]} cannot be read: {row.get('unreadable')}"
    state = "removed" if row.get("state") == "tomb" else "live"
    return (f"== {label}: {state}, {'removed' if state == 'removed' else 'updated'} {row.get('stamp')}, "
            f"sha {str(row.get('sha', ''))[:12]}\n{visible(str(row['text'])).rstrip()}")


def resolve(operator: Any, ns: argparse.Namespace) -> int:
    emit(ns.json, operator.admin("sync_resolve", id=full_id(operator, ns.id), keep=ns.keep),
         lambda r: [f"{r['id']}: kept the {'current' if ns.keep == 'current' else 'other'} version; "
                    f"{len(r['settled'])} kept version(s) settled (removed from conflicts/ at the next sync)"])
    return 0


def doctor_rows() -> list[tuple[str, str, str, str]]:
    """(name, status, detail, fix) for `memoryd doctor`, read from the files (no daemon needed)."""
    from memoryd import paths

    base = paths.store_root() / "sync"
    config, last = _json(base / "config.json"), _json(base / "last.json", {})
    if config is None:
        return [("sync", "ok", "not set up (memoryd sync init REMOTE to share memories across machines)", "")]
    open_ids, total = _open_conflicts(base)
    detail = f"with {config.get('remote')} as device {config.get('device_id')}"
    if last.get("status") not in (None, "ok"):
        rows = [("sync", "warn", f"{detail}; the last sync failed: {(last.get('error') or {}).get('message')}",
                 "check the remote, then: memoryd sync")]
    else:
        rows = [("sync", "ok", detail + (f"; last {last.get('finished_at')}" if last else "; never synced"), "")]
    if total:
        rows.append(("sync conflicts", "warn",
                     f"{total} memories have a kept conflicting version: {', '.join(open_ids[:5])}",
                     "memoryd sync status, then memoryd sync resolve ID --keep current|other"))
    return rows


def _open_conflicts(base: Path) -> tuple[list[str], int]:
    """(ids, total) of the unsettled conflicts: the daemon's open-conflicts.json (the clone keeps a
    settled conflict's files until the next sync), else the clone's non-empty `conflicts/<id>/` folders."""
    seen = _json(base / "open-conflicts.json")
    try:
        return [str(i) for i in seen["ids"]], int(seen["total"])
    except (ValueError, KeyError, TypeError):
        pass
    folder = base / "repo" / "conflicts"
    try:
        ids = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and any(p.iterdir()))
    except OSError:
        ids = []
    return ids, len(ids)


def _json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default
