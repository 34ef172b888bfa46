"""The session tier: explicit brackets, finishing with a handoff, and the digest that leads with it.
The session table itself lives in `identity.session_table` (every bridge has a session)."""
