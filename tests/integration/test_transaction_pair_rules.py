"""The rules of a transaction pair (:class:`k2k.pipeline.task.commit.transactions.TransactionPair`)
on real transactional producers of the target: who takes the next batch, what a hand-off
carries back, how a failed commit surfaces, and what abandoning leaves on the broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from k2k.kafka.factory import build_producer
from k2k.pipeline.task.commit.transactions import TransactionPair
from tests.helpers.kafka import create_topic, end_offsets, read_all

pytestmark = pytest.mark.integration


def _transactional(bootstrap: str, txid: str) -> Producer:
    producer = build_producer({"bootstrap.servers": bootstrap, "transactional.id": txid})
    producer.init_transactions(30)
    return producer


@pytest.fixture
def topic(clusters, topic_name) -> str:
    name = topic_name("pair")
    create_topic(clusters.target, name, 1)
    return name


@pytest.fixture
def pair(clusters, topic) -> Iterator[TransactionPair]:
    pair = TransactionPair([_transactional(clusters.target, f"{topic}.{s}") for s in "ab"])
    yield pair
    pair.close()


def _fill(pair: TransactionPair, topic: str, value: bytes) -> Producer:
    """Open a transaction on ``current`` and write one acknowledged record into it."""
    producer = pair.current
    producer.begin_transaction()
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    return producer


def _committer(producer: Producer):
    return lambda: producer.commit_transaction(30)


def _committed_values(bootstrap: str, topic: str) -> list[bytes | None]:
    return [r.value for r in read_all(bootstrap, topic)[0]]


def test_a_pair_needs_exactly_two_producers(clusters) -> None:
    producers = [Producer({"bootstrap.servers": clusters.target}) for _ in range(3)]
    for wrong in (producers[:1], producers):
        with pytest.raises(ValueError, match="exactly two producers"):
            TransactionPair(wrong)


def test_current_alternates_between_the_two_producers(clusters, topic, pair) -> None:
    first = pair.current
    seen = []
    for n in range(4):
        seen.append(_fill(pair, topic, f"batch-{n}".encode()))
        pair.hand_off(_committer(seen[-1]), n)
        assert pair.wait() == n
    second = seen[1]
    assert second is not first
    assert seen == [first, second, first, second]
    assert _committed_values(clusters.target, topic) == [
        b"batch-0",
        b"batch-1",
        b"batch-2",
        b"batch-3",
    ]


def test_hand_off_before_the_previous_commit_was_collected_raises(clusters, topic, pair) -> None:
    first = _fill(pair, topic, b"batch-1")
    pair.hand_off(_committer(first), "progress 1")
    second = _fill(pair, topic, b"batch-2")
    with pytest.raises(RuntimeError, match="previous commit was not collected"):
        pair.hand_off(_committer(second), "progress 2")
    # The refused hand-off changed nothing: batch 2 is still open on the same producer.
    assert pair.current is second
    assert pair.wait() == "progress 1"
    pair.hand_off(_committer(second), "progress 2")
    assert pair.wait() == "progress 2"
    assert _committed_values(clusters.target, topic) == [b"batch-1", b"batch-2"]


def test_wait_returns_what_the_hand_off_carried_and_none_when_idle(topic, pair) -> None:
    assert pair.wait() is None
    carried = {("orders", 0): 42}
    pair.hand_off(_committer(_fill(pair, topic, b"batch-1")), carried)
    assert pair.wait() is carried
    assert pair.wait() is None  # collected once: nothing in flight any more


def test_a_commit_that_raises_makes_wait_raise_it(topic, pair) -> None:
    producer = pair.current  # no transaction open: the client refuses to commit
    pair.hand_off(_committer(producer), "never committed")
    with pytest.raises(KafkaException) as raised:
        pair.wait()
    assert raised.value.args[0].code() == KafkaError._STATE
    assert pair.wait() is None  # the failure was reported once, with nothing carried


def test_abandon_aborts_the_transaction_open_on_current(clusters, topic, pair) -> None:
    _fill(pair, topic, b"open when the runner failed")
    assert end_offsets(clusters.target, topic, "read_committed") == {0: 0}  # held back
    assert pair.abandon() is None  # nothing was in flight
    # Aborted: the last stable offset no longer waits for it, and it is never visible.
    assert end_offsets(clusters.target, topic, "read_committed") == end_offsets(
        clusters.target, topic, "read_uncommitted"
    )
    assert _committed_values(clusters.target, topic) == []
    uncommitted = read_all(clusters.target, topic, "read_uncommitted")[0]
    assert [r.value for r in uncommitted] == [b"open when the runner failed"]


def test_abandon_returns_what_a_successful_in_flight_commit_carried(clusters, topic, pair) -> None:
    pair.hand_off(_committer(_fill(pair, topic, b"batch-1")), "progress 1")
    _fill(pair, topic, b"batch-2")
    assert pair.abandon() == "progress 1"
    assert _committed_values(clusters.target, topic) == [b"batch-1"]


def test_abandon_returns_none_when_the_in_flight_commit_failed(clusters, topic, pair) -> None:
    first = _fill(pair, topic, b"batch-1")

    def failing_commit() -> None:
        first.abort_transaction(30)
        raise RuntimeError("the commit of batch 1 failed")

    pair.hand_off(failing_commit, "progress 1")
    _fill(pair, topic, b"batch-2")
    assert pair.abandon() is None
    assert _committed_values(clusters.target, topic) == []
