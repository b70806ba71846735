"""The runner's source reader: its partitions, read from their committed positions.

Runs on: executor, one per runner task. A librdkafka consumer *assigned* (never subscribed:
no group membership, no offset commits on the source, which may be read-only) to the
runner's partitions at their progress offsets, ``read_committed`` by default. It also knows
where each partition stands: the next offset to read, and (``--until-caught-up``) whether a
partition reached its range end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from k2k.errors import ReplicationError
from k2k.kafka import TP
from k2k.kafka.factory import StatsCallback, build_consumer, ready
from k2k.kafka.faults import Outcome, classify, describe, is_unreachable
from k2k.pipeline.plan import PartitionOutcome, PartitionRange
from k2k.pipeline.task.commit.ledger import Positions

__all__ = ["SourceReader"]

log = logging.getLogger("k2k.runner")

#: The most records one consume call returns.
_MAX_CONSUME_BATCH = 10_000
#: How long an idle runner waits for its next record.
_IDLE_WAIT_S = 0.05


class SourceReader:
    """Runs on: executor. Reads the runner's active ranges; a range with an end that is
    already reached is marked so in ``outcomes`` and never assigned.

    Its cost per record and per wake-up does not grow with the partitions assigned
    (docs/architecture.md#cost-per-record): the copier marks, once per run, the partitions
    it read in :attr:`touched` and in :attr:`behind`; a partition leaves :attr:`behind`
    when it is found at the end its last fetch reported. Caught up is then an empty set,
    and a commit point reads the positions of the partitions that moved only.
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, str],
        ranges: list[PartitionRange],
        committed: Mapping[TP, int],
        outcomes: Mapping[TP, PartitionOutcome],
        on_error: Callable[[KafkaError], None],
        on_records_lost: str = "fail",
        on_stats: StatsCallback | None = None,
    ) -> None:
        """``on_records_lost``: ``errorHandling.onSourceRecordsLost`` (:meth:`_lost`);
        ``on_stats``: the consumer's statistics callback (k2k.metrics.clientstats)."""
        self.on_records_lost = on_records_lost
        self._on_stats = on_stats
        self.committed = committed
        self.outcomes = outcomes
        self._conf = consumer_conf
        self._on_error = on_error
        self.topics: set[str] = set()
        #: Range ends still to reach (``--until-caught-up``), and the partitions with none.
        self.bounds: dict[TP, int] = {}
        self.unbounded: set[TP] = set()
        self.assigned: list[TopicPartition] = []
        self.eof: dict[TP, int] = {}
        self.retired: set[TP] = set()  # reached their range end: paused
        #: Partitions read (records or an EOF event) since the last commit point.
        self.touched: set[TP] = set()
        #: Partitions read (or assigned) since they were last seen at the end their last
        #: fetch reported: an EOF event, or a caught-up check (:meth:`caught_up`).
        self.behind: set[TP] = set()
        self._consumer: Consumer | None = None
        self.add(ranges)

    def add(self, ranges: list[PartitionRange]) -> None:
        """Start reading ``ranges`` (the consumer is created with the first one)."""
        active = [r for r in ranges if r.end is None or r.start < r.end]
        for r in ranges:
            if r.end is not None and r.start >= r.end:
                self.outcomes[(r.topic, r.partition)].reached_end = True
        for r in active:
            tp = (r.topic, r.partition)
            if r.end is None:
                self.unbounded.add(tp)
            else:
                self.bounds[tp] = r.end
        new = [TopicPartition(r.topic, r.partition, r.start) for r in active]
        if not new:
            return
        if self._consumer is None:
            self._consumer = build_consumer(self._conf, self._on_error, self._on_stats)
            ready(self._consumer, new[0].topic)
        self.assigned.extend(new)
        self.behind.update((tp.topic, tp.partition) for tp in new)
        self.topics.update(r.topic for r in active)
        self._consumer.incremental_assign(new)

    def drop(self, tps: set[TP]) -> None:
        """Stop reading ``tps`` (after their last commit)."""
        gone = [tp for tp in self.assigned if (tp.topic, tp.partition) in tps]
        if gone:
            self.consumer.incremental_unassign([TopicPartition(t.topic, t.partition) for t in gone])
        self.assigned = [tp for tp in self.assigned if (tp.topic, tp.partition) not in tps]
        self.topics = {tp.topic for tp in self.assigned}
        for tp in tps:
            self.bounds.pop(tp, None)
            self.unbounded.discard(tp)
            self.eof.pop(tp, None)
            self.retired.discard(tp)
            self.touched.discard(tp)
            self.behind.discard(tp)

    @property
    def consumer(self) -> Consumer:
        """The consumer; there is none when no range is left to read."""
        assert self._consumer is not None, "no partition to read"
        return self._consumer

    @property
    def reading(self) -> bool:
        """True while some assigned partition has no end or has not reached it."""
        return bool(self.assigned) and bool(self.bounds or self.unbounded)

    def take(self, limit: int) -> list[Message]:
        """What the consumer has queued now, at most ``limit`` records (never waits)."""
        return self.consumer.consume(min(_MAX_CONSUME_BATCH, limit), 0)

    def wait(self) -> list[Message]:
        """Wait briefly for the next record. One record ends the wait: ``consume(n, t)``
        would hold the first record back until n arrived or t passed."""
        return self.consumer.consume(1, _IDLE_WAIT_S)

    def on_event(self, m: Message) -> None:
        """A consumer event in place of a record: partition EOF, or an error."""
        err = m.error()
        if err is None:
            return  # only events are passed here; a record is the copier's
        if err.code() == KafkaError._PARTITION_EOF:
            tp = (m.topic() or "", m.partition() or 0)
            self.eof[tp] = m.offset() or 0
            if tp in self.unbounded or tp in self.bounds:  # assigned, not retired
                self.touched.add(tp)
                self.behind.discard(tp)
            return
        where = f"{m.topic()}[{m.partition()}]"
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            self._lost((m.topic() or "", m.partition() or 0))
            return
        if classify(err) is Outcome.RETRY:
            level = logging.DEBUG if is_unreachable(err) else logging.WARNING  # as in faults.py
            log.log(level, "source %s: %s (retrying)", where, describe(err))
            return
        raise ReplicationError(f"reading source {where} failed: {describe(err)}")

    def _lost(self, tp: TP) -> None:
        """The position of ``tp`` is outside the partition. Below its earliest offset
        (retention deleted records never replicated): ``fail`` stops naming the range,
        ``continue`` moves on to the earliest offset. Past its end (the topic was recreated):
        always stops, as progress never moves backwards by itself."""
        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(tp[0], tp[1]), timeout=10, cached=False
        )
        position = self.positions({tp: None})[tp]
        where = f"source {tp[0]}[{tp[1]}]"
        command = f"k2k offsets reset -f <pipeline file> --topic {tp[0]} --partition {tp[1]}"
        if position >= low:
            raise ReplicationError(
                f"{where}: the committed position {position} is past the partition's end "
                f"{high} (the topic was recreated or truncated?); to replicate it from its "
                f"start, stop the pipeline and run {command}"
            )
        lost = f"records {position}..{low - 1} were deleted (retention) before they were replicated"
        if self.on_records_lost != "continue":
            raise ReplicationError(
                f"{where}: {lost}; to continue from its earliest offset {low}, stop the "
                f"pipeline and run {command} (or set errorHandling.onSourceRecordsLost: "
                "continue)"
            )
        log.warning(
            "%s: %s; continuing from %d (errorHandling.onSourceRecordsLost)", where, lost, low
        )
        self.outcomes[tp].lost += low - position
        self.touched.add(tp)
        self.behind.add(tp)
        # The partition's fetcher stopped on the error (a seek is refused): assign it anew.
        self.consumer.incremental_unassign([TopicPartition(tp[0], tp[1])])
        self.consumer.incremental_assign([TopicPartition(tp[0], tp[1], low)])

    def positions(self, only: Mapping[TP, object] | set[TP] | None = None) -> Positions:
        """Next offset to read per assigned partition (``only``: of those partitions): the
        consumer's position, or the offset of a partition-EOF event past it (under
        read_committed, transaction markers and aborted records occupy offsets that are
        never delivered)."""
        if only is None:
            tps = self.assigned
        else:
            reading = self.unbounded
            tps = [
                TopicPartition(t, p)
                for t, p in only
                if (t, p) in reading or (t, p) in self.bounds or (t, p) in self.retired
            ]
        out: Positions = {}
        if not tps:
            return out
        for tp in self.consumer.position(tps):
            key = (tp.topic, tp.partition)
            out[key] = max(tp.offset, self.eof.get(key, -1), self.committed[key])
        return out

    def seen_end(self, tp: TP) -> int | None:
        """The partition's end as the last fetch reported it (no request), None before one
        (or with nothing left to read: no consumer)."""
        if self._consumer is None:
            return None
        high: int = self._consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
        return high if high >= 0 else None

    def caught_up(self) -> Positions | None:
        """The positions that moved since the last commit point when every partition still
        read has reached the end its last fetch reported, else None. A backlog is never
        caught up even when the consumer's queue briefly runs dry."""
        if self.behind and not self._reached_ends():
            return None
        return self.moved_positions(())

    def _reached_ends(self) -> bool:
        """Whether every partition in :attr:`behind` is at the end its last fetch reported
        (librdkafka's cached high watermark: no request); those found there leave the set.

        A partition that gets records in every fetch never sees an EOF event, so it is
        checked here. The check stops at the first partition still behind (in a backlog,
        the first one looked at), and a partition found at the end is not looked at again
        until the copier reads from it: the cost follows the runs read, not the partitions
        assigned."""
        consumer = self.consumer
        reached: list[TP] = []
        behind = False
        for key in self.behind:
            tp = TopicPartition(*key)
            high = consumer.get_watermark_offsets(tp, cached=True)[1]
            position = consumer.position([tp])[0].offset
            if high < 0 or max(position, self.eof.get(key, -1)) < high:
                behind = True
                break
            reached.append(key)
        self.behind.difference_update(reached)
        return not behind

    def moved_positions(self, unwritten: Iterable[TP]) -> Positions:
        """A commit point's positions: of the partitions read since the last one, and of
        ``unwritten`` (partitions without progress yet, read or not). Starts the next
        commit point's count."""
        out = self.positions(self.touched.union(unwritten))
        for tp in unwritten:
            out.setdefault(tp, self.committed[tp])
        self.touched.clear()
        return out

    def final_positions(self, unwritten: set[TP]) -> Positions:
        """Lease end (or a change of partitions): where every partition stands, partitions
        without progress included."""
        final = self.positions() if self.assigned else {}
        for tp in unwritten:
            final.setdefault(tp, self.committed[tp])
        self.touched.clear()
        return final

    def retire_finished(self) -> None:
        """Stop reading partitions that reached their range end (``--until-caught-up``); only
        the bounded partitions read since the last commit point can have reached it."""
        if not self.bounds:
            return
        moved = [tp for tp in self.touched if tp in self.bounds]
        if not moved:
            return
        positions = self.positions(dict.fromkeys(moved))
        finished = [tp for tp in moved if positions[tp] >= self.bounds[tp]]
        if not finished:
            return
        done = set(finished)
        self.consumer.pause([tp for tp in self.assigned if (tp.topic, tp.partition) in done])
        for tp in finished:
            del self.bounds[tp]
            self.retired.add(tp)
            self.behind.discard(tp)
            self.outcomes[tp].reached_end = True

    def serve(self) -> None:
        """Serve what the consumer queued for its poll while it has no partition to read:
        a consumer never polled keeps every statistics document it emits
        (k2k.metrics.clientstats). With none assigned, no record or event is lost."""
        if self._consumer is not None and not self.assigned:
            self._consumer.poll(0)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
