"""The episode tier: journal-shaped run state with a TTL, handoff between sessions, swarm fan-in.

`journal` is the in-memory index of episode files; `tools` holds the four episode tools.
"""
