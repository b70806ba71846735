"""The runner's progress ledger: what is committed per source partition, and the progress
records that move it.

Runs on: executor, one per runner task. Both commit strategies write progress through it;
they differ only in *when* a written position counts as committed (at once at-least-once,
after the transaction commits exactly-once).

Invariants:
  * ``committed[tp]`` never decreases within a lease (a position below it is written as it);
  * a partition in ``unwritten`` has no progress record yet; it gets one at the next commit
    point even if it stays empty (a later ``latest`` reset must not skip its records).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError, Message, Producer

from k2k.coordination.progress import ProgressStore
from k2k.errors import Unavailable
from k2k.formats import ProgressKey, ProgressRecord
from k2k.formats.progress import ValueWriter
from k2k.kafka import TP
from k2k.kafka.faults import describe
from k2k.kafka.murmur2 import murmur2_partition
from k2k.kafka.produce import produce_when_room
from k2k.pipeline.plan import (
    ControlTopicSpec,
    PartitionOutcome,
    PartitionRange,
    PolicySpec,
    ProgressSnapshot,
)
from k2k.pipeline.task.faults import RunnerFaults

__all__ = ["CommitTiming", "Positions", "ProgressLedger"]

#: Errors of records the producer dropped unsent because of another failure.
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

#: Next source offset to read, per partition.
Positions = dict[TP, int]
Written = list[tuple[TP, int]]


class CommitTiming(Protocol):
    """What the commit strategies report to metrics: once per commit, never per record."""

    def committed(self, seconds: float) -> None: ...

    def commit_failed(self) -> None: ...


class ProgressLedger:
    """Runs on: executor. Committed positions of one runner's partitions, and their writer.

    ``control`` says where progress goes and whom it names, ``consumer`` reads it back (empty:
    the planner's starts are taken as read), ``policies`` say what a bad read does, and
    ``topic_ids`` are the lease's source topic ids.
    """

    def __init__(
        self,
        ranges: Iterable[PartitionRange],
        faults: RunnerFaults,
        *,
        control: ControlTopicSpec,
        consumer: dict[str, str],
        policies: PolicySpec,
        topic_ids: Mapping[str, str],
    ) -> None:
        self.control = control
        self.consumer = consumer
        self.policies = policies
        self.topic_ids = dict(topic_ids)
        #: Read for every progress record written.
        self.commit_topic = control.commit_topic
        self.faults = faults
        self.outcomes: dict[TP, PartitionOutcome] = {}
        self.committed: Positions = {}
        self.unwritten: set[TP] = set()
        self.add(ranges)
        self._slots: dict[TP, tuple[bytes, int]] = {}
        #: Per partition, its progress values' writer (the fields fixed for the lease, encoded once).
        self._writers: dict[TP, ValueWriter] = {}
        #: Told how long each commit took, and when one failed (telemetry), else None.
        self.timing: CommitTiming | None = None
        #: Per partition, the foreign records counted on its target partition so far
        #: (read with its progress, grown by k2k.pipeline.task.foreign), written with it.
        self.foreign: dict[TP, int] = {}
        #: ``offsets: identical``: per partition whose target offsets stopped being its
        #: source offsets, the source offset where that happened (read with its progress,
        #: set by k2k.pipeline.task.identical, written with it).
        self.mapped_from: dict[TP, int] = {}
        #: The source end a partition's reader last saw (None: not known), written with its
        #: progress so that a failover can tell what was not replicated.
        self.seen_end: Callable[[TP], int | None] = lambda _tp: None

    # -- the partitions ------------------------------------------------------------------

    def add(self, ranges: Iterable[PartitionRange]) -> None:
        """Take ``ranges`` on at the planner's starts (:meth:`load` reads their progress)."""
        for r in ranges:
            tp = (r.topic, r.partition)
            self.outcomes[tp] = PartitionOutcome(r.topic, r.partition, r.start, r.start)
            self.committed[tp] = r.start
            if not r.has_progress:
                self.unwritten.add(tp)

    def drop(self, tps: Iterable[TP]) -> list[PartitionOutcome]:
        """Let ``tps`` go after their last commit; returns what was achieved for them."""
        dropped = []
        for tp in tps:
            dropped.append(self.outcomes.pop(tp))
            del self.committed[tp]
            self.unwritten.discard(tp)
            self.foreign.pop(tp, None)
            self.mapped_from.pop(tp, None)
            self._writers.pop(tp, None)
        return dropped

    # -- start ---------------------------------------------------------------------------

    def load(
        self,
        ranges: list[PartitionRange],
        abort: Callable[[], bool] | None = None,
        known: ProgressSnapshot | None = None,
    ) -> list[PartitionRange] | None:
        """The ranges, starting at the committed progress read now (after any predecessor
        was fenced), not at what the planner read earlier; None when ``abort()`` (the lease
        ended) came first: a dead member's open transaction, not fenced by this lease, may
        hold the read until its transaction timeout, longer than the sync timeout.

        ``known``: the driver's view of the commit topic; when it covers every range, only
        what was written after it is read (docs/architecture.md#taking-partitions-on)."""
        control, policies = self.control, self.policies
        if not ranges or not self.consumer:
            return ranges
        tps = [(r.topic, r.partition) for r in ranges]
        if known is not None and not known.covers(tps):
            known = None
        store = ProgressStore(
            self.consumer,
            control.commit_topic,
            control.commit_group,
            sync_timeout_s=control.sync_timeout_s,
            on_sync_timeout=policies.on_sync_timeout,
            on_bad_record=policies.on_bad_record,
            partitions=sorted({self.slot(tp)[1] for tp in tps}),
            # Predecessors are fenced or done by now; their last progress may sit behind
            # another runner's open transaction, which ends within its transaction timeout
            # (a transaction over thousands of partitions can outlast the sync timeout).
            past_open_transactions=True,
            open_transaction_s=control.open_transaction_s,
            start_at=known.read_to if known else None,
            known={tp: rec for tp in tps if (rec := known.records[tp])} if known else None,
        )
        try:
            latest = store.load_unless(abort or (lambda: False))
        finally:
            store.close()
        if latest is None:
            return None
        return [self._resume(r, latest.get((r.topic, r.partition))) for r in ranges]

    def _resume(self, r: PartitionRange, rec: ProgressRecord | None) -> PartitionRange:
        if rec is None or self._of_another_topic(rec):
            return r
        # The larger of the two: with onCommitSyncTimeout ignore the read may be partial,
        # and progress never moves backwards.
        start = max(rec.offset, r.start) if r.has_progress else rec.offset
        tp = (r.topic, r.partition)
        self.outcomes[tp] = PartitionOutcome(r.topic, r.partition, start, start)
        self.committed[tp] = start
        if rec.foreign:
            self.foreign[tp] = rec.foreign
        if rec.mapped_from is not None:
            self.mapped_from[tp] = rec.mapped_from
        self.unwritten.discard(tp)
        return PartitionRange(r.topic, r.partition, start, r.end, True)

    def advance(self, starts: Mapping[TP, int]) -> None:
        """Take ``starts`` (past the committed progress) as committed: their records are on
        the target already (identical offsets: k2k.pipeline.task.identical). Each gets a
        progress record at the next commit point."""
        for tp, start in starts.items():
            self.committed[tp] = start
            outcome = self.outcomes[tp]
            outcome.start = outcome.committed = start
            self.unwritten.add(tp)

    def _of_another_topic(self, rec: ProgressRecord) -> bool:
        """True for progress of a topic that was deleted and created again since (the
        planner already chose the new topic's start)."""
        topic_id = self.topic_ids.get(rec.topic, "")
        return bool(rec.topic_id and topic_id and rec.topic_id != topic_id)

    # -- commit points -------------------------------------------------------------------

    def moves(self, positions: Mapping[TP, int]) -> bool:
        """True when writing ``positions`` would change anything."""
        return any(
            pos > self.committed[tp] or tp in self.unwritten for tp, pos in positions.items()
        )

    def write(self, producer: Producer, positions: Mapping[TP, int]) -> Written:
        """Produce one progress record per partition whose position moved (or that has none
        yet); returns what was written. The caller decides when it counts as committed."""
        now_ms = int(time.time() * 1000)
        written: Written = []
        for tp, pos in positions.items():
            before = self.committed[tp]
            pos = max(pos, before)  # positions lag after a seek; never move backwards
            if pos == before and tp not in self.unwritten:
                continue
            self.produce(producer, tp, pos, now_ms)
            written.append((tp, pos))
        return written

    def produce(self, producer: Producer, tp: TP, pos: int, now_ms: int) -> None:
        """Produce the progress record ``tp`` -> ``pos`` (no bookkeeping)."""
        key, partition = self.slot(tp)
        write = self._writers.get(tp)
        if write is None:
            control = self.control
            write = self._writers[tp] = ProgressRecord.value_writer(
                control.pipeline, control.member, self.topic_ids.get(tp[0], "")
            )
        value = write(
            pos, now_ms, self.foreign.get(tp, 0), self.seen_end(tp), self.mapped_from.get(tp)
        )
        produce_when_room(producer, self.commit_topic, value, key, partition, self.on_delivery)

    def mark_committed(self, written: Written) -> None:
        for tp, pos in written:
            self.committed[tp] = pos
            outcome = self.outcomes[tp]
            outcome.committed = pos
            outcome.progress_written = True
            self.unwritten.discard(tp)

    def slot(self, tp: TP) -> tuple[bytes, int]:
        """The progress record's key bytes and its partition of the commit topic."""
        slot = self._slots.get(tp)
        if slot is None:
            key = ProgressKey(self.control.commit_group, tp[0], tp[1]).encode()
            slot = self._slots[tp] = (key, murmur2_partition(key, self.control.commit_partitions))
        return slot

    def one_per_progress_partition(self) -> list[TP]:
        """One of this runner's partitions for each commit-topic partition its progress
        records go to."""
        chosen: dict[int, TP] = {}
        for tp in sorted(self.committed):
            chosen.setdefault(self.slot(tp)[1], tp)
        return list(chosen.values())

    def uncommitted_of(self, positions: Mapping[TP, int]) -> str:
        """`` (uncommitted source ranges: t[p]@a..b, ...)`` for an error message, or ""."""
        parts = [
            f"{t}[{p}]@{self.committed[(t, p)]}..{pos - 1}"
            for (t, p), pos in sorted(positions.items())
            if pos > self.committed[(t, p)]
        ]
        return f" (uncommitted source ranges: {', '.join(parts)})" if parts else ""

    def unacknowledged(self, timeout_s: float, positions: Mapping[TP, int]) -> Unavailable:
        """The error for a commit batch the target did not acknowledge in time."""
        return Unavailable(
            f"the target did not acknowledge a commit batch within {timeout_s:.0f} s "
            "(the producer's delivery timeout, message.timeout.ms)" + self.uncommitted_of(positions)
        )

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """Delivery report of a control record written at a commit point: a failure fails
        the next commit point, so nothing after it counts as committed. A purged record is
        not a cause: a purge follows a failed transaction (whose commit raises the reason,
        e.g. records timed out: an outage, waited out) or a lease already failing."""
        if err is not None and err.code() not in _PURGED:
            topic = msg.topic() or self.commit_topic
            what = "progress" if topic == self.commit_topic else "a control record"
            self.faults.fail(f"could not write {what} to {topic}: {describe(err)}", err)
