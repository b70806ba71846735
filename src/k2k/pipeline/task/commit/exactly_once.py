"""Exactly-once commits: each batch and its progress records are one transaction.

Runs on: executor. A batch is written through one of two transactional producers while the
previous batch commits on the other (:mod:`k2k.pipeline.task.commit.transactions` says why that
keeps order and exactly-once). A batch is sealed at ``batchSize`` records per partition or
``batchTimeout``, or as soon as the runner is caught up (nothing queued, and at the end of
every partition as the last fetch saw it): at low rates a record is then visible within one
fetch and one commit, while a backlog still commits large transactions
(docs/exactly-once.md#when-a-batch-commits).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Set

from confluent_kafka import KafkaException, Producer

from k2k.coordination.assignment import producer_ids
from k2k.errors import ReplicationError
from k2k.kafka import TP
from k2k.kafka.factory import StatsCallback, build_producer
from k2k.kafka.faults import (
    Outcome,
    abort_transaction,
    classify,
    describe,
    failure_kind,
    kafka_error_of,
)
from k2k.kafka.produce import produce_when_room
from k2k.pipeline.plan import CommitSpec, ControlTopicSpec
from k2k.pipeline.task.commit import BatchRecord, DeliveryCallback
from k2k.pipeline.task.commit.ledger import Positions, ProgressLedger, Written
from k2k.pipeline.task.commit.transactions import TransactionPair
from k2k.pipeline.task.faults import RunnerFaults

__all__ = ["ExactlyOnce", "start_transactional_producers"]

#: The longest wait for a batch's acknowledgements, and again for its commit.
_MAX_TXN_WAIT_S = 300.0
#: How long the commit thread's abort of a transaction whose commit failed may take.
_FAILED_COMMIT_ABORT_S = 30.0
#: Source partitions read into one transaction before it is sealed: the producer registers
#: every partition it writes with the coordinator before sending to it, and that wait grows
#: faster than the partitions (docs/exactly-once.md#when-a-batch-commits).
MAX_TXN_PARTITIONS = 1000


def start_transactional_producers(
    settings: dict[str, str],
    control: ControlTopicSpec,
    transactional_id: str,
    faults: RunnerFaults,
    on_stats: StatsCallback | None = None,
) -> list[Producer]:
    """Runs on: executor. The two producers of a runner's transaction pair, built from the
    target producer ``settings`` and both initialised, which fences every earlier producer
    of their ids (a failed or duplicate attempt of this task). ``on_stats``: both
    producers' statistics callback (k2k.metrics.clientstats)."""
    producers = []
    sync_timeout_s = control.sync_timeout_s
    for pid in producer_ids(transactional_id):
        conf = {**settings, "transactional.id": pid}
        producer = build_producer(conf, faults.on_client_error, on_stats)
        # Metadata first: init_transactions on a fresh producer otherwise may stall.
        producer.list_topics(control.commit_topic, timeout=sync_timeout_s)
        producer.init_transactions(max(sync_timeout_s, 10.0))
        producers.append(producer)
    return producers


