"""Record-for-record replication on real brokers and real Spark (at-least-once, no faults)."""

from __future__ import annotations

import random
import re
import time

import pytest

from k2k.kafka.murmur2 import murmur2_partition
from tests.helpers.kafka import create_topic, end_offsets, list_topics, produce, read_all
from tests.helpers.pipelines import BASE_TS, pipeline_dict, run_until_caught_up

pytestmark = pytest.mark.integration


def content(recs):
    """What must survive replication: key, value, headers (in order), timestamp."""
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in recs]


def test_100k_records_two_topics_six_partitions_identical_per_partition(
    clusters, spark, tmp_path, topic_name
):
    rng = random.Random(7)
    topics = [topic_name("orders"), topic_name("payments")]
    for t in topics:
        create_topic(clusters.source, t, 6)
    for t in topics:
        records = []
        for i in range(50_000):
            headers = [("seq", str(i).encode())] if i % 3 else []
            value = rng.randbytes(rng.randint(10, 120))
            records.append((i % 6, f"key-{i % 977}".encode(), value, headers, BASE_TS + i))
        produce(clusters.source, t, records)
    source_topics_before = list_topics(clusters.source)
    source_ends_before = {t: end_offsets(clusters.source, t) for t in topics}
    # Other tests commit offsets on the source as applications do (the failover drills).
    commits_before = _consumer_offsets_ends(clusters.source)

    stats = run_until_caught_up(
        spark, tmp_path, pipeline_dict(clusters, topic_name("p100k"), topics)
    )

    copied = 0
    for t in topics:
        src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
        assert sum(len(v) for v in src.values()) == 50_000
        assert sorted(dst) == list(range(6))
        for p in range(6):
            assert len(dst[p]) == len(src[p]), f"{t}[{p}] count"
            assert content(dst[p]) == content(src[p]), f"{t}[{p}] differs"
            copied += len(dst[p])
    assert copied == 100_000
    assert stats.lag == 0
    # The source is only read: same user topics, same end offsets, and no consumer offsets
    # were committed there during the run. (librdkafka consumers look up their group
    # coordinator, which makes a brand-new cluster create its internal __consumer_offsets.)
    assert list_topics(clusters.source) - {"__consumer_offsets"} == source_topics_before - {
        "__consumer_offsets"
    }
    assert {t: end_offsets(clusters.source, t) for t in topics} == source_ends_before
    assert _consumer_offsets_ends(clusters.source) == commits_before


def _consumer_offsets_ends(bootstrap: str) -> dict[int, int]:
    """The non-empty partitions of the cluster's group-commit log and their end offsets."""
    if "__consumer_offsets" not in list_topics(bootstrap):
        return {}
    ends = end_offsets(bootstrap, "__consumer_offsets", "read_uncommitted")
    return {p: end for p, end in ends.items() if end}


def test_awkward_records_survive_byte_for_byte(clusters, spark, tmp_path, topic_name):
    t = topic_name("awkward")
    create_topic(clusters.source, t, 2, config={"max.message.bytes": "5242880"})
    big = random.Random(1).randbytes(1_000_000)
    many = [(f"h{i}", bytes([i])) for i in range(100)]
    records = [
        (0, None, b"null key", [], BASE_TS + 1),
        (0, b"tombstone-key", None, [], BASE_TS + 2),
        (0, None, None, [], BASE_TS + 3),
        (0, b"no-headers", b"v", [], BASE_TS + 4),
        (0, b"many-headers", b"v", many, BASE_TS + 5),
        (1, b"dup-headers", b"v", [("h", b"1"), ("h", b"2"), ("h", b"1")], BASE_TS + 6),
        (1, b"big", big, [("size", b"1MB")], BASE_TS + 7),
        (
            1,
            b"\xff\x00\xfe\x80",
            b"\x00\xc3\x28\xa0\xa1\xe2\x28\xa1",
            [("bin", b"\xff\xfe\x00")],
            BASE_TS + 8,
        ),
        (1, b"", b"", [("empty", b"")], BASE_TS + 9),
    ]
    produce(clusters.source, t, records, **{"message.max.bytes": 5_000_000})

    run_until_caught_up(spark, tmp_path, pipeline_dict(clusters, topic_name("pawk"), [t]))

    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    for p in (0, 1):
        assert content(dst[p]) == content(src[p])
    assert dst[1][1].value == big
    assert dst[0][1].value is None and dst[0][1].key == b"tombstone-key"
    assert [h for h in dst[1][0].headers] == [("h", b"1"), ("h", b"2"), ("h", b"1")]


