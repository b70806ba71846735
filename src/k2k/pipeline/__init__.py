"""The data path: planner (Spark driver) -> runner (Spark task) -> stages (per record)."""
