"""Commit strategies: how a runner turns produced records into committed progress.

Runs on: executor. One strategy per delivery mode, behind one small interface, so the
runner's copy loop never asks which mode it is in:

* :class:`~k2k.pipeline.task.commit.at_least_once.AtLeastOnce` — records are grouped into
  pipelined *epochs*; an epoch's progress is written once all its records are acknowledged;
* :class:`~k2k.pipeline.task.commit.exactly_once.ExactlyOnce` — a batch and its progress are one
  transaction, written through two producers in turn.

The loop calls, in this order: :meth:`~CommitStrategy.room` (how many records the batch
takes), :meth:`~CommitStrategy.begin` before producing a consumed batch into it,
:meth:`~CommitStrategy.produced` after, :meth:`~CommitStrategy.seal` at a commit point
(``batchSize``/``batchTimeout``, or when the runner is caught up),
:meth:`~CommitStrategy.service` every iteration, :meth:`~CommitStrategy.finish` at lease end
and :meth:`~CommitStrategy.abandon` when the lease fails. Records that must commit with a
batch (e.g. offset mappings) join it through :meth:`~CommitStrategy.add`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from confluent_kafka import Producer

from k2k.pipeline.task.commit.ledger import Positions

__all__ = ["BatchRecord", "CommitStrategy", "DeliveryCallback"]

DeliveryCallback = Callable[..., None]
#: A control record that commits with the current batch: (topic, partition, key, value).
BatchRecord = tuple[str, int, bytes, bytes]


class CommitStrategy(Protocol):
    #: Where the loop produces now (exactly-once: changes at every commit point).
    producer: Producer

    @property
    def on_ack(self) -> DeliveryCallback | None:
        """The delivery callback a run's acknowledging record carries; None when the
        strategy needs no acknowledgements (the commit itself confirms every record)."""

    def room(self) -> int:
        """How many more records the open batch takes."""

    def begin(self) -> None:
        """Records are about to be produced into the open batch."""

    def produced(self, records: int, acks: int) -> None:
        """``records`` were produced, ``acks`` of them carrying :attr:`on_ack`."""

    def due(self, now: float) -> bool:
        """True when the open batch must be sealed (``batchSize`` or ``batchTimeout``)."""

    def seal(self, positions: Positions) -> None:
        """Commit point: the open batch, whose records end at ``positions``, commits."""

    def idle(self, caught_up: Callable[[], Positions | None]) -> None:
        """The consumer had nothing queued; ``caught_up()`` says where the partitions stand
        if the runner is at the end of every one of them (None otherwise)."""

    def service(self) -> None:
        """Between consumed batches: serve callbacks, commit what is ready, raise failures."""

    def add(self, record: BatchRecord) -> None:
        """``record`` describes records the target has acknowledged (e.g. an offset mapping):
        exactly-once it joins the open transaction, so it commits or aborts with them;
        at-least-once it is written at once, before the progress that covers them."""

    def finish(self, positions: Positions) -> None:
        """Lease end: commit everything up to ``positions``; raises when it cannot."""

    def reassigned(self, partitions: int) -> None:
        """After a commit (:meth:`finish`), the runner's partitions changed; it now reads
        ``partitions`` of them."""

    def abandon(self) -> None:
        """The lease failed: give up what is uncommitted (keep what did commit)."""

    def close(self) -> None:
        """Stop the strategy's own threads (the producers go with the runner task)."""
