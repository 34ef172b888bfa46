"""The daemon: the only writer of the store and the event log. Only `server` touches zmq."""
