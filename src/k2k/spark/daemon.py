"""Spark's Python daemon, with the runner's modules loaded before it forks its workers.

Runs on: the executor's Python daemon (``spark.python.daemon.module``), for local masters,
where the executors' Python is the driver's own and k2k is importable. Every Python worker
is forked from the daemon, and each imported the runner anew when its first task
unpickled it; imported here once, the workers inherit the modules instead
(docs/benchmarks.md#python-workers-forked-with-the-runner-loaded).
"""

from __future__ import annotations

import os
import sys
from fnmatch import fnmatch
from importlib.machinery import PathFinder

#: The zips Spark puts on its Python workers' path (``$SPARK_HOME/python/lib``).
_SPARK_ZIPS = ("pyspark.zip", "py4j-*-src.zip")


def _prefer_installed_pyspark() -> None:
    """Spark puts its zipped pyspark and py4j first on the workers' path. Modules in a zip
    are compiled again by every new daemon (docs/benchmarks.md#spark-context-only); this
    interpreter has the same installation's pyspark with compiled modules, so the zips
    go when that one is found without them."""
    zips = [p for p in sys.path if any(fnmatch(os.path.basename(p), z) for z in _SPARK_ZIPS)]
    rest = [p for p in sys.path if p not in zips]
    if zips and PathFinder.find_spec("pyspark", rest) and PathFinder.find_spec("py4j", rest):
        sys.path[:] = rest


_prefer_installed_pyspark()

from pyspark.daemon import manager  # noqa: E402  (after the path is settled)

import k2k.pipeline.task.runner  # noqa: E402, F401  (imported for the workers the daemon forks)

if __name__ == "__main__":
    manager()
