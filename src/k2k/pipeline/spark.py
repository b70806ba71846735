"""The Spark session k2k runs its leases on, and how Spark's errors read in one line.

Runs on: driver, once per ``k2k start``. The k2k package must be importable on executors:
locally (``local[N]``, or a standalone cluster on this machine) workers use this very
interpreter (``PYSPARK_PYTHON``); for other masters the package is also shipped as a zip
with ``addPyFile`` (its dependencies, confluent-kafka above all, must be installed on the
executors' Python).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_error_line", "start_spark"]

_QUIET_LOG = Path(__file__).with_name("spark-log4j2.properties")

#: Spark settings k2k chooses unless ``spark.conf`` says otherwise.
SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    # The driver JVM only schedules leases (runners are Python processes): C1 compilation is
    # enough, and the C2 compiler threads would otherwise compete with runners for CPU.
    "spark.driver.extraJavaOptions": (
        f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{_QUIET_LOG}"
    ),
    "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_QUIET_LOG}",
}


#: A speculative copy of a runner task would be a second writer for the same partitions.
SPARK_FORCED: dict[str, str] = {"spark.speculation": "false"}


def start_spark(app_name: str, master: str, conf: dict[str, str]) -> SparkSession:
    """Runs on: driver. Start (or join) the session for ``master`` with k2k's defaults under
    ``conf`` and its forced settings over it; ships the k2k package to remote executors."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # imported late: pyspark is slow to import

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SPARK_DEFAULTS, **conf, **SPARK_FORCED}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(_package_zip())
    return spark


def spark_error_line(exc: object) -> str:
    """Runs on: driver. The last meaningful line of a Spark/Py4J error (the Python
    exception, if any), at most 500 characters.

    >>> spark_error_line("py4j.protocol.Py4JJavaError: An error occurred\\n"
    ...     "  at org.apache.spark.Foo(Foo.scala:1)\\n"
    ...     "k2k.errors.ReplicationError: record too large\\n"
    ...     "  at org.apache.spark.Bar(Bar.scala:2)")
    'k2k.errors.ReplicationError: record too large'
    """
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("at ")]  # Java stack frames
    for ln in reversed(lines):
        if _EXCEPTION_LINE.match(ln):
            return ln[:500]
    return (lines[-1] if lines else repr(exc))[:500]


#: "SomeError: message" or "pkg.SomeException(...)", as Python and Java print exceptions.
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception)\b")


def _package_zip() -> str:
    """Zip the installed k2k package so remote executors can import it."""
    package_dir = Path(__file__).resolve().parents[1]
    out = Path(tempfile.mkdtemp(prefix="k2k-pyfiles-")) / "k2k"
    archive = shutil.make_archive(str(out), "zip", root_dir=package_dir.parent, base_dir="k2k")
    return archive
