"""Runtime faults: bounded, named, one line, non-zero exit, no traceback, nothing lost."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from k2k.errors import K2KError
from k2k.local import LocalCluster, free_port
from tests.helpers.kafka import create_topic, eventually, list_topics, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    committed_progress,
    k2k_cli,
    pipeline_dict,
    write_pipeline,
)

pytestmark = pytest.mark.integration


def _fails_with(tmp_path, doc, *needles, within_s: float = 60):
    path = write_pipeline(tmp_path, doc)
    started = time.monotonic()
    result = k2k_cli("start", "--until-caught-up", "-f", str(path), timeout=within_s + 30)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert elapsed < within_s
    return lines[0]


@pytest.mark.parametrize("cluster", ["source", "target"])
def test_unreachable_cluster_fails_within_connect_timeout_naming_it(
    clusters, tmp_path, topic_name, cluster
):
    dead = f"127.0.0.1:{free_port()}"
    doc = pipeline_dict(clusters, topic_name("punreach"), ["x"])
    doc[cluster]["kafka"]["common"]["bootstrap.servers"] = dead
    doc[cluster]["connectTimeout"] = "3 seconds"
    _fails_with(tmp_path, doc, f"{cluster} cluster unreachable at {dead}", within_s=20)


def test_missing_target_topic_without_auto_create(clusters, tmp_path, topic_name):
    t = topic_name("notarget")
    create_topic(clusters.source, t, 1)
    doc = pipeline_dict(
        clusters, topic_name("pnotarget"), [t], features={"autoCreateTopics": "disabled"}
    )
    _fails_with(tmp_path, doc, f"target topic '{t}'", "missing", "autoCreateTopics")
    assert t not in list_topics(clusters.target)


def test_target_topic_with_too_few_partitions(clusters, tmp_path, topic_name):
    """Without ``autoCreateTopics`` k2k does not grow a target topic (with it, it does:
    test_topic_lifecycle.py)."""
    t = topic_name("fewparts")
    create_topic(clusters.source, t, 4)
    create_topic(clusters.target, t, 2)
    doc = pipeline_dict(
        clusters, topic_name("pfew"), [t], features={"autoCreateTopics": "disabled"}
    )
    _fails_with(
        tmp_path,
        doc,
        f"target topic '{t}' has 2 partitions",
        "features.autoCreateTopics: enabled",
        "partition: hash",
    )


def test_missing_control_topic_without_auto_create(clusters, tmp_path, topic_name):
    name = topic_name("pnoctl")
    doc = pipeline_dict(clusters, name, ["x"], features={"autoCreateControlTopics": "disabled"})
    _fails_with(
        tmp_path,
        doc,
        f"control topic '__k2k_progress-{name}'",
        "coordination.commit.topic",
        "autoCreateControlTopics",
    )


def test_control_topic_that_is_not_compacted(clusters, tmp_path, topic_name):
    name = topic_name("pdelete")
    create_topic(clusters.target, f"__k2k_progress-{name}", 1, config={"cleanup.policy": "delete"})
    doc = pipeline_dict(clusters, name, ["x"])
    _fails_with(tmp_path, doc, "cleanup.policy='delete'", "compact")


def test_assignment_topic_created_without_the_brokers_clock(clusters, tmp_path, topic_name):
    """Members' liveness compares assignment records' timestamps: a pre-created assignment
    topic keeping producers' timestamps (CreateTime) is refused with the fix, not used."""
    name = topic_name("pclock")
    assignment = f"__k2k_assignment-{name}"
    create_topic(clusters.target, assignment, 1, config={"cleanup.policy": "compact"})
    doc = pipeline_dict(clusters, name, ["x"], coordination={"assignment": {"topic": assignment}})
    _fails_with(
        tmp_path,
        doc,
        f"control topic '{assignment}' (coordination.assignment.topic)",
        "has message.timestamp.type='CreateTime'; expected 'LogAppendTime'",
        f"--entity-name {assignment} --add-config message.timestamp.type=LogAppendTime",
    )


def test_listed_source_topic_that_does_not_exist(clusters, tmp_path, topic_name):
    t = topic_name("nosource")
    doc = pipeline_dict(clusters, topic_name("pnosrc"), [t])
    _fails_with(tmp_path, doc, f"'{t}'", "do not exist on the source cluster")


