"""A control-topic read held by another producer's open transaction (a member killed in the
middle of one, whose transactional id this lease does not fence) stops waiting as soon as
it is told to: a runner whose lease ends then returns at once instead of failing at
``coordination.commit.syncTimeout``."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Message, Producer

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
