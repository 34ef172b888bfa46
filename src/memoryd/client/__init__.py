"""The client library the bridge and the CLI use to talk to the daemon (the only client-side zmq)."""
