"""The one client (`connection.Connection`), its two transports, and finding or starting a daemon."""
