import sys

if sys.argv[1:] == ["mcp"]:
    # The bridge's start budget is 100 ms: skip argparse and the CLI tree on this path.
    from memoryd.mcp_bridge.startup import main
else:
    from memoryd.cli.main import main

raise SystemExit(main())
