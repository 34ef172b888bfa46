import sys

if sys.argv[1:2] == ["mcp"] and not {"-h", "--help"} & set(sys.argv[2:]):
    # The bridge's start budget is 100 ms: skip argparse and the CLI tree (startup reads `--tools` itself).
    from memoryd.mcp_bridge import startup

    raise SystemExit(startup.main())

from memoryd.cli import main as cli  # noqa: E402 (after the fast path on purpose)

raise SystemExit(cli.main())
