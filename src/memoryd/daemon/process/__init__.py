"""Running the daemon, above the tiers: start-up, signals and the status file (`lifecycle`), calls
parked on `wait_for` (`waiting`), the reply cache a resend is answered from (`reply_cache`), the operator's
reads (`admin`), the timed passes (`reaper`) and the state saved at a clean stop (`checkpoint`)."""
