"""Reading control topics. A read held by another producer's open transaction (a member
killed in the middle of one, whose transactional id this lease does not fence) stops waiting
as soon as it is told to: a runner whose lease ends then returns at once instead of failing
at ``coordination.commit.syncTimeout``. A progress read told what lies before some offsets
reads only what follows them, unless the offsets are not the topic's any more."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Message, Producer

from k2k.coordination.progress import ProgressStore
from k2k.errors import ClusterError, ControlRecordError
from k2k.formats import ProgressKey, ProgressRecord
from k2k.kafka.tail import TopicTail
from tests.helpers.kafka import create_topic

pytestmark = pytest.mark.integration


def test_a_read_past_an_open_transaction_returns_when_aborted(clusters, topic_name):
    t = topic_name("tail")
    create_topic(clusters.target, t, 1)
    producer = Producer({"bootstrap.servers": clusters.target, "transactional.id": t})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(t, b"v", b"k", partition=0)
    assert producer.flush(30) == 0
    tail = TopicTail(
        {"bootstrap.servers": clusters.target},
        t,
        [0],
        group_id=t,
        timeout_s=30,
        past_open_transactions=True,
    )
    seen: list[Message] = []
    try:
        told = time.monotonic() + 1.0
        assert tail.catch_up(seen.append, abort=lambda: time.monotonic() > told) is False
        assert time.monotonic() - told < 1.0  # checked every 0.1 s, not at the sync timeout
        assert seen == []  # the open transaction's record is not read
        producer.commit_transaction(30)
        assert tail.catch_up(seen.append) is True
        assert [(m.key(), m.value()) for m in seen] == [(b"k", b"v")]
    finally:
        tail.close()


def test_a_progress_read_waits_past_the_sync_timeout_for_a_live_writers_transaction(
    clusters, topic_name
):
    """A runner taking partitions on reads past other runners' open transactions; one over
    thousands of partitions can stay open longer than ``syncTimeout``. The read waits for
    it up to the transaction timeout, and then has both the committed record before it and
    the transaction's own."""
    t = topic_name("progress")
    create_topic(clusters.target, t, 1)
    plain = Producer({"bootstrap.servers": clusters.target})
    live = _open_transaction(clusters.target, t)
    key, value = ProgressRecord("g", "src", 0, 40, "predecessor", 1).encode()
    plain.produce(t, value, key, partition=0)  # behind the open transaction: held back
    assert plain.flush(30) == 0
    store = _store(
        clusters.target, t, sync_timeout_s=1, past_open_transactions=True, open_transaction_s=30
    )
    committed = threading.Timer(3.0, live.commit_transaction, (30,))
    committed.start()
    started = time.monotonic()
    try:
        latest = store.load()
    finally:
        committed.join()
        store.close()
    assert time.monotonic() - started >= 2.5  # it waited for the commit, past the 1 s
    assert {tp: (r.offset, r.pipeline) for tp, r in latest.items()} == {
        ("src", 0): (40, "predecessor"),
        ("src", 1): (5, "live"),
    }


def test_a_progress_read_stops_at_the_sync_timeout_when_no_transaction_can_be_open(
    clusters, topic_name
):
    """At-least-once (no transactions, ``open_transaction_s`` 0) the sync timeout is the
    bound, and the error names it."""
    t = topic_name("progress")
    create_topic(clusters.target, t, 1)
    live = _open_transaction(clusters.target, t)
    store = _store(clusters.target, t, sync_timeout_s=1, past_open_transactions=True)
    started = time.monotonic()
    try:
        with pytest.raises(ClusterError, match=r"within 1 s \(coordination.commit.syncTimeout\);"):
            store.load()
    finally:
        store.close()
        live.abort_transaction(30)
    assert time.monotonic() - started < 10


