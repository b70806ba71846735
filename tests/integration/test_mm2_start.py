"""``k2k start --mm2``: an MM2 properties file run end to end on the session clusters, and
bad properties refused in one line naming the property."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from k2k.formats.checkpoint import Checkpoint
from tests.helpers.kafka import (
    create_topic,
    eventually,
    list_topics,
    produce,
    read_all,
    when_ready,
)
from tests.helpers.pipelines import BASE_TS, k2k_cli

pytestmark = pytest.mark.integration


def _properties(source: str, target: str, alias: str, topic: str) -> str:
    escaped = topic.replace("-", "\\\\-").replace(".", "\\\\.")
    return f"""\
clusters = {alias}, backup
{alias}.bootstrap.servers = {source}
backup.bootstrap.servers = {target}
{alias}->backup.enabled = true
{alias}->backup.topics = {escaped}
replication.policy.class = org.apache.kafka.connect.mirror.DefaultReplicationPolicy
tasks.max = 2
emit.heartbeats.enabled = false
sync.topic.acls.enabled = false
{alias}.consumer.max.poll.records = 500
backup.offset.flush.interval.ms = 200
"""


def _commit(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = [TopicPartition(topic, p, o) for p, o in positions.items()]
        when_ready(lambda: consumer.commit(offsets=offsets, asynchronous=False))
    finally:
        consumer.close()


def test_start_mm2_replicates_with_alias_names(clusters, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    alias, topic = f"src_{run}", f"mm2-start-{run}"
    create_topic(clusters.source, topic, 3)
    records = [
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], BASE_TS + i)
        for i in range(300)
    ]
    produce(clusters.source, topic, records)
    group, positions = f"app-{run}", {0: 40, 1: 100, 2: 7}  # an application's committed offsets
    _commit(clusters.source, group, topic, positions)
    path = tmp_path / "mm2.properties"
    path.write_text(_properties(clusters.source, clusters.target, alias, topic), encoding="utf-8")

    done = k2k_cli("start", "--mm2", str(path), "--until-caught-up", timeout=400)

    assert done.returncode == 0, done.stderr[-3000:]
    # The properties k2k does not take are warned about, each by name.
    assert f"{alias}.consumer.max.poll.records: left out" in done.stderr
    assert "backup.offset.flush.interval.ms" not in done.stderr  # taken: batchTimeout
    remote = f"{alias}.{topic}"  # DefaultReplicationPolicy's name
    assert remote in list_topics(clusters.target)
    source = read_all(clusters.source, topic)
    copied = eventually(lambda: read_all(clusters.target, remote), timeout=60)
    assert sum(len(recs) for recs in copied.values()) == len(records)
    for partition, recs in source.items():
        assert [r.content() for r in copied[partition]] == [r.content() for r in recs]
    # MM2's checkpoints are on by default: the last pass covers the application's group, and
    # the fresh target topic holds each record at its source offset.
    checkpoints = {
        (c.topic, c.partition): (c.upstream_offset, c.downstream_offset)
        for p, recs in read_all(clusters.target, f"{alias}.checkpoints.internal").items()
        for r in recs
        if (c := Checkpoint.decode(r.key, r.value, "checkpoints", p, r.offset)).group == group
    }
    assert checkpoints == {(remote, p): (o, o) for p, o in positions.items()}


def test_start_mm2_runs_several_flows_one_process_each(clusters, tmp_path: Path) -> None:
    """Two flows into one target (the source cluster under two aliases, one topic each): the
    parent runs a child per flow and exits 0 once both are caught up."""
    run = uuid.uuid4().hex[:8]
    first, second = f"one_{run}", f"two_{run}"
    topics = {first: f"mm2-flow1-{run}", second: f"mm2-flow2-{run}"}
    lines = [
        f"clusters = {first}, {second}, backup",
        f"backup.bootstrap.servers = {clusters.target}",
    ]
    for alias, topic in topics.items():
        create_topic(clusters.source, topic, 2)
        produce(
            clusters.source,
            topic,
            [(i % 2, b"k", f"{alias}-{i}".encode(), [], BASE_TS) for i in range(50)],
        )
        lines += [
            f"{alias}.bootstrap.servers = {clusters.source}",
            f"{alias}->backup.enabled = true",
            f"{alias}->backup.topics = {topic}",
        ]
    path = tmp_path / "mm2.properties"
    path.write_text(
        "\n".join(
            [*lines, "emit.heartbeats.enabled = false", "emit.checkpoints.enabled = false", ""]
        ),
        encoding="utf-8",
    )

    done = k2k_cli(
        "start", "--mm2", str(path), "--until-caught-up", "--clusters", "backup", timeout=600
    )

    assert done.returncode == 0, done.stderr[-3000:]
    for alias, topic in topics.items():
        copied = read_all(clusters.target, f"{alias}.{topic}")
        values = sorted(r.value for recs in copied.values() for r in recs)
        assert values == sorted(f"{alias}-{i}".encode() for i in range(50))


def test_start_mm2_bad_property_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA->B.enabled = true\nA.bootstrap.servers = a:1\n")
    done = k2k_cli("start", "--mm2", str(path), timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"error: {path}: B.bootstrap.servers: missing, expected host:port[,...]\n"
