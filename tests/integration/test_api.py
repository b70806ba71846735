"""The Python API (``k2k.api``) on real brokers and real Spark: the documented example run as
users run it, a run stopped from another thread and from a signal handler, and status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import k2k
from tests.helpers.kafka import create_topic, end_offsets, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, pipeline_dict

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "embed.py"


def _records(n: int, partitions: int) -> list[tuple]:
    """Keyed records spread over ``partitions``, every third with two headers."""
    return [
        (
            i % partitions,
            f"key-{i % 13}".encode(),
            f"value-{i}".encode(),
            [("seq", str(i).encode()), ("dup", b"x")] if i % 3 == 0 else [],
            BASE_TS + i,
        )
        for i in range(n)
    ]


def _same_records(clusters, topic: str) -> None:
    """Target == source per partition: keys, values, headers (in order), timestamps, order."""
    src, dst = read_all(clusters.source, topic), read_all(clusters.target, topic)
    assert sorted(dst) == sorted(src), topic
    for p, records in src.items():
        assert [r.content() for r in dst[p]] == [r.content() for r in records], f"{topic}[{p}]"


def _positions(status: k2k.PipelineStatus) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """(committed, end) per source partition, from the API's status."""
    return {
        (p["topic"], p["partition"]): (p["committed"], p["end"])
        for p in status.to_json()["partitions"]
    }


def test_documented_example_replicates_record_for_record(clusters, topic_name):
    """examples/embed.py (the code docs/api.md shows) in a process of its own, as a user
    runs it: its own Spark driver, its clusters from the environment through placeholders."""
    a, b = topic_name("ex-a"), topic_name("ex-b")
    create_topic(clusters.source, a, 3)
    create_topic(clusters.source, b, 1)
    produce(clusters.source, a, _records(600, 3))
    produce(clusters.source, b, _records(50, 1))
    name = topic_name("pex")

    result = subprocess.run(
        [sys.executable, str(EXAMPLE), name, a, b],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "K2K_SOURCE_BOOTSTRAP": clusters.source,
            "K2K_TARGET_BOOTSTRAP": clusters.target,
        },
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "replicated 650 records"
    assert (
        lines[1] == f"{name}: 650 source records in 4 partitions of 2 topic(s) compared: all match"
    )
    assert sorted(lines[2:]) == sorted(
        [f"{a}[{p}]: committed 200 of 200" for p in range(3)] + [f"{b}[0]: committed 50 of 50"]
    )
    _same_records(clusters, a)
    _same_records(clusters, b)


def test_stop_from_another_thread_commits_and_a_second_run_copies_nothing(
    clusters, spark, topic_name
):
    t = topic_name("thr")
    name = topic_name("pthr")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(2000, 2))
    config = k2k.load_pipeline(pipeline_dict(clusters, name, [t]))
    replicator = k2k.Replicator(config, spark=spark, instance="api-thread")

    assert _positions(replicator.status()) == {(t, 0): (None, 1000), (t, 1): (None, 1000)}
    replicator.start()  # continuous: only stop() ends it
    try:
        eventually(
            lambda: _positions(replicator.status()),
            {(t, 0): (1000, 1000), (t, 1): (1000, 1000)},
            timeout=180,
            interval=0.5,
        )
        assert replicator.running
    finally:
        started = time.monotonic()
        replicator.stop()
        stats = replicator.join(timeout=60)
    assert time.monotonic() - started < 30
    assert not replicator.running
    assert stats.records == 2000 and stats.lag == 0
    _same_records(clusters, t)

    after = replicator.status().to_json()
    assert [(m["member"], m["state"]) for m in after["members"]] == [("api-thread", "left")]
    assert all(p["owner"]["released"] for p in after["partitions"])
    assert all(p["committedBy"] == "api-thread" for p in after["partitions"])
    with pytest.raises(RuntimeError, match="runs once"):
        replicator.run()

    ends = end_offsets(clusters.target, t)
    again = k2k.Replicator(config, spark=spark).run(until_caught_up=True)
    assert again.records == 0
    assert end_offsets(clusters.target, t) == ends


def test_stop_from_a_signal_handler_while_run_blocks_the_main_thread(clusters, spark, topic_name):
    """A real signal delivered while run() blocks: the handler's stop() must neither
    deadlock the interrupted thread nor lose the last batch."""
    assert threading.current_thread() is threading.main_thread()
    t = topic_name("sig")
    name = topic_name("psig")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, _records(500, 1))
    replicator = k2k.Replicator(k2k.load_pipeline(pipeline_dict(clusters, name, [t])), spark=spark)

    def handler(_signum, _frame) -> None:
        replicator.stop()

    failures: list[AssertionError] = []

    def signal_when_copied() -> None:
        try:
            eventually(
                lambda: _positions(replicator.status()),
                {(t, 0): (500, 500)},
                timeout=180,
                interval=0.5,
            )
        except AssertionError as exc:
            failures.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGUSR1)  # also after a failure, so that run() returns

    previous = signal.signal(signal.SIGUSR1, handler)
    sender = threading.Thread(target=signal_when_copied, daemon=True)
    try:
        sender.start()
        stats = replicator.run()  # continuous: only the handler's stop() ends it
    finally:
        signal.signal(signal.SIGUSR1, previous)
    sender.join(5)
    assert not failures, failures
    assert stats.records == 500
    assert _positions(replicator.status()) == {(t, 0): (500, 500)}
    _same_records(clusters, t)


def test_a_spark_session_the_program_runs_is_joined_and_left_running(clusters, spark, topic_name):
    """No ``spark=`` given while the process runs a SparkContext (the tests' shared one, as
    an embedding Spark application would): the run and verify() join it, stop nothing."""
    t = topic_name("join")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(100, 2))
    replicator = k2k.Replicator(k2k.load_pipeline(pipeline_dict(clusters, topic_name("pj"), [t])))

    assert replicator.run(until_caught_up=True).records == 100
    assert replicator.verify().ok

    assert spark.sparkContext.parallelize(range(10), 2).sum() == 45  # still running
    _same_records(clusters, t)
