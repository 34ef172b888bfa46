"""The client library: the one client (`connection.Connection`) that the bridge, the CLI, the web
view and the hooks use, its two transports, and finding or starting a daemon (`spawn`)."""
