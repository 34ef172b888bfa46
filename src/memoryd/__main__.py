import sys

if sys.argv[1:2] == ["mcp"] and not {"-h", "--help"} & set(sys.argv[2:]):
    # The bridge's start budget is 100 ms: skip argparse and the CLI tree on this path (startup
    # reads its one option, `--tools PROFILE`, itself).
    from memoryd.mcp_bridge.startup import main
else:
    from memoryd.cli.main import main

raise SystemExit(main())
