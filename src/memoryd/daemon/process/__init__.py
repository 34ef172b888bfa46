"""Running the daemon, above the tiers: start-up, signals and the status file (`lifecycle`), calls
parked on `wait_for` (`parked`), the reply cache a resend is answered from (`replies`), the operator's
reads (`admin`), the timed passes (`reaper`) and the state saved at a clean stop (`checkpoint`)."""
