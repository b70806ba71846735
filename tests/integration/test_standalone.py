"""The same pipeline on a real Spark standalone cluster (master + worker from pyspark's
scripts): started by ``k2k start`` with ``spark.master`` in the pipeline, and submitted with
``spark-submit`` with executors that use only the Python environment ``k2k package`` built."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pyspark
import pytest

import k2k
from k2k.local import free_port
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

SPARK_BIN = Path(pyspark.__file__).parent / "bin"
SPARK_CLASS = SPARK_BIN / "spark-class"
#: The entry file spark-submit runs, as docs/spark.md says to find it.
K2K_MAIN = Path(k2k.__file__).parent / "__main__.py"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A Spark standalone master and one worker (2 cores, 1 GiB) on loopback; yields the
    master URL and the worker's directory (executors' working directories are below it)."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_CLASS.parent.parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
    }
    env.pop("PYSPARK_PYTHON", None)  # executors' Python is the driver's choice, never this
    # Executors write bytecode: the tests read it as evidence of what they imported.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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
        yield master_url, tmp_path / "work"
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(30)


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The executors' environment, built once with the documented command."""
    out = tmp_path_factory.mktemp("archive") / "k2k-env.tar.gz"
    result = k2k_cli("package", "-o", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    return out


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
            "master": standalone[0],
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


def _executor_pythons(worker_dir: Path) -> list[psutil.Process]:
    """The Python processes of this worker's executors (their working directory is below
    the worker's directory), or [] before they started."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cwd, cmdline = proc.info["cwd"], proc.info["cmdline"]
        if cwd and cmdline and cwd.startswith(str(worker_dir)) and "python" in cmdline[0]:
            found.append(proc)
    return found


def _loaded_librdkafka(procs: list[psutil.Process]) -> list[tuple[str, str]]:
    """(working directory, mapped path) of confluent-kafka's native modules in ``procs``:
    present once a runner started copying."""
    loaded = []
    for proc in procs:
        try:
            loaded += [
                (proc.cwd(), m.path) for m in proc.memory_maps() if "confluent_kafka" in m.path
            ]
        except psutil.Error:  # a worker that just ended
            continue
    return loaded


def _submit(
    standalone, archive: Path, pipeline: Path, log: Path, pycache: Path
) -> subprocess.Popen:
    """``spark-submit`` of ``k2k start -f pipeline`` as docs/spark.md shows it, in client
    mode; runs until stopped. Executors write the bytecode of every module they import from
    a source file below ``pycache`` (``PYTHONPYCACHEPREFIX``), at its source's path."""
    master, _ = standalone
    args = [str(SPARK_BIN / "spark-submit"), "--master", master, "--deploy-mode", "client"]
    args += ["--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python"]
    args += ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    args += ["--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2"]
    args += ["--conf", f"spark.executorEnv.PYTHONPYCACHEPREFIX={pycache}"]
    args += [str(K2K_MAIN), "start", "-f", str(pipeline)]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_PYTHON", None)
    with open(log, "w") as out:
        return subprocess.Popen(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop_driver(submit: subprocess.Popen, log: Path) -> None:
    """SIGTERM to k2k's driver process (spark-submit's Python child): a clean stop, after
    which spark-submit exits with k2k's status."""
    drivers = []
    for child in psutil.Process(submit.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # e.g. a helper that just exited (zombie)
            if str(K2K_MAIN) in child.cmdline():
                drivers.append(child)
    assert drivers, log.read_text()[-3000:]
    for p in drivers:
        p.send_signal(signal.SIGTERM)
    assert submit.wait(120) == 0, log.read_text()[-3000:]


def _executor_jvms(worker_dir: Path) -> list[psutil.Process]:
    """The executor JVMs this worker runs (their working directory is below its directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cwd, cmdline = proc.info["cwd"], proc.info["cmdline"]
        if cwd and cmdline and cwd.startswith(str(worker_dir)) and "Executor" in " ".join(cmdline):
            found.append(proc)
    return found


def _records(first: int, count: int) -> list[tuple]:
    return [
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], BASE_TS + i)
        for i in range(first, first + count)
    ]


def _target_count(clusters, topic: str) -> int:
    return sum(len(rs) for rs in read_all(clusters.target, topic).values())


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_spark_submit_runs_on_executors_with_only_the_shipped_environment(
    clusters, standalone, archive, tmp_path, topic_name, mode
):
    """spark-submit's master wins over the pipeline's ``spark.master: local[2]``; executors
    run ``./env/bin/python`` from the archive and load confluent-kafka from it (never from
    this project's environment) and import k2k from it; the lease channel listens on the
    configured ``spark.controlPort``; the target equals the source record for record.

    Exactly-once also loses its executor: once the first half is replicated, the second
    half is produced and the executor's JVM is killed (SIGKILL) at once, while its runners
    copy it or are about to; Spark starts another executor, the runners' tasks run again
    from the committed progress, and the target still holds every record exactly once."""
    worker_dir = standalone[1]
    t = topic_name("submit")
    create_topic(clusters.source, t, 2)
    kill = mode == "exactly-once"
    produce(clusters.source, t, _records(0, 2_500 if kill else 5_000))
    control_port = free_port()
    doc = pipeline_dict(
        clusters,
        topic_name(f"psubmit-{mode}"),
        [t],
        features={"exactlyOnce": "enabled" if kill else "disabled"},
        spark={"controlPort": control_port},  # and spark.master stays local[2]
    )
    log = tmp_path / "spark-submit.log"
    pycache = tmp_path / "pycache"
    submit = _submit(standalone, archive, write_pipeline(tmp_path, doc), log, pycache)
    try:
        if kill:
            eventually(lambda: _target_count(clusters, t) >= 2_500, expected=True, timeout=150)
            executors = _executor_jvms(worker_dir)
            assert len(executors) == 1, executors
            produce(clusters.source, t, _records(2_500, 2_500))
            executors[0].kill()
        src = read_all(clusters.source, t)
        eventually(lambda: _target_count(clusters, t) >= 5_000, expected=True, timeout=150)
        # Evidence taken while the executors run (they end with the application).
        loaded = eventually(lambda: _loaded_librdkafka(_executor_pythons(worker_dir)))
        with socket.create_connection(("127.0.0.1", control_port), timeout=5):
            pass
        pythons = _executor_pythons(worker_dir)
    finally:
        try:
            if submit.poll() is None:
                _stop_driver(submit, log)
        finally:
            if submit.poll() is None:  # the clean stop failed: leave nothing running
                os.killpg(submit.pid, signal.SIGKILL)
                submit.wait(30)
    assert pythons
    assert f"Spark started (master {standalone[0]})" in log.read_text()  # not local[2]
    assert all(p.info["cmdline"][0] == "./env/bin/python" for p in pythons), [
        p.info["cmdline"] for p in pythons
    ]
    for cwd, path in loaded:
        assert path.startswith(f"{cwd}/env/"), path
        assert not path.startswith(sys.prefix), path
    if kill:  # the killed executor's directory, and its replacement's
        assert len(list(worker_dir.glob("app-*/*/stderr"))) >= 2
    # Every module the executors imported from a source file, by the file's path: k2k's
    # among them from the unpacked archive, and nothing from this project.
    imported = [str(p.relative_to(pycache)) for p in pycache.rglob("*.pyc")]
    archive_k2k = f"{str(worker_dir).lstrip('/')}/app-"
    assert any(
        p.startswith(archive_k2k) and "/env/lib/" in p and "/k2k/pipeline/task/runner." in p
        for p in imported
    ), imported
    project = [sys.prefix, str(Path(k2k.__file__).parent)]
    assert not [p for p in imported if p.startswith(tuple(d.lstrip("/") for d in project))]
    dst = read_all(clusters.target, t)
    assert {p: [r.content() for r in rs] for p, rs in dst.items()} == {
        p: [r.content() for r in rs] for p, rs in src.items()
    }
    if mode == "exactly-once":  # transaction markers take offsets: evidence of transactions
        assert any(rs and rs[-1].offset >= len(rs) for rs in dst.values())