def test_record_rejected_mid_run_stops_before_it_and_leaves_no_gap(clusters, tmp_path, topic_name):
    """A record the target rejects in the middle of a partition run (it carries no delivery
    callback of its own) still stops the pipeline: progress never passes it and the target
    holds a gap-free prefix of the source partition."""
    t = topic_name("midreject")
    name = topic_name("pmidreject")
    create_topic(clusters.source, t, 1)
    create_topic(clusters.target, t, 1, {"max.message.bytes": "4000"})
    small = [(0, f"k{i}".encode(), b"v" * 100, [], BASE_TS + i) for i in range(400)]
    big = (0, b"big", b"x" * 20_000, [], BASE_TS + 200)
    produce(clusters.source, t, [*small[:200], big, *small[200:]])
    doc = pipeline_dict(clusters, name, [t], coordination={"commit": {"batchSize": 100_000}})
    line = _fails_with(tmp_path, doc, t)
    assert "too large" in line.lower(), line

    committed = committed_progress(clusters.target, f"__k2k_progress-{name}", name)
    assert committed.get((t, 0), 0) <= 200, committed
    copied = read_all(clusters.target, t)[0]
    source = read_all(clusters.source, t)[0]
    assert len(copied) <= 200
    assert [(r.key, r.value) for r in copied] == [(r.key, r.value) for r in source[: len(copied)]]


@pytest.fixture
def frozen_target(tmp_path_factory):
    """A target cluster of its own that the test can freeze (SIGSTOP) and thaw."""
    cluster = LocalCluster("freeze-target", free_port(), tmp_path_factory.mktemp("freeze"))
    cluster.start()
    try:
        yield cluster
    finally:
        if cluster.pid:
            os.kill(cluster.pid, signal.SIGCONT)
        cluster.stop()


def test_commit_batch_not_acknowledged_within_delivery_timeout_fails_the_lease_then_resumes(
    clusters, frozen_target, tmp_path, topic_name, running_pipeline
):
    """Records never expire inside the producer (that would break the gapless guarantee);
    the runner applies the user's delivery timeout to whole commit batches instead. A target
    that stops answering fails the lease in time, naming the uncommitted range, with no
    progress written past it; the pipeline waits for the target and then goes on."""
    t = topic_name("noack")
    name = topic_name("pnoack")
    target = frozen_target.bootstrap
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, f"k{i}".encode(), b"v", [], BASE_TS + i) for i in range(10)])
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        target={
            "kafka": {
                "common": {"bootstrap.servers": target},
                "producer": {"delivery.timeout.ms": "4000"},
            }
        },
    )
    proc = running_pipeline(write_pipeline(tmp_path, doc), {(t, 0): 10}, timeout=90)
    paused = re.compile(
        r"replication paused: the target did not acknowledge a commit batch within 4 s"
    )
    try:
        os.kill(frozen_target.pid, signal.SIGSTOP)
        try:
            produce(
                clusters.source,
                t,
                [(0, f"k{i}".encode(), b"v", [], BASE_TS + i) for i in range(10, 30)],
            )
            eventually(lambda: paused.search(proc.output()), timeout=60, interval=0.5)
        finally:
            os.kill(frozen_target.pid, signal.SIGCONT)
        [line] = [ln for ln in proc.output().splitlines() if paused.search(ln)][:1]
        # From the committed progress to at most the last record read (the epoch still open
        # when the runner gave up may hold the rest).
        uncommitted = re.search(re.escape(f"{t}[0]@") + r"(\d+)\.\.(\d+)", line)
        assert uncommitted, line
        assert int(uncommitted.group(1)) == 10
        assert 10 <= int(uncommitted.group(2)) <= 29
        eventually(
            lambda: committed_progress(target, f"__k2k_progress-{name}", name),
            expected={(t, 0): 30},
            timeout=180,
            interval=0.5,
            ignore=(K2KError,),
        )
        assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    assert "Traceback" not in proc.output()
    # At least once: every source record, in source order apart from replayed runs.
    keys = [r.key for r in read_all(target, t)[0]]
    assert set(keys) == {f"k{i}".encode() for i in range(30)}
    assert keys[:10] == [f"k{i}".encode() for i in range(10)]