class ExactlyOnce:
    """Runs on: executor. The exactly-once :class:`~k2k.pipeline.task.commit.CommitStrategy`."""

    def __init__(
        self,
        spec: CommitSpec,
        producers: list[Producer],
        ledger: ProgressLedger,
        faults: RunnerFaults,
        partitions: int,
        touched: Set[TP] = frozenset(),
        serve_idle: bool = False,
    ) -> None:
        """``touched``: the source partitions read since the last commit point (the source
        reader's set, updated in place); ``serve_idle``: poll the producer that is not
        taking records too (client statistics: see :meth:`TransactionPair.serve_idle`)."""
        self.serve_idle = serve_idle
        txid = faults.transactional_id
        self.pair = TransactionPair(producers, producer_ids(txid) if txid else None)
        self.producer: Producer = self.pair.current
        self.ledger = ledger
        self.faults = faults
        # A transaction holds up to batchSize records per partition.
        self.batch_size = spec.batch_size
        self.batch_limit = spec.batch_size * max(1, partitions)
        self.batch_timeout_s = spec.batch_timeout_s
        self.touched = touched
        self.wait_s = min(spec.ack_timeout_s, _MAX_TXN_WAIT_S)
        self.in_txn = False
        #: Transactions handed off to commit so far: the open one's number. The two
        #: producers take turns, so batches n and n + 2 share a producer (foreign.py).
        self.batch = 0
        self.records = 0
        self.started = time.monotonic()
        # Where the next transaction starts per partition (where the previous one, which
        # commits first, ends), and one partition per progress partition to re-state it.
        self.txn_start: Positions = dict(ledger.committed)
        self.openers: list[TP] = ledger.one_per_progress_partition()

    @property
    def on_ack(self) -> DeliveryCallback | None:
        return None  # the commit confirms every record of the batch

    def room(self) -> int:
        return self.batch_limit - self.records

    def begin(self) -> None:
        if not self.in_txn:
            self.producer.begin_transaction()
            self.in_txn = True  # from here on a failure aborts it
            self._restate_progress()

    def produced(self, records: int, acks: int) -> None:
        self.records += records

    def due(self, now: float) -> bool:
        return (
            self.records >= self.batch_limit
            or len(self.touched) >= MAX_TXN_PARTITIONS
            or (
                bool(self.records or self.ledger.unwritten)
                and now - self.started >= self.batch_timeout_s
            )
        )

    def idle(self, caught_up: Callable[[], Positions | None]) -> None:
        """The consumer had nothing queued: when the runner is also at the end of every
        partition, commit what the batch holds now rather than at its limits, and
        positions that moved past offsets no consumer is given (the records and marker of
        an aborted source transaction), which no record would."""
        self.service()
        positions = caught_up()
        if positions is not None and (self.records or self.ledger.moves(positions)):
            self.seal(positions)

    def service(self) -> None:
        self.producer.poll(0)
        if self.serve_idle:
            self.pair.serve_idle()
        self.faults.raise_failure()

    def add(self, record: BatchRecord) -> None:
        self.begin()
        topic, partition, key, value = record
        produce_when_room(self.producer, topic, value, key, partition, self.ledger.on_delivery)
        self.records += 1  # an open batch is sealed in time, also when it holds only these

    def seal(self, positions: Positions) -> None:
        """Commit point: 1 the progress records join the open transaction (or a new one
        when no record was copied), 2 every record of it is acknowledged, 3 the previous
        batch's commit is collected, 4 this one commits in the background while the other
        producer takes the next batch."""
        self.records = 0
        self.started = time.monotonic()
        if not self.in_txn:
            self._collect()  # nothing to overlap with; and `committed` is current then
            if not self.ledger.moves(positions):
                return
            self.producer.begin_transaction()
            self.in_txn = True
        # Step 1.
        written = self.ledger.write(self.producer, positions)
        for tp, pos in positions.items():
            self.txn_start[tp] = max(pos, self.ledger.committed[tp])
        # Step 2.
        if self.producer.flush(self.wait_s):
            raise self.ledger.unacknowledged(self.wait_s, positions)
        # Step 3.
        self._collect()
        # Step 4.
        commit = functools.partial(self._commit, self.producer, self.pair.current_id, positions)
        self.pair.hand_off(commit, written)
        self.batch += 1
        self.producer = self.pair.current
        self.in_txn = False

    def finish(self, positions: Positions) -> None:
        self.seal(positions)
        self._collect()

    def reassigned(self, partitions: int) -> None:
        """Between transactions: the next one starts where the ledger says for new
        partitions, and re-states progress on the progress partitions of the set now."""
        self.batch_limit = self.batch_size * max(1, partitions)
        committed = self.ledger.committed
        self.txn_start = {tp: self.txn_start.get(tp, pos) for tp, pos in committed.items()}
        self.openers = self.ledger.one_per_progress_partition()

    def abandon(self) -> None:
        """Abort now rather than hold the target's last stable offset until the transaction
        times out; a batch whose commit was in flight and succeeded still counts."""
        written = self.pair.abandon(abort_current=self.in_txn)
        self.in_txn = False
        if written:
            self.ledger.mark_committed(written)

    def close(self) -> None:
        self.pair.close()

    def _restate_progress(self) -> None:
        """Make the progress partitions part of the new transaction now.

        librdkafka adds a partition to a transaction (a round trip to the coordinator) when
        the transaction's first record for it is produced, and holds that record until then;
        the commit point's flush waited for it
        (docs/benchmarks.md#progress-partitions-opened-early).
        One progress record per progress partition re-states where this transaction starts:
        where the previous one ends, which commits before this one can. Readers keep the
        newest record per key, so an equal offset changes nothing.
        """
        now_ms = int(time.time() * 1000)
        for tp in self.openers:
            self.ledger.produce(self.producer, tp, self.txn_start[tp], now_ms)

    def _collect(self) -> None:
        """Wait for the batch committing in the background; mark its progress committed,
        or raise its error (the caller aborts the batch open on the other producer)."""
        written: Written | None = self.pair.wait()
        if written is not None:
            self.ledger.mark_committed(written)
        self.faults.raise_failure()

    def _commit(self, producer: Producer, txid: str, positions: Positions) -> None:
        """Runs on: the pair's commit thread. Commits, retrying retriable errors within the
        delivery timeout; raises :class:`~k2k.pipeline.task.faults.Fenced` or ReplicationError.

        A transaction that cannot commit is aborted; if that fails too (librdkafka#4849)
        the commit's error is raised all the same: the runner fails, its claims stay, and
        the next owner fences ``txid`` before writing (docs/exactly-once.md#when-an-abort-fails).
        """
        began = time.monotonic()
        deadline = began + self.wait_s
        timing = self.ledger.timing
        while True:
            try:
                producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                if timing is not None:
                    timing.committed(time.monotonic() - began)
                return
            except KafkaException as exc:
                if timing is not None:
                    timing.commit_failed()  # counted per attempt: a retried one shows too
                err = kafka_error_of(exc)
                if err is None:
                    raise
                outcome = classify(err)
                if outcome is Outcome.FENCED or self.faults.fenced_by is not None:
                    raise self.faults.fenced(self.faults.fenced_by or err) from None
                if err.retriable() and time.monotonic() < deadline:
                    continue
                if outcome is Outcome.ABORT or not err.fatal():
                    # Left open it would hold the target's last stable offset until the
                    # transaction timeout; a fatal producer cannot abort anything.
                    abort_transaction(producer, _FAILED_COMMIT_ABORT_S, txid)
                raise failure_kind(err, ReplicationError)(
                    f"a transaction on the target failed, nothing of it is committed: "
                    f"{describe(err)}" + self.ledger.uncommitted_of(positions)
                ) from None
