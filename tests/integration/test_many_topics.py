"""Many topics at start: admin work in chunked requests, and a cluster still settling
waited out rather than fatal.

The scenarios (on the shared test clusters; every topic they create is deleted after):

* 300 source topics of 8 partitions, one record each: ``k2k start`` creates the 300 target
  topics in one request and reads the source's configs and offsets in a few, copies the first
  record quickly and every record exactly (topic, partition, key, value, headers, timestamp);
* a source topic of many partitions created right before ``k2k start``: the start waits
  out the partitions without a leader yet and copies what is written to them;
* the same, at the admin layer: offsets of partitions created a moment ago are waited for,
  and a topic that never shows its partitions fails naming both counts.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from k2k.errors import TopicError
from k2k.kafka.admin import ClusterView
from tests.helpers.kafka import create_topic, eventually
from tests.helpers.pipelines import BASE_TS, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

TOPICS = 300
PARTITIONS = 8
#: Start to first copied record, for TOPICS x PARTITIONS on a shared two-core test machine
#: (Python and Spark start-up included; docs/benchmarks.md has the measured figures).
FIRST_RECORD_S = 40.0

#: A record as compared: (topic, partition, key, value, headers, timestamp).
Copied = tuple[str, int, bytes | None, bytes | None, tuple, int]


def _create_all(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    """Create ``names`` in one request (the test's set-up is not what is measured)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, -1) for n in names], request_timeout=120)
    for future in futures.values():
        future.result()


def _leaders_ready(bootstrap: str, tps: list[tuple[str, int]]) -> int:
    """How many of ``tps`` answer an offsets request (their leader has the log)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}
    return sum(f.exception() is None for f in admin.list_offsets(request).values())


def _visible(bootstrap: str, topic: str) -> int:
    """The partitions metadata shows for ``topic`` (0 while it shows none)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(timeout=30).topics.get(topic)
    return len(found.partitions) if found is not None and found.partitions else 0


def _delete_all(bootstrap: str, names: Iterable[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = sorted(set(names) & existing)
    if doomed:
        for future in admin.delete_topics(doomed, request_timeout=120).values():
            future.exception()  # best effort: a topic another cleanup deleted is fine


def _produce_one_each(bootstrap: str, records: list[Copied]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failed: list[str] = []
    for topic, partition, key, value, headers, ts in records:
        producer.produce(
            topic,
            value,
            key,
            partition=partition,
            headers=list(headers),
            timestamp=ts,
            on_delivery=lambda err, _m: failed.append(str(err)) if err else None,
        )
    assert producer.flush(300) == 0 and not failed, failed[:3]


def _copied(bootstrap: str, tps: list[tuple[str, int]], want: int, timeout: float) -> set[Copied]:
    """Every record in ``tps`` from offset 0, once ``want`` records were read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"k2k-test-read-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    got: set[Copied] = set()
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    got.add(_record(m))
    finally:
        consumer.close()
    return got


def _record(m) -> Copied:
    headers = tuple((k, v) for k, v in m.headers() or [])
    return (m.topic(), m.partition(), m.key(), m.value(), headers, m.timestamp()[1])


def _records_on(bootstrap: str, tps: list[tuple[str, int]]) -> int:
    """How many records the partitions of ``tps`` that exist hold (0 for the others)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=30).topics
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps if t in topics}
    if not request:
        return 0
    total = 0
    for future in admin.list_offsets(request, request_timeout=30).values():
        try:
            total += future.result().offset
        except Exception:  # no leader yet: nothing to count there
            continue
    return total


def test_many_topics_start_with_one_creation_request_and_copy_the_first_record_soon(
    clusters, tmp_path, topic_name
):
    stem = topic_name("many")
    names = [f"{stem}-{i:03d}" for i in range(TOPICS)]
    name = f"{stem}-p"
    records = [
        (t, i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), (("h", b"%d" % i),), BASE_TS + i)
        for i, t in enumerate(names)
    ]
    tps = [(r[0], r[1]) for r in records]
    try:
        _create_all(clusters.source, names, PARTITIONS)
        every = [(t, p) for t in names for p in range(PARTITIONS)]
        eventually(lambda: _leaders_ready(clusters.source, every), len(every), timeout=300)
        _produce_one_each(clusters.source, records)
        path = write_pipeline(tmp_path, pipeline_dict(clusters, name, f"{stem}-\\d+"))
        started = time.monotonic()
        proc = K2KProcess(path, tmp_path / "k2k.log")
        try:
            eventually(lambda: _records_on(clusters.target, tps) > 0, timeout=180, interval=0.2)
            first_s = time.monotonic() - started
            copied = _copied(clusters.target, tps, TOPICS, timeout=180)
        finally:
            code = proc.stop()
        out = proc.output()
        assert code == 0, out[-3000:]
        assert copied == set(records)  # every record, where it belongs, as it was
        prefix = f"target cluster at {clusters.target}"
        assert f"{prefix}: creating topics: {TOPICS} in 1 request(s)" in out
        source = f"source cluster at {clusters.source}"
        assert f"{source}: describing topic configs: {TOPICS} in 2 request(s)" in out
        assert f"{source}: listing earliest offsets: {TOPICS * PARTITIONS} in 2 request(s)" in out
        print(f"{TOPICS} topics x {PARTITIONS} partitions: first record after {first_s:.1f} s")
        assert first_s < FIRST_RECORD_S, out[-3000:]
    finally:
        _delete_all(clusters.source, names)
        _delete_all(clusters.target, [*names, f"__k2k_progress-{name}"])


MANY = 1000


def test_a_topic_of_many_partitions_created_right_before_start_is_copied(
    clusters, tmp_path, topic_name
):
    """The start's offset listings meet partitions without a leader yet (the broker still
    creates their logs): they are asked again until answered, never a failed start."""
    topic, name = topic_name("fresh"), topic_name("pfresh")
    records = [
        (topic, p, b"k%d" % p, b"v%d" % p, (("h", b"x"),), BASE_TS + p) for p in range(0, MANY, 97)
    ]
    path = write_pipeline(tmp_path, pipeline_dict(clusters, name, topic))
    try:
        _create_all(clusters.source, [topic], MANY)
        # Shown, but no wait for leaders: k2k meets partitions whose logs do not exist yet.
        eventually(lambda: _visible(clusters.source, topic), MANY, timeout=120, interval=0.2)
        proc = K2KProcess(path, tmp_path / "k2k.log")
        try:
            _produce_one_each(clusters.source, records)
            copied = _copied(clusters.target, [(topic, r[1]) for r in records], len(records), 240)
        finally:
            code = proc.stop()
        out = proc.output()
        assert code == 0 and "error:" not in out, out[-3000:]
        assert copied == set(records)
    finally:
        _delete_all(clusters.source, [topic])
        _delete_all(clusters.target, [topic, f"__k2k_progress-{name}"])


def test_offsets_of_partitions_created_a_moment_ago_are_waited_for(
    clusters, topic_name, caplog: pytest.LogCaptureFixture
):
    topic = topic_name("settling")
    view = ClusterView("source", {"bootstrap.servers": clusters.source}, 60)
    try:
        _create_all(clusters.source, [topic], MANY)
        with caplog.at_level(logging.INFO, logger="k2k.kafka"):
            earliest = view.offsets([(topic, p) for p in range(MANY)], "earliest")
        assert earliest == {(topic, p): 0 for p in range(MANY)}
        waited = [r.getMessage() for r in caplog.records if "answered" in r.getMessage()]
        # A leader for every partition of a topic this large takes the broker a while.
        assert waited and "listing earliest offsets" in waited[0], caplog.text[-2000:]
    finally:
        _delete_all(clusters.source, [topic])


def test_a_topic_that_never_shows_its_partitions_fails_naming_both_counts(clusters, topic_name):
    short, missing = topic_name("short"), topic_name("missing")
    view = ClusterView("target", {"bootstrap.servers": clusters.target}, 1)
    try:
        create_topic(clusters.target, short, 2)
        with pytest.raises(TopicError) as raised:
            view.wait_for_topics({short: 2000})
        assert str(raised.value) == (
            f"target cluster at {clusters.target}: topic {short!r} was created (or grown) to "
            "2000 partitions but it shows 2 after waiting 1 s without progress; the "
            "controller may be overloaded (target.connectTimeout bounds the wait)"
        )
        with pytest.raises(TopicError, match=f"{missing!r} .* it is not visible at all"):
            view.wait_for_topics({missing: 3})
    finally:
        _delete_all(clusters.target, [short])
