"""Spark's Python daemon, with the runner's modules loaded before it forks its workers.

Runs on: the executor's Python daemon (``spark.python.daemon.module``), for local masters,
where the executors' Python is the driver's own and k2k is importable. Every Python worker
is forked from the daemon, and each imported the runner anew when its first task
unpickled it; imported here once, the workers inherit the modules instead
(docs/benchmarks.md#python-workers-forked-with-the-runner-loaded).
"""

from __future__ import annotations

from pyspark.daemon import manager

import k2k.pipeline.runner  # noqa: F401  (imported for the workers the daemon forks)

if __name__ == "__main__":
    manager()
