"""At-least-once commits: pipelined epochs, progress written after acknowledgements.

Runs on: executor. Records are grouped into *epochs* of at most ``batchSize`` records or
``batchTimeout``. An epoch's progress records (next offset per source partition) are
written only once every record of that epoch, and of every earlier epoch, has been
acknowledged by the target. Epochs are pipelined: the loop keeps copying while
acknowledgements arrive, so progress lags data by about one round trip.

Acknowledgements are counted per *run* (see :mod:`k2k.pipeline.task.copier`): with
``partition: source`` one acknowledgement covers a whole run, because the producer's
gapless guarantee turns any failure of an earlier record into a fatal error and records
never expire locally (``PRODUCER_FORCED`` in :mod:`k2k.kafka.factory`). The user's delivery
timeout is applied here instead, to whole epochs.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

from k2k.errors import K2KError, ReplicationError, Unavailable
from k2k.kafka.faults import describe, failure_kind
from k2k.kafka.produce import produce_when_room
from k2k.pipeline.plan import CommitSpec
from k2k.pipeline.task.commit import BatchRecord, DeliveryCallback
from k2k.pipeline.task.commit.ledger import Positions, ProgressLedger
from k2k.pipeline.task.faults import RunnerFaults

__all__ = ["AtLeastOnce"]

#: How long each lease-end flush (the data, then the progress records) may take.
_FLUSH_TIMEOUT_S = 60.0


class _Epoch:
    """Records produced between two commit points, and the positions they reach.

    ``outstanding`` counts delivery callbacks not yet served; they run in the runner's own
    thread (inside ``poll``/``flush``), so no locking is needed.
    """

    __slots__ = ("error", "kind", "outstanding", "positions", "records", "sealed", "started")

    def __init__(self, now: float) -> None:
        self.outstanding = 0
        self.records = 0
        self.started = now
        self.sealed = now
        self.positions: Positions = {}
        self.error: str | None = None
        self.kind: type[K2KError] = ReplicationError  # Unavailable for an outage's error

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        self.outstanding -= 1
        if err is not None and self.error is None:
            self.error = (
                f"target rejected a record for {msg.topic()}[{msg.partition()}]: {describe(err)}"
            )
            self.kind = failure_kind(err, ReplicationError)


class AtLeastOnce:
    """Runs on: executor. The at-least-once :class:`~k2k.pipeline.task.commit.CommitStrategy`."""

    def __init__(
        self, spec: CommitSpec, producer: Producer, ledger: ProgressLedger, faults: RunnerFaults
    ) -> None:
        # Bound once: the loop asks for room and due-ness after every consumed batch.
        self.batch_size = spec.batch_size
        self.batch_timeout_s = spec.batch_timeout_s
        self.ack_timeout_s = spec.ack_timeout_s
        self.producer = producer
        self.ledger = ledger
        self.faults = faults
        self.epoch = _Epoch(time.monotonic())
        self.pending: deque[_Epoch] = deque()

    @property
    def on_ack(self) -> DeliveryCallback | None:
        return self.epoch.on_delivery

    def room(self) -> int:
        return self.batch_size - self.epoch.records

    def begin(self) -> None:
        """Nothing to open: an epoch is only a count until it is sealed."""

    def produced(self, records: int, acks: int) -> None:
        self.epoch.records += records
        self.epoch.outstanding += acks

    def due(self, now: float) -> bool:
        epoch = self.epoch
        return epoch.records >= self.batch_size or (
            bool(epoch.records or self.ledger.unwritten)
            and now - epoch.started >= self.batch_timeout_s
        )

    def seal(self, positions: Positions) -> None:
        now = time.monotonic()
        self.epoch.positions = positions
        self.epoch.sealed = now
        self.pending.append(self.epoch)
        self.epoch = _Epoch(now)

    def idle(self, caught_up: Callable[[], Positions | None]) -> None:
        """Caught up: records are visible once produced, so there is no reason to seal for
        them. Positions that moved past offsets no consumer is given (the records and
        marker of an aborted source transaction) are written now: no record would."""
        self.service()
        if not self.epoch.records:
            positions = caught_up()
            if positions and self.ledger.moves(positions):
                self.seal(positions)
                self._commit_ready()

    def service(self) -> None:
        self.producer.poll(0)
        self._commit_ready()

    def add(self, record: BatchRecord) -> None:
        """Written at once: what is added describes records the target acknowledged already,
        so it precedes the progress that covers them."""
        topic, partition, key, value = record
        produce_when_room(self.producer, topic, value, key, partition, self.ledger.on_delivery)

    def finish(self, positions: Positions) -> None:
        """Lease end: 1 seal the last epoch, 2 flush data, 3 write the remaining progress,
        4 flush progress."""
        # Step 1. The last epoch ends at the final positions.
        self.seal(positions)
        # Step 2. Every produced record acknowledged (or failed) within the flush timeout.
        timeout = _FLUSH_TIMEOUT_S
        left = self.producer.flush(timeout)
        if left:
            raise Unavailable(
                f"the target did not acknowledge {left} records within {timeout:.0f} s; "
                "nothing after the last progress is committed"
            )
        # Step 3. Progress for every epoch (all are complete now).
        self._commit_ready()
        # Step 4. The progress records themselves are acknowledged.
        left = self.producer.flush(timeout)
        self.faults.raise_failure()
        if left:
            raise Unavailable(f"{left} progress records were not acknowledged in {timeout:.0f} s")

    def reassigned(self, partitions: int) -> None:
        """Nothing is kept per partition here: the ledger holds the positions."""

    def abandon(self) -> None:
        """Records after the last progress are replayed on the next start, so those still
        queued in the producer are dropped rather than written beside the replay."""
        self.producer.purge(in_queue=True, in_flight=False, blocking=False)

    def close(self) -> None:
        """No resources of its own."""

    def _commit_ready(self) -> None:
        """Write progress for every leading epoch whose records are all acknowledged.

        1. fail if any record of a pending epoch was rejected (nothing of it is committed),
           or the oldest epoch waited longer than the delivery timeout;
        2. take the leading sealed epochs with no outstanding acknowledgement (order
           matters: an epoch's positions include every earlier epoch's records);
        3. one progress record per partition whose position moved, for the newest.
        """
        # Step 1.
        self._raise_failures()
        # Step 2. Consecutive complete epochs share one progress write: an epoch holds the
        # positions of the partitions it read, and positions only grow, so the newer ones win.
        newest: Positions | None = None
        sealed = 0.0
        while self.pending and self.pending[0].outstanding == 0:
            epoch = self.pending.popleft()
            if newest is None:
                newest, sealed = epoch.positions, epoch.sealed
            else:
                newest.update(epoch.positions)
        # Step 3.
        if newest is not None:
            self.ledger.mark_committed(self.ledger.write(self.producer, newest))
            if self.ledger.timing is not None:
                self.ledger.timing.committed(time.monotonic() - sealed)

    def _raise_failures(self) -> None:
        for epoch in self.pending:
            if epoch.error:
                self._count_failure()
                raise epoch.kind(epoch.error + self.ledger.uncommitted_of(epoch.positions))
        self.faults.raise_failure()
        if self.pending and self.pending[0].outstanding:
            timeout = self.ack_timeout_s
            if time.monotonic() - self.pending[0].sealed > timeout:
                self._count_failure()
                raise self.ledger.unacknowledged(timeout, self.pending[-1].positions)

    def _count_failure(self) -> None:
        if self.ledger.timing is not None:
            self.ledger.timing.commit_failed()
