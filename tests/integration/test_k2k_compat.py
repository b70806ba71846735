"""Lenses K2K users' files and launch lines on real brokers: the termination log, K2K's
topicCreation layout, producer-defined partitioning and topic exclusion."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from k2k.kafka.murmur2 import murmur2_partition
from tests.helpers.kafka import create_topic, list_topics, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)

pytestmark = pytest.mark.integration


def topic_shape(bootstrap: str, topic: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, the topic's own configs) as the broker reports them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic=topic, timeout=30).topics[topic]
    replicas = {len(p.replicas) for p in meta.partitions.values()}
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=30)[resource].result()
    own = {n: e.value for n, e in entries.items() if not e.is_default and e.value is not None}
    return len(meta.partitions), replicas.pop(), own


def placement(recs_by_partition) -> dict[bytes, int]:
    """Key -> the partition its records are in (asserting one partition per key)."""
    seen: dict[bytes, set[int]] = {}
    for p, recs in recs_by_partition.items():
        for r in recs:
            if r.key is not None:
                seen.setdefault(r.key, set()).add(p)
    assert all(len(ps) == 1 for ps in seen.values()), seen
    return {k: ps.pop() for k, ps in seen.items()}


def test_termination_log_holds_the_one_line_reason_of_a_fatal_error(clusters, tmp_path, topic_name):
    """A missing target topic with autoCreateTopics disabled stops the start (exit 1); the
    reason on stderr is what the termination log holds, one line."""
    t = topic_name("nodst")
    create_topic(clusters.source, t, 1)
    doc = pipeline_dict(clusters, topic_name("pterm"), [t])
    doc["features"]["autoCreateTopics"] = "disabled"
    log = tmp_path / "termination-log"
    result = k2k_cli(
        "start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)), "-l", str(log)
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    reason = log.read_text()
    assert reason == errors[0].removeprefix("error: ") + "\n"
    assert f"target topic {t!r} (for source topic {t!r}) is missing" in reason
    assert "features.autoCreateTopics: enabled" in reason
    assert t not in list_topics(clusters.target)  # nothing was created behind our back


def test_k2k_topic_creation_layout_shapes_control_and_replicated_topics(
    clusters, spark, tmp_path, topic_name
):
    """topicCreation.control.{common, offsetMapping} and topicCreation.replicated.common, in
    K2K's spelling, are what the broker shows for the topics k2k creates; a created topic
    keeps its source's own configs under the overrides and its replication factor."""
    t = topic_name("shape")
    create_topic(clusters.source, t, 2, {"retention.ms": "86400000", "segment.bytes": "2097152"})
    produce(clusters.source, t, [(i % 2, f"k{i}", f"v{i}", [], BASE_TS + i) for i in range(40)])
    name = topic_name("ptc")
    commit, assignment, mappings = (f"__k2k-{kind}-{name}" for kind in ("c", "a", "m"))
    creation = {
        "control": {
            "common": {"partitions": 3, "replication": 1, "config": {"segment.ms": "3600000"}},
            "offsetMapping": {"partitions": 2, "config": {"retention.ms": "7200000"}},
        },
        "replicated": {"common": {"partitions": 4, "config": {"retention.ms": "172800000"}}},
    }
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"offsetMapping": "enabled"},
        coordination={"commit": {"topic": commit}, "assignment": {"topic": assignment}},
        offsetMapping={"topic": mappings},
        topicCreation=creation,
    )
    run_until_caught_up(spark, tmp_path, doc)
    for control in (commit, assignment):
        partitions, replicas, own = topic_shape(clusters.target, control)
        assert (partitions, replicas) == (3, 1)
        assert own["cleanup.policy"] == "compact" and own["segment.ms"] == "3600000"
    assert topic_shape(clusters.target, assignment)[2]["message.timestamp.type"] == (
        "LogAppendTime"
    )
    partitions, _, own = topic_shape(clusters.target, mappings)
    assert partitions == 2
    assert (own["cleanup.policy"], own["retention.ms"], own["segment.ms"]) == (
        "delete",
        "7200000",
        "3600000",
    )
    partitions, replicas, own = topic_shape(clusters.target, t)
    assert (partitions, replicas) == (4, 1)  # replication factor mirrored from the source
    assert own["retention.ms"] == "172800000" and own["segment.bytes"] == "2097152"
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    assert {p: [r.content() for r in dst[p]] for p in src} == {
        p: [r.content() for r in recs] for p, recs in src.items()
    }
    assert dst[2] == dst[3] == []  # partition: source leaves the extra partitions empty


