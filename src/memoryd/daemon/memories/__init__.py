"""The durable memory tier: facts behind the write gates, ranked search, staleness, tombstones.
`episode_promote` lives here, not in the episode tier: it writes through these gates, which that tier,
below this one, cannot import.
"""
