"""The client hooks' processes (`memoryd hook EVENT`): one table of events (`table`), a module per
event, and what they share (`common`). Kept light: a hook runs on every prompt and tool call, so
nothing here imports the daemon, the CLI or pyzmq on a running daemon's path (docs/architecture.md).
"""
