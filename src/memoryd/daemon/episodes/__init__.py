"""The episode tier: journal-shaped run state with a TTL, handoff between sessions, swarm fan-in.

`journal` is the in-memory index of episode files; `tools` holds episode_write, episode_handoff
and episode_search. episode_promote writes through the memory gates, so it lives in the memory
tier above this one (tiers import only the tiers below them).
"""
