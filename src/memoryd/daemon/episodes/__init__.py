"""The episode tier: journal-shaped run state with a TTL, handoff between sessions, swarm fan-in.
episode_promote writes through the memory gates, so it lives in the memory tier above this one."""