def test_headers_dropped_and_timestamps_replaced_when_disabled(
    clusters, spark, tmp_path, topic_name
):
    t = topic_name("nohdr")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"k", b"v", [("h", b"x")], BASE_TS)])
    doc = pipeline_dict(
        clusters,
        topic_name("pnohdr"),
        [t],
        features={"headerReplication": "disabled", "keepRecordCreationTimestamp": "disabled"},
    )
    started_ms = int(time.time() * 1000)
    run_until_caught_up(spark, tmp_path, doc)
    [rec] = read_all(clusters.target, t)[0]
    assert (rec.key, rec.value, list(rec.headers)) == (b"k", b"v", [])
    assert rec.timestamp >= started_ms  # stamped at replication time, not the source's


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        ("source", lambda t: t),
        ({"prefix": "dr."}, lambda t: f"dr.{t}"),
        ({"suffix": ".copy"}, lambda t: f"{t}.copy"),
        ({"prefix": "eu.", "suffix": ".v2"}, lambda t: f"eu.{t}.v2"),
    ],
    ids=["same-name", "prefix", "suffix", "prefix-suffix"],
)
def test_routing_renames_topics(clusters, spark, tmp_path, topic_name, routing, expected):
    t = topic_name("route")
    create_topic(clusters.source, t, 3)
    produce(
        clusters.source,
        t,
        [(i % 3, f"k{i}".encode(), f"v{i}".encode(), [], BASE_TS + i) for i in range(300)],
    )
    doc = pipeline_dict(clusters, topic_name("proute"), [t])
    doc["replication"][1]["sink"]["topic"] = routing
    run_until_caught_up(spark, tmp_path, doc)
    src, dst = read_all(clusters.source, t), read_all(clusters.target, expected(t))
    assert {p: content(r) for p, r in dst.items()} == {p: content(r) for p, r in src.items()}


def test_static_routing_merges_topics_keeping_each_partitions_order(
    clusters, spark, tmp_path, topic_name
):
    a, b, merged = topic_name("a"), topic_name("b"), topic_name("merged")
    create_topic(clusters.source, a, 2)
    create_topic(clusters.source, b, 3)
    produce(
        clusters.source, a, [(i % 2, b"a", f"a{i}".encode(), [], BASE_TS + i) for i in range(200)]
    )
    produce(
        clusters.source, b, [(i % 3, b"b", f"b{i}".encode(), [], BASE_TS + i) for i in range(300)]
    )
    doc = pipeline_dict(clusters, topic_name("pstatic"), [a, b])
    doc["replication"][1]["sink"]["topic"] = merged
    run_until_caught_up(spark, tmp_path, doc)
    dst = read_all(clusters.target, merged)
    assert sorted(dst) == [0, 1, 2]  # created with the largest source partition count
    for src_topic, tag in ((a, b"a"), (b, b"b")):
        for p, recs in read_all(clusters.source, src_topic).items():
            got = [r for r in dst[p] if r.key == tag]
            assert content(got) == content(recs)


def test_explicit_map_routes_listed_topics_and_skips_the_rest(
    clusters, spark, tmp_path, topic_name
):
    a, b = topic_name("mapped"), topic_name("unmapped")
    target = topic_name("renamed")
    for t in (a, b):
        create_topic(clusters.source, t, 1)
        produce(clusters.source, t, [(0, b"k", t.encode(), [], BASE_TS)])
    # A regex selects both; the map routes one. (A *list* naming an unmapped topic is a config error.)
    doc = pipeline_dict(clusters, topic_name("pmap"), f"{re.escape(a)}|{re.escape(b)}")
    doc["replication"][1]["sink"]["topic"] = {"map": {a: target}}
    run_until_caught_up(spark, tmp_path, doc)
    assert [r.value for r in read_all(clusters.target, target)[0]] == [a.encode()]
    assert b not in list_topics(clusters.target)


