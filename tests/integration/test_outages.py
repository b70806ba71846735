"""A running pipeline rides out a target outage in exactly-once mode (it used to exit when
a transaction could not complete), and ``errorHandling.maxOutage`` bounds the wait."""

from __future__ import annotations

import re

import pytest

from k2k.errors import K2KError
from tests.integration.conftest import BASE_TS, committed_progress, pipeline_dict, write_pipeline
from tests.integration.procs import K2KProcess
from tests.kafkautil import create_topic, eventually, produce, read_all

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_BATCH = 2_000


def _records(first: int, count: int) -> list:
    return [
        (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], BASE_TS + i)
        for i in range(first, first + count)
    ]


def test_exactly_once_rides_out_a_target_outage_longer_than_the_transaction_timeout(
    clusters, own_target, tmp_path, topic_name
):
    """The target is stopped for longer than transaction.timeout.ms (60 s) while records
    keep arriving: the lease fails, k2k waits for the target and plans again, and in the
    end the target holds every source record exactly once (read_committed), in order."""
    t = topic_name("eos-outage")
    name = topic_name("peos-outage")
    target = own_target.bootstrap
    create_topic(clusters.source, t, PARTITIONS)
    produce(clusters.source, t, _records(0, PER_BATCH))
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        target={"kafka": {"common": {"bootstrap.servers": target}}},
        features={"exactlyOnce": "enabled"},
    )
    commit_topic = doc["coordination"]["commit"]["topic"]

    def committed_total() -> int:
        return sum(committed_progress(target, commit_topic, name).values())

    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        eventually(committed_total, PER_BATCH, timeout=180, interval=0.5, ignore=(K2KError,))
        own_target.stop()
        produce(clusters.source, t, _records(PER_BATCH, PER_BATCH))  # arrives during the outage
        # The open transaction cannot complete: the lease fails and k2k waits.
        eventually(lambda: "replication paused" in proc.output(), timeout=240, interval=1)
        assert proc.proc.poll() is None, proc.output()[-3000:]
        own_target.start(timeout=120)
        eventually(committed_total, 2 * PER_BATCH, timeout=240, interval=0.5, ignore=(K2KError,))
        assert "replicating again after" in proc.output(), proc.output()[-3000:]
        assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()

    src, dst = read_all(clusters.source, t), read_all(target, t)
    for p in range(PARTITIONS):
        assert [r.content() for r in dst[p]] == [r.content() for r in src[p]], p
    assert sum(len(v) for v in dst.values()) == 2 * PER_BATCH
    assert committed_progress(target, commit_topic, name) == {
        (t, p): len(src[p]) for p in range(PARTITIONS)
    }


def test_max_outage_bounds_the_wait_with_a_one_line_error(
    clusters, own_target, tmp_path, topic_name
):
    """At-least-once with ``errorHandling.maxOutage: 20 seconds``: a target that stays down
    ends the run with exit 1 and one line naming the setting; what was committed stays."""
    t = topic_name("bounded")
    name = topic_name("pbounded")
    target = own_target.bootstrap
    create_topic(clusters.source, t, PARTITIONS)
    produce(clusters.source, t, _records(0, PER_BATCH))
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        target={"kafka": {"common": {"bootstrap.servers": target}}},
        errorHandling={"maxOutage": "20 seconds"},
        spark={"leaseDuration": "20 seconds"},
    )
    commit_topic = doc["coordination"]["commit"]["topic"]
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        eventually(
            lambda: sum(committed_progress(target, commit_topic, name).values()),
            PER_BATCH,
            timeout=180,
            interval=0.5,
            ignore=(K2KError,),
        )
        own_target.stop()
        produce(clusters.source, t, _records(PER_BATCH, PER_BATCH))
        code = proc.proc.wait(300)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    out = proc.output()
    assert code == 1, out[-3000:]
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, out[-3000:]
    assert re.search(r"gave up after .* \(errorHandling\.maxOutage 20 s\)", errors[0]), errors[0]
    assert "Traceback" not in out
    own_target.start(timeout=120)
    assert committed_progress(target, commit_topic, name) == {
        (t, p): PER_BATCH // PARTITIONS for p in range(PARTITIONS)
    }
