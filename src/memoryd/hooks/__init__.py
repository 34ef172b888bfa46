"""The client hooks' processes (`memoryd hook EVENT`). Kept light: nothing here imports the daemon, the
CLI or pyzmq on a running daemon's path (docs/architecture.md)."""