def test_a_progress_read_told_what_lies_before_reads_only_what_follows(clusters, topic_name):
    """A runner taking partitions on is handed the driver's view of the commit topic: it
    reads only past it, and what it ends with equals a read of the whole topic."""
    t = topic_name("progress")
    create_topic(clusters.target, t, 1)
    producer = Producer({"bootstrap.servers": clusters.target})

    def write(partition: int, offset: int) -> None:
        key, value = ProgressRecord("g", "src", partition, offset, "p", 1).encode()
        producer.produce(t, value, key, partition=0)

    for offset in range(1, 6):
        write(0, offset * 10)  # partition 0: only before the cut
        write(1, offset)
    assert producer.flush(30) == 0
    driver = _store(clusters.target, t)
    try:
        driver.load()
        read_to = driver.read_to()
        # Consistent view: everything below ``read_to`` is in ``latest``.
        known = dict(driver.latest)
    finally:
        driver.close()
    assert read_to == {0: 10} and known[("src", 0)].offset == 50
    write(1, 99)
    producer.produce(t, None, ProgressKey("g", "src", 2).encode(), partition=0)  # a tombstone
    assert producer.flush(30) == 0
    # A marker the prefix does not hold: a reader that went back to the beginning would
    # replace it with partition 0's real record (offset 50).
    known[("src", 0)] = ProgressRecord("g", "src", 0, 7, "marker", 1)
    known[("src", 2)] = ProgressRecord("g", "src", 2, 3, "p", 1)
    runner = _store(clusters.target, t, start_at=read_to, known=known)
    try:
        latest = runner.load()
        assert runner.read_to() == {0: 12}
    finally:
        runner.close()
    assert {tp: (r.offset, r.pipeline) for tp, r in latest.items()} == {
        ("src", 0): (7, "marker"),  # the prefix was not read again
        ("src", 1): (99, "p"),  # what follows was
    }  # and the tombstone after the cut removed partition 2


def _open_transaction(bootstrap: str, topic: str) -> Producer:
    """A live writer's transaction, left open, holding one progress record of ``topic``."""
    live = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    live.init_transactions(30)
    live.begin_transaction()
    key, value = ProgressRecord("g", "src", 1, 5, "live", 1).encode()
    live.produce(topic, value, key, partition=0)
    assert live.flush(30) == 0
    return live


def _store(
    bootstrap: str, topic: str, *, sync_timeout_s: float = 30, **kwargs: Any
) -> ProgressStore:
    return ProgressStore(
        {"bootstrap.servers": bootstrap},
        topic,
        "g",
        sync_timeout_s=sync_timeout_s,
        on_sync_timeout="fail",
        on_bad_record="fail",
        partitions=[0],
        **kwargs,
    )


def test_a_view_of_a_commit_topic_created_again_since_is_not_trusted(clusters, topic_name):
    """Offsets past the topic's end belong to a topic deleted since: the reader starts over
    from the beginning and forgets what it was told."""
    t = topic_name("recreated")
    create_topic(clusters.target, t, 1)
    producer = Producer({"bootstrap.servers": clusters.target})
    key, value = ProgressRecord("g", "src", 1, 4, "p", 1).encode()
    producer.produce(t, value, key, partition=0)
    assert producer.flush(30) == 0
    stale = {("src", 0): ProgressRecord("g", "src", 0, 7, "old", 1)}
    store = _store(clusters.target, t, start_at={0: 500}, known=stale)
    try:
        latest = store.load()
        assert store.read_to() == {0: 1}
    finally:
        store.close()
    assert {tp: r.offset for tp, r in latest.items()} == {("src", 1): 4}


def test_a_read_that_failed_part_way_offers_no_view(clusters, topic_name):
    """An unreadable record (policy ``fail``) ends a read in the middle of a batch, past
    records no handler saw: the store no longer claims to know what lies before its
    position, so runners taking partitions on read the topic themselves."""
    t = topic_name("unreadable")
    create_topic(clusters.target, t, 1)
    producer = Producer({"bootstrap.servers": clusters.target})
    producer.produce(t, b"not a progress value", ProgressKey("g", "src", 0).encode(), partition=0)
    key, value = ProgressRecord("g", "src", 1, 4, "p", 1).encode()
    producer.produce(t, value, key, partition=0)
    assert producer.flush(30) == 0
    store = _store(clusters.target, t)
    try:
        with pytest.raises(ControlRecordError, match="onControlMessageDeserializationError"):
            store.load()
        assert store.read_to() is None
    finally:
        store.close()
