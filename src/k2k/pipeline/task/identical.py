"""Identical offsets (``replication[].sink.offsets: identical``), the runner's side.

Runs on: executor, one :class:`Identity` per runner whose lease has an identical topic. A
target partition that only this pipeline writes, without transactions, gives consecutive
offsets to the idempotent producer's records; aligned once by the driver
(:mod:`k2k.pipeline.driver.alignment`), its end offset is the next source offset to copy.
Hence three rules (docs/offset-mapping.md#identical-offsets):

* **Resume at the target's end.** A runner taking an identical partition on starts at the
  target partition's end offset, not at the committed progress below it: records the target
  acknowledged after the last progress are not copied again (a copy would land at the wrong
  offset). Progress is the target.
* **No gap is written.** Before a run is produced, its first source offset must be where the
  partition's read stands; a jump (a transaction marker, aborted or compacted-away records,
  records deleted before they were copied) would put every later record at a wrong offset.
* **Every run lands in place.** Each acknowledged run's target offsets must be its source
  offsets (the delivery reports carry them: nothing per record); a record another producer
  wrote, or a second runner of the partition (a zombie), shifts them.

When a rule breaks, ``errorHandling.onOffsetGap`` decides: ``fail`` stops the runner with
one line (a gap before anything of it is written), ``map`` records in the partition's
progress where identity ended (``mappedFrom``), and the partition goes on as any other,
its offsets translated by its offset mappings from there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaException, Message, Producer, TopicPartition

from k2k.errors import ReplicationError, Unavailable
from k2k.kafka import TP
from k2k.kafka.factory import build_consumer
from k2k.kafka.faults import describe, kafka_error_of
from k2k.kafka.peek import records_at
from k2k.pipeline.plan import PartitionRange
from k2k.pipeline.task.commit.ledger import ProgressLedger
from k2k.pipeline.task.faults import RunnerFaults
from k2k.pipeline.task.observe import ProducedRun
from k2k.stages.topicplan import TopicPlan

__all__ = ["Identity"]

log = logging.getLogger("k2k.runner")

#: A ListOffsets "timestamp" that asks for the end offset (Kafka's LATEST).
_LATEST = -1
#: How long a stopping runner waits to mark where identical offsets ended.
_RECORD_S = 10.0
#: How long reading the last record past the progress of each resumed partition may take.
_PEEK_S = 30.0


class Identity:
    """Runs on: executor. The identical partitions of one runner: where they resume, and
    the two checks (see the module doc). ``target_consumer``: settings of a consumer of the
    target (the runner's control consumer), used only to list end offsets at take-on."""

    def __init__(
        self,
        plans: Mapping[str, TopicPlan],
        ledger: ProgressLedger,
        faults: RunnerFaults,
        on_gap: str,
        target_consumer: Mapping[str, str],
        source_consumer: Mapping[str, str],
    ) -> None:
        self.plans = plans
        self.ledger = ledger
        self.faults = faults
        self.on_gap = on_gap
        self.target_consumer = dict(target_consumer)
        self.source_consumer = dict(source_consumer)
        #: Partitions whose identity a foreign write ended under ``fail``: their progress
        #: is marked before the runner stops (:meth:`record_breaks`).
        self.unrecorded: set[TP] = set()

    def watched(self, tp: TP) -> bool:
        """True while ``tp``'s offsets are identical (its topic asks, and they did not end)."""
        plan = self.plans.get(tp[0])
        return plan is not None and plan.identical and tp not in self.ledger.mapped_from

    # -- take-on -----------------------------------------------------------------------

    def resume(self, ranges: list[PartitionRange]) -> list[PartitionRange]:
        """``ranges`` (their progress read), each identical one starting at its target
        partition's end offset; called after any predecessor was fenced or finished.

        A target that ends past the progress holds records acknowledged after it, if they
        are this copy's: the last of them must be the source record at the same offset
        (:meth:`_ours`). A target that ends below the progress lost records, or the
        progress moved past offsets no record holds (a transaction marker at the end)."""
        if self.on_gap == "fail":
            self._refuse_ended(ranges)
        mine = [r for r in ranges if self.watched((r.topic, r.partition))]
        if not mine:
            return ranges
        ends = self._target_ends([(self.plans[r.topic].target, r.partition) for r in mine])
        ahead: dict[TP, int] = {}
        for r in mine:
            tp = (r.topic, r.partition)
            end = ends[(self.plans[r.topic].target, r.partition)]
            if end > r.start:
                ahead[tp] = end
            elif end < r.start:
                self._short_target(r, end)
        moved = self._ours(ahead, {(r.topic, r.partition): r.start for r in mine})
        if moved:
            log.info(
                "identical offsets: %d partition(s) resume at their target's end, past their "
                "progress (e.g. %s)",
                len(moved),
                ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(moved.items())[:3]),
            )
        self.ledger.advance(moved)
        return [
            PartitionRange(r.topic, r.partition, moved[tp], r.end, True)
            if (tp := (r.topic, r.partition)) in moved
            else r
            for r in ranges
        ]

    def _ours(self, ahead: dict[TP, int], starts: Mapping[TP, int]) -> dict[TP, int]:
        """Of the partitions whose target ends past their progress (``ahead``: source
        partition -> target end), those whose last target record is the source record at
        the same offset; the others ended identity at their progress (another producer
        wrote there while nothing copied, a run of another copy, a source topic created
        again, or a run after a gap whose mark was lost in a crash)."""
        if not ahead:
            return {}
        last = {tp: end - 1 for tp, end in ahead.items()}
        target_at = {(self.plans[t].target, p): o for (t, p), o in last.items()}
        theirs = records_at(self.source_consumer, last, _PEEK_S)
        ours = records_at(self.target_consumer, target_at, _PEEK_S)
        confirmed: dict[TP, int] = {}
        for tp, end in sorted(ahead.items()):
            plan = self.plans[tp[0]]
            source, target = theirs.get(tp), ours.get((plan.target, tp[1]))
            if source is not None and target is not None and _same(plan, source, target):
                confirmed[tp] = end
                continue
            reason = (
                f"{tp[0]}[{tp[1]}]: target partition {plan.target}[{tp[1]}] ends at {end}, past "
                f"the progress ({starts[tp]}), but its record at offset {end - 1} is not the "
                f"source record at offset {end - 1}: records past the progress are not this "
                "copy's (another producer, another copy, or a source topic created again)"
            )
            self.broken(tp, starts[tp], reason, written=False)
        return confirmed

    def _refuse_ended(self, ranges: list[PartitionRange]) -> None:
        """Under ``fail``, a partition whose progress says identity ended (an earlier run
        stopped there) is not copied on as if it had not."""
        for r in ranges:
            plan = self.plans.get(r.topic)
            at = self.ledger.mapped_from.get((r.topic, r.partition))
            if plan is not None and plan.identical and at is not None:
                raise ReplicationError(
                    f"offsets no longer identical: {r.topic}[{r.partition}]'s progress says "
                    f"they ended at source offset {at} (an earlier run stopped there); "
                    "errorHandling.onOffsetGap is 'fail': set it to 'map' to go on through "
                    "offset mappings, or copy the partition again into an empty target "
                    "partition (k2k offsets reset)"
                )

    def _short_target(self, r: PartitionRange, end: int) -> None:
        """The target partition ends below the next source offset to copy: the progress
        moved past offsets no record holds (a transaction marker, records deleted before
        they were copied), or records the target had acknowledged are gone (an unclean
        leader election, records deleted there)."""
        plan = self.plans[r.topic]
        reason = (
            f"{r.topic}[{r.partition}]: target partition {plan.target}[{r.partition}] ends at "
            f"offset {end}, below the next source offset to copy, {r.start} (a transaction "
            "marker or records deleted before they were copied, or records lost on the target)"
        )
        self.broken((r.topic, r.partition), end, reason, written=False)

    def _target_ends(self, tps: list[TP]) -> dict[TP, int]:
        """The end offset (high watermark) of each target partition, in one request per
        leader; the target not answering is an outage (waited out by the planner)."""
        conf = {**self.target_consumer, "isolation.level": "read_uncommitted"}
        conf.setdefault("group.id", "k2k.identical-offsets")
        consumer = build_consumer(conf)
        try:
            asked = [TopicPartition(t, p, _LATEST) for t, p in tps]
            got = consumer.offsets_for_times(asked, timeout=30)
        except KafkaException as exc:
            err = kafka_error_of(exc)
            text = describe(err) if err is not None else str(exc)
            raise Unavailable(
                f"could not list the end offsets of target partitions: {text}"
            ) from None
        finally:
            consumer.close()
        ends: dict[TP, int] = {}
        for tp in got:
            if tp.error is not None:
                raise Unavailable(
                    f"could not list the end offset of target partition {tp.topic}"
                    f"[{tp.partition}]: {describe(tp.error)}"
                )
            ends[(tp.topic, tp.partition)] = tp.offset
        return ends

    # -- copy --------------------------------------------------------------------------

    def gap(self, tp: TP, read_to: int, first: int) -> None:
        """Before a run of ``tp`` from source offset ``first`` is produced, while its read
        stood at ``read_to``: the offsets in between will never be copied."""
        reason = (
            f"{tp[0]}[{tp[1]}]: source offsets jump from {read_to} to {first} (a transaction "
            "marker, aborted or compacted-away records, or records deleted before they were "
            "copied), so the records from there on cannot keep their offsets on the target"
        )
        self.broken(tp, read_to, reason, written=False)

    def on_run(self, run: ProducedRun) -> None:
        """An acknowledged run: where the target put it."""
        tp = (run.source_topic, run.source_partition)
        if run.target_first == run.source_first and run.target_last == run.source_last:
            return
        if not self.watched(tp):
            return
        reason = (
            f"{tp[0]}[{tp[1]}]: source offsets {run.source_first}..{run.source_last} were "
            f"written at {run.target_topic}[{run.target_partition}] offsets "
            f"{run.target_first}..{run.target_last}: another producer wrote to the target "
            "partition (or a second runner of it still writes)"
        )
        self.broken(tp, run.source_first, reason)

    def record_breaks(self, producers: Sequence[Producer]) -> None:
        """The runner stops (``fail``) after a foreign write ended identity: mark the
        partitions' progress (``mappedFrom``, at their committed offset), so that no later
        run resumes them as identical; bounded, and never raises (the stop goes on)."""
        if not self.unrecorded or not producers:
            return
        producer = producers[0]
        now_ms = int(time.time() * 1000)
        try:
            for tp in sorted(self.unrecorded):
                self.ledger.produce(producer, tp, self.ledger.committed[tp], now_ms)
            left = producer.flush(_RECORD_S)
        except KafkaException as exc:
            log.warning("could not mark where identical offsets ended: %s", exc)
            return
        if left:
            log.warning("could not mark where identical offsets ended within %g s", _RECORD_S)
        self.unrecorded.clear()

    def broken(self, tp: TP, source_offset: int, reason: str, *, written: bool = True) -> None:
        """Identity ended for ``tp`` at ``source_offset``: stop (``fail``), or go on through
        offset mappings (``map``), recorded in the partition's progress."""
        if self.on_gap == "fail":
            what = f"offsets no longer identical: {reason}; errorHandling.onOffsetGap is 'fail'"
            if not written:
                raise ReplicationError(what + " (nothing of it was written)")
            self.ledger.mapped_from.setdefault(tp, source_offset)
            self.unrecorded.add(tp)
            self.faults.fail(what)
            return
        if tp in self.ledger.mapped_from:
            return
        self.ledger.mapped_from[tp] = source_offset
        if not written:
            # Marked before anything past it is written: a crash then cannot hide it.
            self.unrecorded.add(tp)
            self.record_breaks(self.faults.producers)
        log.warning(
            "offsets no longer identical: %s; from source offset %d on they are translated by "
            "offset mappings (errorHandling.onOffsetGap: map)",
            reason,
            source_offset,
        )


def _same(plan: TopicPlan, source: Message, target: Message) -> bool:
    """Whether ``target`` is this pipeline's copy of ``source``, by what the copy keeps:
    the offset tracing header, the timestamp, and (without a schema mapping or a JSON
    step, which rewrite them) the key and the value."""
    checks = []
    offset_header = plan.tracing.offset if plan.tracing is not None else None
    if offset_header:
        traced = dict(target.headers() or []).get(offset_header)
        checks.append(traced == str(source.offset()).encode())
    if plan.keep_timestamp:
        checks.append(source.timestamp()[1] == target.timestamp()[1])
    if plan.transform is None and (plan.steps is None or not plan.steps.rewrites_data):
        checks.append(source.key() == target.key() and source.value() == target.value())
    return all(checks)
