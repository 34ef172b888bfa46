"""Running the daemon, above the tiers: start and stop (`lifecycle`), parked `wait_for` calls (`waiting`),
`reply_cache`, operator reads (`admin`), timed passes (`reaper`) and the `checkpoint`."""
