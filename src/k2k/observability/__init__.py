"""What k2k shows while it runs: the live display and the periodic log line."""
