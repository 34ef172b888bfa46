"""`memoryd ui`: a local web view of the store, a client of the daemon's wire like the CLI verbs (never the daemon)."""
