"""An abort that fails (confluentinc/librdkafka#4849), provoked on a real broker: k2k survives
it, the transactional id is fenced by initialising it again, and the next transaction under
that id commits records that ``read_committed`` readers see exactly once.

The trigger, which failed the abort on every try (about twenty) against Kafka 4.3.1 with
librdkafka 2.16: a transaction's only partition is one the coordinator refuses to add (its
topic was deleted after the producer learnt its metadata). AddPartitionsToTxn fails with
UNKNOWN_TOPIC_OR_PARTITION, which librdkafka retries, and it counts the failed request as
one that may have reached the coordinator. Once the record times out
(``message.timeout.ms``) the transaction needs an abort; librdkafka sends EndTxn for it,
and the coordinator, which never saw a partition of this transaction (state Empty),
answers INVALID_TXN_STATE. The client turns fatal: every later call of that producer fails
with the same error. The issue's own reproducer (produce five records, abort at once) did
not fail here in 150 tries; a transaction the coordinator timed out answers the abort with
``_FENCED`` instead, which k2k already treats as fencing.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from k2k.coordination.assignment import producer_ids
from k2k.errors import Unavailable
from k2k.kafka.factory import producer_settings
from k2k.kafka.faults import Outcome, classify, fatal_cause
from k2k.pipeline.plan import ClientSpec, CommitSpec, LeaseSpec, PartitionRange
from k2k.pipeline.task.commit.exactly_once import ExactlyOnce, start_transactional_producers
from k2k.pipeline.task.commit.ledger import ProgressLedger
from k2k.pipeline.task.commit.transactions import TransactionPair
from k2k.pipeline.task.faults import RunnerFaults
from tests.helpers.eos import progress_history
from tests.helpers.inprocess import POLICIES, control_topics
from tests.helpers.kafka import create_topic, end_offsets, eventually, list_topics, read_all

pytestmark = pytest.mark.integration

#: How long the doomed record waits for its partition before it times out.
MESSAGE_TIMEOUT_MS = 3000
#: The source partition the ledger of the test keeps progress for (no source is read).
SOURCE_TP = ("abort-source", 0)


def _spec(bootstrap: str, name: str, commit_topic: str) -> LeaseSpec:
    target = {"bootstrap.servers": bootstrap, "message.timeout.ms": str(MESSAGE_TIMEOUT_MS)}
    return LeaseSpec(
        lease_id=1,
        topics={},
        topic_ids={},
        lease_s=60,
        live=False,
        control=None,
        observer=None,
        telemetry=False,
        # No control consumer: the ledgers take their ranges' starts as read.
        clients=ClientSpec(
            source_consumer={},
            target_producer=producer_settings(target, False, exactly_once=True),
            control_consumer={},
            statistics_interval_ms=None,
        ),
        commit=CommitSpec(
            exactly_once=True,
            batch_size=100,
            batch_timeout_s=1.0,
            ack_timeout_s=30,
            identical_offsets=False,
        ),
        control_topics=control_topics(name, commit_topic),
        policies=POLICIES,
    )


def _ledger(spec: LeaseSpec, ranges: list[PartitionRange], faults: RunnerFaults) -> ProgressLedger:
    return ProgressLedger(
        ranges,
        faults,
        control=spec.control_topics,
        consumer=spec.clients.control_consumer,
        policies=spec.policies,
        topic_ids=spec.topic_ids,
    )


def _producers(spec: LeaseSpec, txid: str, faults: RunnerFaults) -> list[Producer]:
    return start_transactional_producers(
        spec.clients.target_producer, spec.control_topics, txid, faults
    )


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the result is in
    admin.delete_topics([topic])[topic].result()
    eventually(lambda: topic not in list_topics(bootstrap), True)


def _doomed(bootstrap: str, producer: Producer, gone: str) -> None:
    """Let ``producer`` learn ``gone``'s metadata, then delete the topic: a transaction that
    writes only to it can never add its partition, and its abort fails (module docstring)."""
    create_topic(bootstrap, gone, 1)
    producer.list_topics(gone, timeout=30)
    _delete_topic(bootstrap, gone)


def _await_markers(bootstrap: str, topic: str, end: int) -> None:
    """Wait until ``read_committed`` readers see up to ``end``: a commit returns once the
    coordinator decided it, and writes the partitions' commit markers after that."""
    eventually(lambda: end_offsets(bootstrap, topic), {0: end})


def _abort_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "k2k.transactions" and r.levelno == logging.WARNING
    ]


def _assert_dead_of_invalid_txn_state(producer: Producer) -> None:
    """The producer whose abort failed is fatal: it must be discarded, never used again."""
    with pytest.raises(KafkaException) as raised:
        producer.begin_transaction()
    err = raised.value.args[0]
    assert err.code() == KafkaError.INVALID_TXN_STATE
    assert err.fatal()


