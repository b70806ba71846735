"""The same pipeline on a real Spark standalone cluster (master + worker from pyspark's scripts)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from k2k.local import free_port
from tests.integration.conftest import BASE_TS, k2k_cli, pipeline_dict, write_pipeline
from tests.kafkautil import create_topic, eventually, produce, read_all

pytestmark = pytest.mark.integration

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


@pytest.fixture
def standalone(tmp_path):
    """A Spark standalone master and one worker (2 cores, 1 GiB) on loopback."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_CLASS.parent.parent),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
    }
    master_url = f"spark://127.0.0.1:{port}"
    logs = tmp_path / "spark-logs"
    logs.mkdir()

    def launch(args: list[str], log_name: str) -> subprocess.Popen:
        with open(logs / log_name, "w") as log:  # the child keeps its own copy of the fd
            return subprocess.Popen(
                args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    master = [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master += ["--port", str(port), "--webui-port", str(ui)]
    worker = [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--cores", "2"]
    worker += ["--memory", "1g", "--webui-port", str(worker_ui), master_url]
    procs = [launch(master, "master.log")]
    try:
        eventually(
            lambda: "I have been elected leader" in (logs / "master.log").read_text(),
            expected=True,
            timeout=60,
        )
        procs.append(launch(worker, "worker.log"))
        eventually(
            lambda: "Successfully registered with master" in (logs / "worker.log").read_text(),
            expected=True,
            timeout=60,
        )
        yield master_url
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(30)


def test_pipeline_runs_unchanged_on_a_standalone_cluster(
    clusters, standalone, tmp_path, topic_name
):
    t = topic_name("standalone")
    create_topic(clusters.source, t, 4)
    produce(
        clusters.source,
        t,
        [
            (i % 4, f"k{i}".encode(), f"v{i}".encode(), [("h", b"1")], BASE_TS + i)
            for i in range(20_000)
        ],
    )
    doc = pipeline_dict(
        clusters,
        topic_name("pstandalone"),
        [t],
        spark={
            "master": standalone,
            "conf": {
                "spark.executor.memory": "512m",
                "spark.cores.max": "2",
                # k2k is installed in this interpreter only (a non-local master gets the
                # cluster's Python unless told).
                "spark.pyspark.python": sys.executable,
            },
        },
    )
    result = k2k_cli(
        "start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)), timeout=300
    )
    assert result.returncode == 0, result.stderr
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    for p in range(4):
        assert [(r.key, r.value, r.headers, r.timestamp) for r in dst[p]] == [
            (r.key, r.value, r.headers, r.timestamp) for r in src[p]
        ]
