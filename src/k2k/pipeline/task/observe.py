"""The per-run observer hook: what offset mapping and metrics learn from the data path.

Runs on: executor. A *run* is consecutive records of one source partition produced to one
target partition in one go. The runner reports each run once the target has acknowledged
its first and last record, with the target offsets they got: never per record, and not at
all when no observer is registered (the fast path carries no extra delivery callbacks).

With ``partition: hash`` the records of a consumed run spread over target partitions, so
each record is reported as a run of its own. Otherwise an observed run also ends where the
source offsets jump (transaction markers, aborted or compacted records), so that inside a
run source and target offsets advance together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import KafkaError, Message

__all__ = ["ProducedRun", "RunObserver", "RunReport", "observers"]


@dataclass(slots=True)
class ProducedRun:
    """One acknowledged run. ``count`` records with source offsets ``source_first`` to
    ``source_last`` (consecutive, see the module doc) went to
    ``target_topic[target_partition]`` at offsets ``target_first`` to ``target_last``.

    The target offsets are contiguous (``target_last - target_first + 1 == count``) unless
    another producer wrote to the same target partition in between.
    """

    source_topic: str
    source_partition: int
    source_first: int
    source_last: int
    count: int
    target_topic: str
    target_partition: int = -1
    target_first: int = -1
    target_last: int = -1
    #: Where the runner's read of the partition stood before this run: the source offsets
    #: in ``[source_from, source_first)`` hold nothing that is replicated.
    source_from: int = -1
    #: Key and value bytes of the run's records (as consumed).
    byte_count: int = 0
    #: Of ``byte_count``, the keys' bytes.
    key_bytes: int = 0
    #: The source timestamp (ms) of the run's last record; -1 when it has none.
    source_timestamp: int = -1
    #: When the runner read the run from the source (epoch seconds; 0 when unknown).
    read_at: float = 0.0

    @property
    def contiguous(self) -> bool:
        """True when every offset in between maps one to one (source and target)."""
        span = self.count - 1
        return (
            self.source_last - self.source_first == span
            and self.target_last - self.target_first == span
        )


class RunObserver(Protocol):
    """Called in the runner's thread (inside the producer's poll or flush), once per
    acknowledged run; it must be quick and must not produce to the target itself: records
    that commit with a batch go through the commit strategy it was built with
    (``CommitStrategy.add``).

    Acknowledged is not committed. Exactly-once, a run is reported when its batch is
    flushed, before the transaction commits: what the observer adds joins the same
    transaction, so it commits or aborts with the records it describes. At-least-once, the
    records are visible once acknowledged; what it adds is written at once, before the
    progress that covers them."""

    def on_run(self, run: ProducedRun) -> None: ...


class RunReport:
    """The delivery callbacks of one observed run: its first and its last record."""

    __slots__ = ("_ack", "_observer", "_waiting", "run")

    def __init__(
        self,
        run: ProducedRun,
        observer: RunObserver,
        ack: Callable[[KafkaError | None, Message], None] | None,
        single: bool,
    ) -> None:
        self.run = run
        self._observer = observer
        self._ack = ack
        self._waiting = 1 if single else 2

    def on_first(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.run.target_first = msg.offset() or 0
        self._done(err)

    def on_last(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.run.target_partition = msg.partition() or 0
            self.run.target_last = msg.offset() or 0
            if self._waiting == 1 and self.run.target_first < 0:
                self.run.target_first = self.run.target_last
        if self._ack is not None:
            self._ack(err, msg)
        self._done(err)

    def _done(self, err: KafkaError | None) -> None:
        self._waiting -= 1
        if err is not None:
            self._waiting = -1  # a failed run is never reported; its batch fails
        elif self._waiting == 0:
            self._observer.on_run(self.run)


class _Both:
    """Two observers of the same runs (offset mapping and metrics)."""

    __slots__ = ("first", "second")

    def __init__(self, first: RunObserver, second: RunObserver) -> None:
        self.first = first
        self.second = second

    def on_run(self, run: ProducedRun) -> None:
        self.first.on_run(run)
        self.second.on_run(run)


def observers(*given: RunObserver | None) -> RunObserver | None:
    """One observer for the given ones (None: no observer, the fast path)."""
    present = [o for o in given if o is not None]
    if not present:
        return None
    combined = present[0]
    for other in present[1:]:
        combined = _Both(combined, other)
    return combined