def test_a_commit_whose_abort_fails_raises_its_own_error_and_the_id_is_fenced(
    clusters, topic_name, caplog: pytest.LogCaptureFixture
) -> None:
    """The commit thread's path (``ExactlyOnce._commit``): the batch cannot commit (its record
    timed out), the abort fails with INVALID_TXN_STATE. The runner gets the commit's error,
    an outage's (:class:`~k2k.errors.Unavailable`, ridden out by the planner), the abort's
    failure is one log line, and the next runner of the id (the same
    :func:`start_transactional_producers`) fences it and commits a batch exactly once."""
    name = topic_name("abortfail")
    target, gone, commit_topic = name, f"{name}-gone", f"{name}-progress"
    create_topic(clusters.target, target, 1)
    create_topic(clusters.target, commit_topic, 1, {"cleanup.policy": "compact"})
    spec = _spec(clusters.target, name, commit_topic)
    txid = f"{name}-txn"
    faults = RunnerFaults(txid)
    first, second = _producers(spec, txid, faults)
    faults.producers = [first, second]
    _doomed(clusters.target, first, gone)
    # A ledger without partitions re-states no progress: the doomed record is the
    # transaction's only one, as a batch of records for one target partition would be.
    strategy = ExactlyOnce(spec.commit, [first, second], _ledger(spec, [], faults), faults, 1)
    caplog.set_level(logging.WARNING, logger="k2k.transactions")
    try:
        strategy.begin()
        strategy.producer.produce(gone, b"never written", b"k", partition=0)
        strategy.produced(1, 0)
        strategy.seal({})  # flushed (the record timed out), committing in the background
        with pytest.raises(Unavailable, match="a transaction on the target failed") as raised:
            strategy.finish({})  # collects the commit: what the runner raises
        assert "timed out" in str(raised.value)
        strategy.abandon()  # what the runner does next: nothing open, nothing raised
    finally:
        strategy.close()
    warnings = _abort_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"transactional id {txid}.a" in warnings[0]
    assert "INVALID_TXN_STATE" in warnings[0]
    _assert_dead_of_invalid_txn_state(first)

    # The next runner of the id initialises both producer ids: that fences the old pair.
    successor_faults = RunnerFaults(txid)
    successors = _producers(spec, txid, successor_faults)
    successor_faults.producers = successors
    second.begin_transaction()  # the old pair's healthy producer, now a zombie
    second.produce(target, b"zombie", b"z", partition=0)
    with pytest.raises(KafkaException) as fenced:
        second.commit_transaction(30)
    assert classify(fatal_cause(fenced.value.args[0], [second])) is Outcome.FENCED

    # A batch under the fenced id commits through k2k's commit path, exactly once.
    ranges = [PartitionRange(*SOURCE_TP, 0, None, False)]
    ledger = _ledger(spec, ranges, successor_faults)
    after = ExactlyOnce(spec.commit, successors, ledger, successor_faults, 1)
    try:
        after.begin()
        for i in range(3):
            after.producer.produce(target, b"v%d" % i, b"k%d" % i, partition=0)
        after.produced(3, 0)
        after.finish({SOURCE_TP: 3})
    finally:
        after.close()
    _await_markers(clusters.target, target, 4)
    committed = read_all(clusters.target, target)[0]
    assert [(r.key, r.value, r.offset) for r in committed] == [
        (b"k0", b"v0", 0),
        (b"k1", b"v1", 1),
        (b"k2", b"v2", 2),
    ]
    # Nothing else reached the log: the zombie's record never did, and offset 3 is the
    # commit marker.
    assert end_offsets(clusters.target, target, "read_uncommitted") == {0: 4}
    assert end_offsets(clusters.target, target) == {0: 4}
    assert ledger.committed == {SOURCE_TP: 3}
    history = progress_history(clusters.target, commit_topic, name)
    assert [r.offset for r in history[SOURCE_TP]] == [0, 3]  # re-stated, then moved


def test_abandon_survives_an_abort_that_fails_and_the_id_commits_after_a_fence(
    clusters, topic_name, caplog: pytest.LogCaptureFixture
) -> None:
    """The runner-failed path (``TransactionPair.abandon``): the transaction open on the
    current producer cannot be aborted. Nothing is raised, the failure is one log line, and
    once the id is initialised again (what the next owner's fence does) a transaction under
    it commits exactly once."""
    name = topic_name("abandonfail")
    target, gone = name, f"{name}-gone"
    create_topic(clusters.target, target, 1)
    conf = producer_settings(
        {"bootstrap.servers": clusters.target, "message.timeout.ms": str(MESSAGE_TIMEOUT_MS)},
        False,
        exactly_once=True,
    )
    ids = producer_ids(f"{name}-txn")
    producers = []
    for pid in ids:
        p = Producer({**conf, "transactional.id": pid})
        p.init_transactions(30)
        producers.append(p)
    pair = TransactionPair(producers, ids)
    current = pair.current
    _doomed(clusters.target, current, gone)
    failed: list[KafkaError] = []
    caplog.set_level(logging.WARNING, logger="k2k.transactions")
    try:
        current.begin_transaction()
        current.produce(gone, b"never written", on_delivery=lambda err, _msg: failed.append(err))

        def delivery_failed() -> bool:
            current.poll(0.1)
            return bool(failed)

        eventually(delivery_failed, timeout=MESSAGE_TIMEOUT_MS / 1000 + 30)
        assert failed[0].code() == KafkaError._MSG_TIMED_OUT  # the runner would fail now
        assert pair.abandon() is None  # no exception, nothing was in flight
    finally:
        pair.close()
    warnings = _abort_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"transactional id {ids[0]}" in warnings[0]
    assert "INVALID_TXN_STATE" in warnings[0]
    _assert_dead_of_invalid_txn_state(current)

    fresh = Producer({**conf, "transactional.id": ids[0]})
    fresh.init_transactions(30)  # the fence: a fresh producer of the same id
    fresh.begin_transaction()
    for i in range(2):
        fresh.produce(target, b"after-%d" % i, b"k%d" % i, partition=0)
    fresh.commit_transaction(30)
    _await_markers(clusters.target, target, 3)
    committed = read_all(clusters.target, target)[0]
    assert [(r.key, r.value, r.offset) for r in committed] == [
        (b"k0", b"after-0", 0),
        (b"k1", b"after-1", 1),
    ]
    assert end_offsets(clusters.target, target, "read_uncommitted") == {0: 3}
