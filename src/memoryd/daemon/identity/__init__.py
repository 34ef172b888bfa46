"""Who and where, below the tiers: record ids (`idents`), scope rules (`scopes`) and which session
each connection's calls belong to (`session_table`)."""