def test_hash_partitioning_places_keys_like_the_java_client(clusters, spark, tmp_path, topic_name):
    t = topic_name("hash")
    create_topic(clusters.source, t, 1)
    keys = [b"21", b"foobar", b"abc", b"a-little-bit-long-string"] + [
        f"user-{i}".encode() for i in range(200)
    ]
    produce(clusters.source, t, [(0, k, b"v-" + k, [], BASE_TS + i) for i, k in enumerate(keys)])
    doc = pipeline_dict(
        clusters, topic_name("phash"), [t], topicCreation={"replicated": {"partitions": 7}}
    )
    doc["replication"][1]["sink"]["partition"] = "hash"
    run_until_caught_up(spark, tmp_path, doc)
    dst = read_all(clusters.target, t)
    placed = {r.key: p for p, recs in dst.items() for r in recs}
    assert len(placed) == len(keys)
    assert placed == {k: murmur2_partition(k, 7) for k in keys}
    # Known Java placements (Utils.murmur2 vectors, toPositive(h) % 7).
    assert (placed[b"21"], placed[b"foobar"], placed[b"abc"]) == (
        (-973932308 & 0x7FFFFFFF) % 7,
        (-790332482 & 0x7FFFFFFF) % 7,
        479470107 % 7,
    )
    # Per key, order is kept.
    for recs in dst.values():
        assert [r.timestamp for r in recs] == sorted(r.timestamp for r in recs)


def test_tracing_headers_carry_source_coordinates(clusters, spark, tmp_path, topic_name):
    t = topic_name("trace")
    create_topic(clusters.source, t, 2)
    produce(
        clusters.source, t, [(i % 2, b"k", b"v", [("orig", b"1")], BASE_TS + i) for i in range(10)]
    )
    name = topic_name("ptrace")
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"tracingHeaders": "enabled"},
        tracing={
            "headers": {
                "topic": "src-topic",
                "partition": "src-part",
                "offset": "src-off",
                "pipeline": "src-pipe",
            }
        },
    )
    run_until_caught_up(spark, tmp_path, doc)
    src = read_all(clusters.source, t)
    for p, recs in read_all(clusters.target, t).items():
        for r, s in zip(recs, src[p], strict=True):
            assert r.headers == [
                ("orig", b"1"),
                ("src-topic", t.encode()),
                ("src-part", str(p).encode()),
                ("src-off", str(s.offset).encode()),
                ("src-pipe", name.encode()),
            ]


def test_tracing_headers_can_be_chosen_one_by_one(clusters, spark, tmp_path, topic_name):
    t = topic_name("trace1")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"k", b"v", [], BASE_TS)])
    doc = pipeline_dict(
        clusters,
        topic_name("ptrace1"),
        [t],
        features={
            "headerReplication": "disabled",
            "tracingHeaders": {"offset": "enabled", "pipeline": "disabled"},
        },
    )
    run_until_caught_up(spark, tmp_path, doc)
    [rec] = read_all(clusters.target, t)[0]
    assert rec.headers == [("k2k_offset", b"0")]


def test_empty_partitions_get_progress_so_a_latest_reset_skips_nothing_later(
    clusters, spark, tmp_path, topic_name
):
    """With auto.offset.reset=latest, the first run must record where it started, even for
    empty partitions; otherwise the next start would resolve "latest" again and skip the
    records written in between."""
    t = topic_name("latest")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, [(0, b"old", b"before the first start", [], BASE_TS)])
    doc = pipeline_dict(
        clusters,
        topic_name("platest"),
        [t],
        source={"kafka": {"consumer": {"auto.offset.reset": "latest"}}},
    )
    run_until_caught_up(spark, tmp_path, doc)
    assert read_all(clusters.target, t) == {0: [], 1: []}
    produce(clusters.source, t, [(p, b"new", f"p{p}".encode(), [], BASE_TS + 1) for p in (0, 1)])
    run_until_caught_up(spark, tmp_path, doc)
    dst = read_all(clusters.target, t)
    assert [(r.key, r.value) for r in dst[0]] == [(b"new", b"p0")]
    assert [(r.key, r.value) for r in dst[1]] == [(b"new", b"p1")]
