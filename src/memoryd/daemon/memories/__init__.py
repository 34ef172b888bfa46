"""The durable memory tier: facts behind the write gates, ranked search, staleness, tombstones.

`state` holds the tier's fields and `tier` its changes; `recovery` and `cache` load it at start;
`gates` and `chain` are the write gates; `writes`, `edits`, `reads` and `overview` are the tool
handlers and `tools` their catalogue entries; `records`, `index`, `stats` and `staleness` are the
pieces they share. `episode_promote` lives here, not in the episode tier: it writes through the
gates, which that tier, below this one, cannot import.
"""
