"""`memoryd ui`: a local web view of the store, and the operator's client both it and the
`memoryd memories|pending|sessions` verbs use.

Import contract: client, protocol, errors, paths, config and the stdlib — never the daemon. The
daemon stays the only writer; everything here is a client of its wire.
"""
