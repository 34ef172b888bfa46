"""`memoryd ui`: a local web view of the store, a client of the daemon's wire like the CLI verbs.
Import contract: client, protocol, errors, paths, config and the stdlib — never the daemon."""
