"""What k2k logs at which level: -v, librdkafka's lines, Spark's output."""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from k2k.cli import main
from k2k.cli.logsetup import setup_logging
from k2k.cli.start import _with_spark_conf
from k2k.config import load_pipeline
from k2k.kafka.factory import build_admin, build_consumer, build_producer
from k2k.local import free_port
from k2k.spark.session import JvmOutput, spark_settings

_LOGGERS = ("", "k2k", "k2k.librdkafka", "k2k.spark", "py4j")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """setup_logging configures the process's logging: put it back after each test."""
    saved = {name: logging.getLogger(name).level for name in _LOGGERS}
    handlers = list(logging.getLogger().handlers)
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger().handlers[:] = handlers


def _levels() -> tuple[int, int]:
    return logging.getLogger("k2k").level, logging.getLogger("k2k.librdkafka").level


@pytest.mark.parametrize(
    ("args", "k2k_level", "client_level"),
    [
        ([], logging.INFO, logging.WARNING),
        (["-v"], logging.DEBUG, logging.WARNING),
        (["-vv"], logging.DEBUG, logging.DEBUG),
    ],
)
def test_start_verbosity_sets_k2k_and_librdkafka_levels(
    tmp_path: Path, args: list[str], k2k_level: int, client_level: int
) -> None:
    """``k2k start`` logs k2k's INFO lines by default; -v is DEBUG; -vv adds librdkafka's."""
    missing = tmp_path / "missing.yaml"  # the command stops after setting up logging
    result = CliRunner().invoke(main, ["start", *args, "-f", str(missing)])
    assert result.exit_code != 0
    assert _levels() == (k2k_level, client_level)


def test_other_commands_log_warnings_unless_verbose() -> None:
    setup_logging(0)
    assert _levels() == (logging.WARNING, logging.WARNING)
    setup_logging(1)
    assert _levels() == (logging.INFO, logging.WARNING)
    setup_logging(3)
    assert _levels() == (logging.DEBUG, logging.DEBUG)
    ours = [h for h in logging.getLogger().handlers if h.get_name() == "k2k"]
    assert len(ours) == 1  # a second call replaces its handler instead of adding one


def test_spark_log_level_option_names_the_levels() -> None:
    result = CliRunner().invoke(main, ["start", "--help"])
    assert "--spark-log-level" in result.output
    assert "ERROR" in result.output and "INFO" in result.output
    bad = CliRunner().invoke(main, ["start", "--spark-log-level", "LOUD", "-f", "x.yaml"])
    assert bad.exit_code == 2 and "LOUD" in bad.output


def test_spark_log_level_option_reaches_spark_and_its_jvms(tmp_path: Path) -> None:
    """The option becomes Spark's own ``spark.log.level`` and the level k2k starts the JVMs
    at; without it Spark logs errors only."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\n"
        "source: {kafka: {common: {bootstrap.servers: 'a:1'}}}\n"
        "target: {kafka: {common: {bootstrap.servers: 'b:1'}}}\n"
        "replication: [{source: {topic: t}}, {sink: {topic: source, partition: source}}]\n"
    )
    cfg = load_pipeline([path])
    assert spark_settings(cfg.spark.conf)["spark.log.level"] == "ERROR"
    settings = spark_settings(_with_spark_conf(cfg, "spark.log.level", "INFO").spark.conf)
    assert settings["spark.log.level"] == "INFO"
    assert "-Dk2k.spark.logLevel=INFO" in settings["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=" in settings["spark.driver.extraJavaOptions"]
    # The file is the driver's: executors on other machines keep their own configuration.
    assert "spark.executor.extraJavaOptions" not in settings


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_client_connection_failures_are_debug_lines_never_raw_stderr(
    kind: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every client the factory builds hands librdkafka's lines to Python logging; a
    connection failure is a DEBUG line of ``k2k.librdkafka``, and nothing reaches stderr."""
    caplog.set_level(logging.DEBUG, "k2k.librdkafka")
    conf = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    if kind == "producer":
        client = build_producer(conf)
        client.produce("t", b"v")
    elif kind == "consumer":
        client = build_consumer({**conf, "group.id": "g"})
        client.subscribe(["t"])
    else:
        client = build_admin(conf)
        client.describe_cluster(request_timeout=2)  # something to connect for
    deadline = time.monotonic() + 10
    while not _failures(caplog) and time.monotonic() < deadline:
        client.poll(0.2)
    failures = _failures(caplog)
    assert failures and {r.levelno for r in failures} == {logging.DEBUG}
    assert "Connection refused" in failures[0].getMessage()
    assert "FAIL|" not in capfd.readouterr().err


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "k2k.librdkafka" and r.getMessage().startswith("FAIL")
    ]


def test_spark_output_keeps_levels_and_drops_the_banner(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "k2k.spark")
    stderr = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b'Setting default log level to "WARN".\n'
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel.\n"
        b"12:00:01 INFO SparkContext: Running Spark version 4.0.0\n"
        b"12:00:02 ERROR Executor: Exception in task 0.0\n"
        b"java.lang.RuntimeException: boom\n"
        b"\tat org.apache.spark.Foo(Foo.scala:1)\n"
        b"\n"
        b"source t[0]: Broker: Not leader for partition (retrying)\n"
    )
    JvmOutput(stderr).run()  # reads to the end, in this thread
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "k2k.spark"] == [
        (logging.INFO, "SparkContext: Running Spark version 4.0.0"),
        (logging.ERROR, "Executor: Exception in task 0.0"),
        (logging.ERROR, "java.lang.RuntimeException: boom"),
        (logging.ERROR, "\tat org.apache.spark.Foo(Foo.scala:1)"),
        (logging.WARNING, "source t[0]: Broker: Not leader for partition (retrying)"),
    ]
