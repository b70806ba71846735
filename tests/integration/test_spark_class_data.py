"""The Spark JVM k2k starts records its class data once, and later starts map it: real
Spark, in processes of their own (one SparkContext per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from k2k.spark.classdata import ARCHIVE_DIR

pytestmark = pytest.mark.integration

_START_AND_STOP = """
import json, psutil
from pyspark import SparkContext
from k2k.spark.session import start_spark, stop_spark
sc = start_spark("class-data", "local[1]", {})
total = sc.parallelize(range(10), 2).sum()
jvm = SparkContext._gateway.proc
def command_of(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # a Python worker that ended (a zombie until reaped)
        return ""
tree = [psutil.Process(jvm.pid), *psutil.Process(jvm.pid).children(recursive=True)]
java = [(p.pid, command_of(p)) for p in tree if "SparkSubmit" in command_of(p)]
with open(f"/proc/{java[0][0]}/maps") as maps:  # what the JVM has mapped, archives too
    mapped = sorted({line.split()[-1] for line in maps if line.rstrip().endswith(".jsa")})
stop_spark(sc)
print(json.dumps({"sum": total, "java": [c for _, c in java], "mapped": mapped, "exit": jvm.returncode}))
"""


def _start_and_stop(home) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _START_AND_STOP],
        env={**os.environ, "K2K_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_first_start_records_an_archive_that_later_starts_map(tmp_path):
    directory = tmp_path / ARCHIVE_DIR
    first = _start_and_stop(tmp_path)
    assert first["sum"] == 45 and first["exit"] == 0
    assert len(first["java"]) == 1 and "-XX:ArchiveClassesAtExit=" in first["java"][0]
    archives = sorted(directory.iterdir())
    assert [p.suffix for p in archives] == [".jsa"] and archives[0].stat().st_size > 1_000_000

    second = _start_and_stop(tmp_path)
    assert second["sum"] == 45 and second["exit"] is None  # not recording: left to exit alone
    assert f"-XX:SharedArchiveFile={archives[0]}" in second["java"][0]
    assert str(archives[0]) in second["mapped"]  # accepted: a rejected archive is not mapped
    assert str(archives[0]) not in first["mapped"]
    assert sorted(directory.iterdir()) == archives
