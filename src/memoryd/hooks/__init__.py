"""The client hooks' processes (`memoryd hook EVENT`): never the daemon, the CLI or pyzmq on a running daemon's path."""