KEYS = [b"21", b"foobar", b"abc", b"a-little-bit-long-string"] + [
    f"user-{i}".encode() for i in range(120)
]


@pytest.mark.parametrize("partitioner", [None, "consistent_random"])
def test_producer_partitioning_places_keys_where_the_producers_partitioner_does(
    clusters, spark, tmp_path, topic_name, partitioner
):
    """``partition: producer``: keyed records land where the target producer's partitioner
    puts them: Java's murmur2 by default, or the one set in target.kafka.producer, the very
    placement a plain confluent-kafka producer with that setting chooses. Null-keyed records
    all arrive; each key keeps its order."""
    t = topic_name("prod")
    create_topic(clusters.source, t, 2)
    records = [(i % 2, k, b"v%d" % i, [], BASE_TS + i) for i, k in enumerate(KEYS * 2)]
    records += [(i % 2, None, b"null-%d" % i, [], BASE_TS + 1000 + i) for i in range(30)]
    produce(clusters.source, t, records)
    doc = pipeline_dict(
        clusters, topic_name("pprod"), [t], topicCreation={"replicated": {"partitions": 5}}
    )
    doc["replication"][1]["sink"]["partition"] = "producer"
    if partitioner is not None:
        doc["target"]["kafka"]["producer"] = {"partitioner": partitioner}
    run_until_caught_up(spark, tmp_path, doc)
    dst = read_all(clusters.target, t)
    placed = placement(dst)
    if partitioner is None:
        assert placed == {k: murmur2_partition(k, 5) for k in KEYS}
    else:
        ref = topic_name("ref")
        create_topic(clusters.target, ref, 5)
        produce(clusters.target, ref, [(None, k, b"", [], None) for k in KEYS])  # its default
        assert placed == placement(read_all(clusters.target, ref))
        assert placed != {k: murmur2_partition(k, 5) for k in KEYS}  # CRC32, not murmur2
    values = Counter(r.value for recs in dst.values() for r in recs)
    assert values == Counter(v for _, _, v, _, _ in records)
    for recs in dst.values():
        for key in {r.key for r in recs if r.key is not None}:
            stamps = [r.timestamp for r in recs if r.key == key]
            assert stamps == sorted(stamps)


def test_excluded_topics_are_not_replicated_and_exclude_wins(clusters, spark, tmp_path, topic_name):
    """``replication[].source.exclude`` as a regex and as a list: the topics it names are
    left alone although ``topic`` selects them; the others are copied record for record."""
    base = topic_name("ex")
    kept, by_regex, by_name = f"{base}.keep", f"{base}.test-1", f"{base}.drop"
    for t in (kept, by_regex, by_name):
        create_topic(clusters.source, t, 1)
        produce(clusters.source, t, [(0, b"k", t.encode(), [], BASE_TS)])
    regex = re.escape(base)
    for suffix, exclude in ((".r", f"{regex}\\.test-.*"), (".l", [by_regex, by_name])):
        doc = pipeline_dict(clusters, topic_name("pex"), f"{regex}\\..*")
        doc["replication"][0]["source"]["exclude"] = exclude
        doc["replication"][1]["sink"]["topic"] = {"suffix": suffix}
        run_until_caught_up(spark, tmp_path, doc)
        on_target = {t for t in list_topics(clusters.target) if t.startswith(base)}
        expected = {kept + suffix} | ({by_name + suffix} if isinstance(exclude, str) else set())
        assert {t for t in on_target if t.endswith(suffix)} == expected
        assert [r.value for r in read_all(clusters.target, kept + suffix)[0]] == [kept.encode()]
