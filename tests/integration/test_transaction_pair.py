"""The two-producer rule of exactly-once writes, on a real target: batch N+1 (open on one
producer) never becomes visible when batch N's commit (on the other) fails, and it does
after N committed. The runner relies on both (:mod:`k2k.pipeline.task.commit.transactions`)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from k2k.coordination.assignment import producer_ids
from k2k.errors import ReplicationError
from k2k.kafka.faults import fatal_cause
from k2k.pipeline.task.commit.transactions import TransactionPair
from tests.helpers.kafka import create_topic, eventually, read_all

pytestmark = pytest.mark.integration


def _pair(bootstrap: str, txid: str) -> TransactionPair:
    producers = []
    for pid in producer_ids(txid):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": pid})
        p.init_transactions(30)
        producers.append(p)
    return TransactionPair(producers)


def _values(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value for r in read_all(bootstrap, topic)[0]]


def test_failed_commit_of_batch_n_aborts_batch_n_plus_1(clusters, topic_name):
    t = topic_name("pairfail")
    create_topic(clusters.target, t, 1)
    pair = _pair(clusters.target, t)
    try:
        first = pair.current
        first.begin_transaction()
        first.produce(t, b"batch-1")
        assert first.flush(30) == 0

        def failing_commit() -> None:
            first.abort_transaction(30)
            raise ReplicationError("the commit of batch 1 failed")

        pair.hand_off(failing_commit, "progress of batch 1")
        second = pair.current
        assert second is not first
        second.begin_transaction()
        second.produce(t, b"batch-2")
        assert second.flush(30) == 0
        with pytest.raises(ReplicationError, match="batch 1"):
            pair.wait()  # what the runner does before it commits batch 2
        assert pair.abandon() is None  # aborts batch 2; nothing committed to carry
        # A later batch commits: the partition's last stable offset moves past both
        # aborted ones, so a read_committed reader sees exactly this one.
        second.begin_transaction()
        second.produce(t, b"batch-3")
        second.commit_transaction(30)
        assert _values(clusters.target, t) == [b"batch-3"]
    finally:
        pair.close()


def test_batches_commit_in_turn_and_carry_their_progress(clusters, topic_name):
    t = topic_name("pairok")
    create_topic(clusters.target, t, 1)
    pair = _pair(clusters.target, t)
    try:
        for n in range(1, 5):
            producer = pair.current
            producer.begin_transaction()
            producer.produce(t, f"batch-{n}".encode())
            assert producer.flush(30) == 0
            carried = pair.wait()  # batch n-1 committed first
            assert carried == (f"progress {n - 1}" if n > 1 else None)
            pair.hand_off(lambda p=producer: p.commit_transaction(30), f"progress {n}")
        assert pair.wait() == "progress 4"
        assert _values(clusters.target, t) == [f"batch-{n}".encode() for n in range(1, 5)]
    finally:
        pair.close()


def test_fatal_produce_error_is_traced_to_the_fencing(clusters, topic_name):
    """A fenced producer's produce() says only _FATAL; the runner must still see that it
    was fenced (and stand down) rather than report a client failure."""
    t = topic_name("pairfenced")
    create_topic(clusters.target, t, 2)
    old = _pair(clusters.target, t)
    bystander = Producer({"bootstrap.servers": clusters.target})
    try:
        zombie = old.current
        zombie.begin_transaction()
        zombie.produce(t, b"before", partition=0)
        assert zombie.flush(30) == 0
        _pair(clusters.target, t).close()  # a successor initialises both ids: fenced

        def produce_error() -> KafkaError | None:
            # A partition new to the transaction makes the client ask the coordinator,
            # which answers that the epoch is old: the producer turns fatal.
            try:
                zombie.produce(t, b"after", partition=1)
            except KafkaException as exc:
                return exc.args[0]
            return None

        err = eventually(produce_error, timeout=30)
        assert err.code() == KafkaError._FATAL
        cause = fatal_cause(err, [bystander, old.current, zombie])
        assert cause.code() == KafkaError._FENCED
        assert cause.fatal()
        # The cause is raised only once, and a callback run by the same call can swallow
        # it; asked again, the producer's transactional state still names it.
        assert fatal_cause(err, [zombie], wait_s=0.5).code() == KafkaError._FENCED
        # Errors that are not _FATAL pass through untouched, without polling.
        other = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
        assert fatal_cause(other, [zombie]) is other
    finally:
        old.close()
        bystander.flush(5)
