"""A runner whose driver is gone stops writing at once and commits nothing more, on real
brokers: Spark does not always kill a dead driver's Python workers, and one left copying
would interleave with the restarted run's writes (k2k.pipeline.channel).

The runner runs in-process here (no Spark), so the test can end its driver on cue.
"""

from __future__ import annotations

import threading
import time

import pytest

from k2k.pipeline.channel import LeaseControl
from k2k.pipeline.plan import PartitionRange, RunnerGroup, RunnerSummary
from k2k.pipeline.task.runner import Runner
from k2k.stages import SourcePartition, TopicPlan
from tests.helpers.inprocess import inprocess_spec
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import committed_progress

pytestmark = pytest.mark.integration

PARTITIONS = 2


def _steady_source(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """Chunks of 500 records per partition until ``stop``; keys number them in order."""
    chunk = 0
    while not stop.is_set():
        produce(
            bootstrap,
            topic,
            [
                (p, b"%06d-%03d" % (chunk, i), b"v" * 100, None, None)
                for p in range(PARTITIONS)
                for i in range(500)
            ],
        )
        chunk += 1
        time.sleep(0.05)


@pytest.mark.parametrize("ending", ["closed", "replaced"])
def test_runner_stops_without_committing_once_its_driver_is_gone(clusters, topic_name, ending):
    source, target, name = topic_name("gone-src"), topic_name("gone-dst"), topic_name("gone")
    create_topic(clusters.source, source, PARTITIONS)
    create_topic(clusters.target, target, PARTITIONS)
    driver = LeaseControl("127.0.0.1")
    plans = {source: TopicPlan(source, target, SourcePartition(), True, True, None)}
    spec = inprocess_spec(
        clusters, name, plans, batch_timeout_s=0.1, lease_s=300, control=driver.address
    )
    commit_topic = spec.control_topics.commit_topic
    ranges = tuple(PartitionRange(source, p, 0, None, False) for p in range(PARTITIONS))
    summaries: list[RunnerSummary] = []
    runner = threading.Thread(
        target=lambda: summaries.append(Runner(spec, RunnerGroup(0, ranges)).run()), daemon=True
    )
    writing = threading.Event()
    producer = threading.Thread(
        target=_steady_source, args=(clusters.source, source, writing), daemon=True
    )
    producer.start()
    runner.start()
    try:
        eventually(lambda: sum(map(len, read_all(clusters.target, target).values())) >= 5000)
        driver.close()
        gone_at = time.monotonic()
        if ending == "replaced":  # a restarted driver on a fixed spark.controlPort
            driver = LeaseControl("127.0.0.1", port=driver.port)
        runner.join(30)
        assert not runner.is_alive()
        assert time.monotonic() - gone_at < 10
        [summary] = summaries
        assert summary.error_class == "DriverGone", summary.error
        assert "refuses this runner" in (summary.error or "")
        # Nothing reaches the target after the runner returned, while the source grows on.
        copied = {p: len(r) for p, r in read_all(clusters.target, target).items()}
        time.sleep(2.0)  # the window in which a zombie would keep writing
        assert {p: len(r) for p, r in read_all(clusters.target, target).items()} == copied
    finally:
        writing.set()
        producer.join(30)
        driver.close()
    # The target holds each partition's source records in order from the start, and the
    # committed progress never covers a record it lacks.
    src, dst = read_all(clusters.source, source), read_all(clusters.target, target)
    progress = committed_progress(clusters.target, commit_topic, name)
    for p in range(PARTITIONS):
        keys = [r.key for r in dst[p]]
        assert keys == [r.key for r in src[p][: len(keys)]]
        assert progress.get((source, p), 0) <= len(keys)
