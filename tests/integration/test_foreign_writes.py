"""Foreign writes on the target: another producer writes into a replicated target partition
while k2k replicates it.

Scenario: a pipeline replicates a two-partition topic; a foreign producer writes N records
into target partition 0 between two rounds of source records. Proven, at-least-once and
exactly-once: ``k2k status --json`` counts exactly N on partition 0 and none on 1; the
runner warned once for that partition (naming it and the offsets); offset mappings still
translate every replicated record to where it landed (the Offset Mapping app commits a
source group's positions to the target offsets the data shows); and with
``onForeignWrites: fail`` the pipeline stops with one error line and a non-zero exit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from k2k.config.loader import build_offset_mapping_app
from k2k.offsetmapping.app import OffsetMappingApp
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import k2k_cli, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

FOREIGN = 3
WARNING = "foreign writes on the target"


def _source_round(clusters, topic: str, tag: str, n: int, partitions: int = 2) -> None:
    produce(
        clusters.source,
        topic,
        [
            (p, f"{tag}-{p}-{i}".encode(), b"v", None, None)
            for p in range(partitions)
            for i in range(n)
        ],
    )


def _status(path: Path) -> dict[str, Any]:
    result = k2k_cli("status", "-f", str(path), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _foreign_by_partition(path: Path, topic: str) -> dict[int, int]:
    doc = _status(path)
    return {p["partition"]: p["foreignRecords"] for p in doc["partitions"] if p["topic"] == topic}


def _caught_up(clusters, path: Path, topic: str) -> bool:
    ends = {p: len(recs) for p, recs in read_all(clusters.source, topic).items()}
    doc = _status(path)
    return (
        all(
            p["committed"] == ends[p["partition"]] for p in doc["partitions"] if p["topic"] == topic
        )
        and len(doc["partitions"]) == 2
    )


def _pipeline(
    clusters, topic_name, mode: str, policy: str, partitions: int = 2
) -> tuple[dict, str, str]:
    topic, name = topic_name("fw"), topic_name(f"pfw{mode}")
    create_topic(clusters.source, topic, partitions)
    mappings = topic_name("fwmap")
    doc = pipeline_dict(
        clusters,
        name,
        [topic],
        features={"exactlyOnce": mode == "eos", "offsetMapping": "enabled"},
        offsetMapping={"topic": mappings},
        errorHandling={"onForeignWrites": policy},
        spark={"leaseDuration": "10 minutes"},
    )
    return doc, topic, mappings


def _target_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=30)[group].result()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []}


def _assert_mappings_exact(clusters, topic: str, mappings: str, group: str) -> None:
    """A source group at every interesting position of partition 0 (before, at and after
    the foreign records) is translated to the target offset where that record landed."""
    source = read_all(clusters.source, topic)[0]
    landed = {r.key: r.offset for r in read_all(clusters.target, topic)[0]}
    for position in (5, 9, 10, 11, len(source) - 1):
        consumer = Consumer({"bootstrap.servers": clusters.source, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, 0, position)], asynchronous=False)
        consumer.close()
        app_doc = {
            "name": f"{group}-app",
            "source": {"kafka": {"common": {"bootstrap.servers": clusters.source}}},
            "target": {"kafka": {"common": {"bootstrap.servers": clusters.target}}},
            "groups": {"consumerGroups": [group]},
            "offsetMapping": {"topic": mappings},
        }
        OffsetMappingApp(build_offset_mapping_app(app_doc)).run(once=True)
        expected = landed[source[position].key]
        assert _target_offsets(clusters.target, group)[(topic, 0)] == expected, position


@pytest.mark.parametrize("mode", ["alo", "eos"])
def test_foreign_records_are_counted_warned_once_and_mappings_stay_exact(
    clusters, tmp_path, topic_name, group_name, running_pipeline, mode
):
    doc, topic, mappings = _pipeline(clusters, topic_name, mode, "warn")
    path = write_pipeline(tmp_path, doc)
    _source_round(clusters, topic, "a", 10)
    proc = running_pipeline(path, {(topic, 0): 10, (topic, 1): 10})

    foreign = [(0, f"foreign-{i}".encode(), b"f", None, None) for i in range(FOREIGN)]
    offsets = produce(clusters.target, topic, foreign)
    assert [o for _, o in offsets] == list(range(offsets[0][1], offsets[0][1] + FOREIGN))

    # Source records keep coming until the count settled (exactly-once: until this
    # pipeline's own markers around the foreign records are known to be placed).
    rounds = iter(range(1, 40))

    def counted() -> dict[int, int]:
        _source_round(clusters, topic, f"b{next(rounds)}", 5)
        return _foreign_by_partition(path, topic)

    eventually(counted, {0: FOREIGN, 1: 0}, timeout=120, interval=1.0)
    eventually(lambda: _caught_up(clusters, path, topic), True, timeout=60, interval=0.5)
    assert proc.stop() == 0
    assert _foreign_by_partition(path, topic) == {0: FOREIGN, 1: 0}

    warnings = [ln for ln in proc.output().splitlines() if WARNING in ln]
    assert len(warnings) == 1, warnings
    assert f"on {topic}[0] between target offsets" in warnings[0]
    assert "errorHandling.onForeignWrites: warn" in warnings[0]

    # Every source record is on the target once, in order, and the foreign ones beside them.
    src, dst = read_all(clusters.source, topic), read_all(clusters.target, topic)
    for p in (0, 1):
        mine = [r.key for r in dst[p] if not r.key.startswith(b"foreign-")]
        assert mine == [r.key for r in src[p]]
    assert [r.key for r in dst[0] if r.key.startswith(b"foreign-")] == [k for _, k, *_ in foreign]
    _assert_mappings_exact(clusters, topic, mappings, group_name("fwgroup"))


def test_fail_stops_with_one_line_naming_the_partition(
    clusters, tmp_path, topic_name, running_pipeline
):
    # One partition, so one runner: the lease ends when it fails (another runner would
    # copy on until the lease's end, as after any runner fault).
    doc, topic, _ = _pipeline(clusters, topic_name, "alo", "fail", partitions=1)
    path = write_pipeline(tmp_path, doc)
    _source_round(clusters, topic, "a", 10, partitions=1)
    proc = running_pipeline(path, {(topic, 0): 10})
    produce(clusters.target, topic, [(0, b"foreign", b"f", None, None)])
    _source_round(clusters, topic, "b", 5, partitions=1)
    code = eventually(lambda: proc.proc.poll(), timeout=120, interval=0.5)
    assert code != 0
    out = proc.output()
    assert "Traceback" not in out
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, out[-3000:]
    assert f"1 record(s) on {topic}[0] between target offsets 10 and 11" in errors[0]
    assert "errorHandling.onForeignWrites: fail" in errors[0]
