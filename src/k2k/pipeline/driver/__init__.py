"""Runs on: the Spark driver. The planner's loop and what it owns for one run: discovery,
start positions, membership, lease jobs, the outage rider; ``services/`` runs beside the copy."""
