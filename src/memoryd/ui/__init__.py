"""`memoryd ui`: a local web view of the store, a client of the daemon (`client.connection.Operator`)
as the `memoryd memories|pending|sessions` verbs are.

Import contract: client, protocol, errors, paths, config and the stdlib — never the daemon. The
daemon stays the only writer; everything here is a client of its wire.
"""
