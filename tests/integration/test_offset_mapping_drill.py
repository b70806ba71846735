"""Failover drills: consumer groups stopped at random positions on the source continue on the
target, after `k2k offset-mapping start --once`, with exactly the records they had not read.

Real brokers, real Spark, the real CLI for the app. Source topics cover every way offsets
shift: a plain topic, a transactional topic with aborted transactions, a compacted topic,
records already on the target, and (second test) a replicator killed with SIGKILL in the
middle and prefix routing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.helpers.eos import mixed_workload
from tests.helpers.groups import commit_random_positions, failover_reads
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    committed_progress,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

GROUPS = 3


def _compacted_with_gaps(bootstrap: str, topic: str) -> None:
    """A compacted topic whose log has lost overwritten records (offset gaps)."""
    create_topic(
        bootstrap,
        topic,
        2,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    seq = 0
    for _ in range(6):
        batch = []
        for _ in range(200):
            batch.append((seq % 2, b"key-%d" % (seq % 37), b"c-%d" % seq, None, BASE_TS + seq))
            seq += 1
        produce(bootstrap, topic, batch)
        time.sleep(0.2)  # let a segment roll (segment.ms), so the cleaner has work

    def compacted() -> bool:
        produce(
            bootstrap,
            topic,
            [(p, b"roll", b"roll-%d" % time.time_ns(), None, None) for p in (0, 1)],
        )
        recs = read_all(bootstrap, topic)
        return all(len(rs) < rs[-1].offset + 1 for rs in recs.values())

    eventually(compacted, expected=True, timeout=120, interval=1.0)


def _app_file(tmp_path: Path, clusters, name: str, groups: list[str], mapping_topic: str) -> Path:
    doc = {
        "name": f"{name}-app",
        "license": {"acceptEula": True},
        "features": {"autoCreateControlTopics": "enabled"},
        "source": {"kafka": {"common": {"bootstrap.servers": clusters.source}, "admin": None}},
        "target": {"kafka": {"common": {"bootstrap.servers": clusters.target}}},
        "groups": {"pollInterval": "1 second", "consumerGroups": groups},
        "offsetMapping": {"topic": mapping_topic},
    }
    return write_pipeline(tmp_path, doc, "offset-mapping.yaml")


def test_groups_fail_over_exactly_after_exactly_once_replication(
    spark, clusters, tmp_path, topic_name, group_name
):
    name = topic_name("omx")
    plain, txn, compacted = topic_name("om-plain"), topic_name("om-txn"), topic_name("om-cmp")
    create_topic(clusters.source, plain, 3)
    produce(
        clusters.source,
        plain,
        [(i % 3, b"k%d" % i, b"plain-%d" % i, None, BASE_TS + i) for i in range(3000)],
    )
    create_topic(clusters.source, txn, 2)
    mixed_workload(clusters.source, txn, 3000, 2, chunk=150, txn_share=0.6)
    _compacted_with_gaps(clusters.source, compacted)
    topics = [plain, txn, compacted]
    # Records already on the target shift every target offset away from the source's.
    for t, n in ((plain, 3), (txn, 2), (compacted, 2)):
        create_topic(clusters.target, t, n)
        produce(clusters.target, t, [(p, b"old", b"old-%d" % p, None, None) for p in range(n)] * 4)
    groups = [group_name(f"om{i}") for i in range(GROUPS)]
    positions = commit_random_positions(clusters.source, groups, topics, seed=14)

    mapping_topic = f"__k2k_maps-{name}"
    doc = pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled", "offsetMapping": "enabled"},
        offsetMapping={"topic": mapping_topic},
    )
    run_until_caught_up(spark, tmp_path, doc)
    app = _app_file(tmp_path, clusters, name, groups, mapping_topic)
    result = k2k_cli("offset-mapping", "start", "--once", "-f", str(app))
    assert result.returncode == 0, result.stderr

    for group in groups:
        expected, skipped, again = failover_reads(clusters, group, positions[group], str)
        assert (skipped, again) == (0, 0), f"{group}: {skipped} skipped, {again} read again"
        assert expected > 0


@pytest.mark.parametrize("eos", [False, True], ids=["at-least-once", "exactly-once"])
def test_groups_fail_over_after_a_kill_9_with_prefix_routing(
    clusters, tmp_path, topic_name, group_name, eos
):
    name = topic_name("omk")
    topic = topic_name("om-kill")
    create_topic(clusters.source, topic, 3)
    mapping_topic = f"__k2k_maps-{name}"
    doc = pipeline_dict(
        clusters,
        name,
        [topic],
        features={"exactlyOnce": "enabled" if eos else "disabled", "offsetMapping": "enabled"},
        offsetMapping={"topic": mapping_topic},
        # Progress every second at most: a kill leaves records after it, copied again.
        coordination={"commit": {"batchSize": 5000, "batchTimeout": "1 second"}},
    )
    doc["replication"][1]["sink"]["topic"] = {"prefix": "dr."}
    path = write_pipeline(tmp_path, doc)
    commit_topic = doc["coordination"]["commit"]["topic"]
    total, chunks = 40_000, 400
    killed = threading.Event()

    def steady_producer() -> None:
        """Chunks of records (at most ``total``) until ten chunks after the kill: it lands
        while they flow, and records follow the progress it left."""
        after_kill = 0
        for chunk in range(chunks):
            after_kill += killed.is_set()
            if after_kill > 10:
                return
            base = chunk * (total // chunks)
            rows = range(base, base + total // chunks)
            produce(
                clusters.source,
                topic,
                [(i % 3, b"k%d" % i, b"v-%d" % i, None, BASE_TS + i) for i in rows],
            )
            time.sleep(0.05)  # pacing the load generator, not synchronisation

    writer = threading.Thread(target=steady_producer)
    writer.start()
    proc = K2KProcess(path, tmp_path / "first.log")
    try:
        eventually(
            lambda: sum(committed_progress(clusters.target, commit_topic, name).values()) > 3_000,
            expected=True,
            timeout=180,
            interval=0.2,
        )
    finally:
        proc.kill()
        killed.set()
        writer.join()
    at_kill = committed_progress(clusters.target, commit_topic, name)
    result = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    copies = [r.value for rs in read_all(clusters.target, f"dr.{topic}").values() for r in rs]
    print(f"{len(copies) - len(set(copies))} records copied twice")

    groups = [group_name(f"omk{i}") for i in range(GROUPS)]
    # The first group stops just past the progress of the kill: at-least-once, the records
    # there were copied twice, and the group must continue on the newest copy.
    just_past = {tp: o + 5 for tp, o in at_kill.items()}
    positions = commit_random_positions(clusters.source, groups, [topic], 15, just_past)
    app = _app_file(tmp_path, clusters, name, groups, mapping_topic)
    result = k2k_cli("offset-mapping", "start", "--once", "-f", str(app))
    assert result.returncode == 0, result.stderr

    for group in groups:
        expected, skipped, again = failover_reads(
            clusters, group, positions[group], lambda t: f"dr.{t}"
        )
        assert skipped == 0, f"{group}: {skipped} of {expected} records skipped"
        if eos or group == groups[0]:
            assert again == 0, f"{group}: {again} records read again"
        print(f"{group}: {expected} records to read, {again} read again")
