"""The record copier: the per-record hot loop, consumed records in, produce calls out.

Runs on: executor, inside the runner's loop, once per consumed batch. A consumed batch holds
*runs*: consecutive records of one source partition. Everything that is the same for a run
(its topic's :class:`~k2k.stages.topicplan.TopicPlan`, target topic and partition, tracing
headers but the offset, which callbacks go where) is decided once per run; per record the
copier reads the record's fields and calls ``produce``.

Acknowledgements are placed per run, not per record: with ``partition: source`` a run goes
to one target partition, whose order the idempotent producer keeps, so only the run's last
record carries the commit strategy's callback (see :mod:`k2k.pipeline.task.commit.at_least_once`
for why that is safe). With ``partition: hash`` or ``producer`` a run spreads over target
partitions (no partition is passed to ``produce``: the producer's partitioner places each
record) and every record carries one. A Python call per record is the largest cost after consume and
produce, which is why the callbacks are placed so sparingly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import not_
from typing import Any

from confluent_kafka import KafkaException, Message, Producer

from k2k.errors import K2KError
from k2k.kafka.produce import produce_when_room
from k2k.pipeline.task.commit import CommitStrategy, DeliveryCallback
from k2k.pipeline.task.identical import Identity
from k2k.pipeline.task.observe import ProducedRun, RunObserver, RunReport
from k2k.stages.headers import Header
from k2k.stages.topicplan import TopicPlan
from k2k.transforms import FAILED, FILTERED, KEPT, Output

__all__ = ["FAIL_AFTER_ENV", "RecordCopier", "make_copier"]

#: Test-only hook (never set in production): the first attempt of every runner task raises
#: once it has produced this many records, in the middle of a commit batch, so tests can
#: prove that a retried Spark task continues exactly after the committed progress.
FAIL_AFTER_ENV = "K2K_TEST_FAIL_TASK_AFTER_RECORDS"


class RecordCopier:
    """Runs on: executor. Produces consumed records to the target, run by run."""

    def __init__(
        self,
        plans: Mapping[str, TopicPlan],
        topics: set[str],
        on_event: Callable[[Message], None],
        on_produce_error: Callable[[Message, KafkaException], K2KError],
        observer: RunObserver | None = None,
        starts: Mapping[tuple[str, int], int] | None = None,
        reads: tuple[set[tuple[str, int]], set[tuple[str, int]]] | None = None,
        identity: Identity | None = None,
    ) -> None:
        """``reads``: the source reader's ``touched`` and ``behind`` sets, kept current once
        per run (see :class:`~k2k.pipeline.task.source.SourceReader`); ``identity``: the
        identical-offsets checks, told of a gap before the run after it is produced (it
        must also be among the observers)."""
        self.plans = dict(plans)
        #: With one topic a run ends only where the partition changes.
        self.only_topic = next(iter(topics)) if len(topics) == 1 else None
        self.on_event = on_event
        self.on_produce_error = on_produce_error
        self.observer = observer
        #: An observer of ``partition: hash``/``producer`` runs needs each record's own target partition
        #: and offset, so every record is a run of its own.
        self.one_by_one = observer is not None and any(
            p.partitioning.spreads for p in plans.values()
        )
        #: An observed run also ends where the source offsets jump (see observe.py).
        self.split_gaps = observer is not None and not self.one_by_one
        #: Per observed partition, the source offset after the last record copied so far
        #: (first: where the runner started reading it).
        self._read_to: dict[tuple[str, int], int] = dict(starts or {})
        self.records = 0
        self.bytes = 0
        self._tracing: dict[tuple[str, int], tuple[list[Header], list[Header]]] = {}
        #: Bidirectional replication: the loop breaker (the same for every topic), and how
        #: many source records it kept from being replicated back.
        self.marker = next((p.marker for p in plans.values() if p.marker is not None), None)
        self.skipped = 0
        self._touched, self._behind = reads if reads is not None else (set(), set())
        self.identity = identity
        #: ``replication[].transforms``: whether any topic has steps; the outputs of the
        #: records of the batch being copied (aligned with it; None: copied as consumed);
        #: records left out by a filter and by ``onError: skip``.
        self.transforming = any(p.steps is not None for p in plans.values())
        self.rewriting = any(p.steps is not None and p.steps.rewrites for p in plans.values())
        self._outputs: list[Output | None] = []
        self.filtered = 0
        self.failed = 0

    def reassigned(
        self, plans: Mapping[str, TopicPlan], topics: set[str], gone: set[tuple[str, int]]
    ) -> None:
        """The runner's partitions changed: the plans of new topics, the topics now read,
        and the partitions let go (their per-partition state goes with them)."""
        for topic, plan in plans.items():
            self.plans.setdefault(topic, plan)
        self.transforming = any(p.steps is not None for p in self.plans.values())
        self.rewriting = any(p.steps is not None and p.steps.rewrites for p in self.plans.values())
        self.only_topic = next(iter(topics)) if len(topics) == 1 else None
        for tp in gone:
            self._read_to.pop(tp, None)
            self._tracing.pop(tp, None)

    def start_at(self, starts: Mapping[tuple[str, int], int]) -> None:
        """Where the runner starts reading partitions it took on."""
        self._read_to.update(starts)

    def copy(self, msgs: Sequence[Message], strategy: CommitStrategy) -> None:
        """Produce every record of ``msgs`` into the strategy's open batch (begun before the
        first record: a batch of consumer events alone opens nothing); consumer events go
        to ``on_event``. With bidirectional replication, records the other direction wrote
        are dropped first; they count toward the batch (``strategy.produced``), so that the
        committed progress moves past them on time even when nothing else arrives."""
        skipped = 0
        if self.marker is not None:
            kept = self.marker.unmarked(msgs)
            skipped = len(msgs) - len(kept)
            if skipped:
                self._read_past(msgs)  # the next commit point moves past what was skipped
            msgs = kept
        dropped = 0
        if self.transforming:
            kept = self._transform(msgs)
            dropped = len(msgs) - len(kept)
            if dropped:
                self._read_past(msgs)  # as above: progress moves past what steps dropped
            msgs = kept
        n = len(msgs)
        i = records = acks = 0
        producer = ack = None
        only_topic = self.only_topic
        one_by_one = self.one_by_one
        touched, behind = self._touched, self._behind
        while i < n:
            m = msgs[i]
            if m.error() is not None:
                self.on_event(m)
                i += 1
                continue
            if producer is None:
                strategy.begin()
                producer, ack = strategy.producer, strategy.on_ack
            part = m.partition() or 0
            topic = only_topic or m.topic() or ""
            j = i + 1 if one_by_one else self._run_end(msgs, i, part, topic)
            if self.split_gaps and j - i > 1:
                j = _gapless_end(msgs, i, j)
            acks += self._copy_run(msgs, i, j, topic, part, producer, ack)
            key = (topic, part)
            touched.add(key)
            behind.add(key)
            records += j - i
            i = j
        if records:
            self.records += records
        if records or skipped or dropped:
            self.skipped += skipped
            strategy.produced(records + skipped + dropped, acks)

    def _read_past(self, msgs: Sequence[Message]) -> None:
        """Mark the partitions of ``msgs`` read (bidirectional replication skips some)."""
        touched, behind = self._touched, self._behind
        for m in msgs:
            if m.error() is None:
                key = (m.topic() or "", m.partition() or 0)
                touched.add(key)
                behind.add(key)

    def _transform(self, msgs: Sequence[Message]) -> list[Message]:
        """The records of ``msgs`` the topics' steps keep (consumer events too), their
        outputs kept aligned in ``_outputs`` for :meth:`_copy_run`."""
        if not self.rewriting:
            return self._filter(msgs)
        kept: list[Message] = []
        outputs: list[Output | None] = []
        plans = self.plans
        only = self.only_topic
        for m in msgs:
            steps = None if m.error() is not None else plans[only or m.topic() or ""].steps
            if steps is None:
                kept.append(m)
                outputs.append(None)
                continue
            outcome, output = steps.run(m)
            if outcome == KEPT:
                kept.append(m)
                outputs.append(output)
            elif outcome == FILTERED:
                self.filtered += 1
            else:
                self.failed += 1
        self._outputs = outputs
        return kept

    def _filter(self, msgs: Sequence[Message]) -> list[Message]:
        """:meth:`_transform` when every topic's steps are filters: no outputs, and with one
        topic one call per record."""
        plans, only = self.plans, self.only_topic
        if only is not None:
            steps = plans[only].steps
            if steps is None:
                return list(msgs)
            outcome = steps.outcome
            outcomes = [KEPT if m.error() is not None else outcome(m) for m in msgs]
        else:
            outcomes = [
                KEPT
                if m.error() is not None or (s := plans[m.topic() or ""].steps) is None
                else s.outcome(m)
                for m in msgs
            ]
        kept = list(compress(msgs, map(not_, outcomes)))  # KEPT is 0
        if len(kept) < len(msgs):
            self.filtered += outcomes.count(FILTERED)
            self.failed += outcomes.count(FAILED)
        return kept

    def _run_end(self, msgs: Sequence[Message], i: int, part: int, topic: str) -> int:
        """The end (exclusive) of the run of ``topic[part]`` that starts at ``msgs[i]``."""
        n = len(msgs)
        j = i + 1
        if self.only_topic is not None:
            while j < n and (x := msgs[j]).partition() == part and x.error() is None:
                j += 1
            return j
        while (
            j < n
            and (x := msgs[j]).partition() == part
            and x.error() is None
            and x.topic() == topic
        ):
            j += 1
        return j

    def _copy_run(
        self,
        msgs: Sequence[Message],
        first: int,
        end: int,
        topic: str,
        part: int,
        producer: Producer,
        ack: DeliveryCallback | None,
    ) -> int:
        """Produce ``msgs[first:end]``, one run of ``topic[part]``; returns the callbacks of
        ``ack`` attached. One function on purpose: a Python call per record would cost more
        than anything else the loop does besides consume and produce."""
        plan = self.plans[topic]
        target = plan.target
        target_part = plan.partitioning.target_partition(part)
        keep_ts = plan.keep_timestamp
        tracing = plan.tracing
        offset_header = tracing.offset if tracing is not None else None
        before, after = self._trace_headers(plan, topic, part)
        # Headers k2k adds: tracing, then the bidirectional stamp (see _trace_headers).
        adds = tracing is not None or plan.marker is not None
        each, first_cb, last_cb, acks, run = self._callbacks(plan, msgs, first, end, ack)
        produce = producer.produce
        records = msgs[first:end]
        keys, values, headerses = self._run_data(plan, records, first, end)
        # Each record's callback, laid out per run: the loop then only reads it.
        callbacks = [each] * (end - first)
        callbacks[0] = first_cb
        callbacks[-1] = last_cb
        for m, key, value, headers, cb in zip(
            records, keys, values, headerses, callbacks, strict=True
        ):
            if adds:
                headers = headers if headers is not None else []
                headers.extend(before)
                if offset_header:
                    headers.append((offset_header, str(m.offset()).encode()))
                headers.extend(after)
            ts = 0
            if keep_ts:
                ts = m.timestamp()[1]
                if ts < 0:
                    ts = 0
            try:
                produce(target, value, key, target_part, cb, None, ts, headers)
            except BufferError:
                try:
                    produce_when_room(
                        producer, target, value, key, target_part, cb, None, ts, headers
                    )
                except KafkaException as exc:
                    raise self.on_produce_error(m, exc) from None
            except KafkaException as exc:
                raise self.on_produce_error(m, exc) from None
        # Key and value bytes per run, summed in C (None data counts nothing).
        self._account(sum(map(len, filter(None, keys))), sum(map(len, filter(None, values))), run)
        return acks

    def _run_data(
        self, plan: TopicPlan, records: Sequence[Message], first: int, end: int
    ) -> tuple[list[bytes | None], list[bytes | None], Iterable[Any]]:
        """A run's keys, values and headers (lists, the headers read as the loop goes; the
        headers stub also allows a dict, which consumed records never hold): as consumed,
        rewritten by a schema mapping (one call per run) and by the topic's transform steps."""
        if plan.transform is not None:
            keys, values = plan.transform(records)
        else:
            keys, values = list(map(Message.key, records)), list(map(Message.value, records))
        steps = plan.steps
        if steps is not None and steps.rewrites:
            outputs = self._outputs[first:end]
            if steps.rewrites_data:  # never with a schema mapping (refused by the config)
                keys = [o[0] for o in outputs]  # type: ignore[index]
                values = [o[1] for o in outputs]  # type: ignore[index]
            return keys, values, [o[2] for o in outputs]  # type: ignore[index]
        if plan.keep_headers:
            return keys, values, map(Message.headers, records)
        return keys, values, repeat(None, end - first)

    def _account(self, key_size: int, value_size: int, run: ProducedRun | None) -> None:
        """A run's key and value bytes: the copier's total and, when observed, the run's
        own (set before its acknowledgement is served, in a later poll or flush)."""
        self.bytes += key_size + value_size
        if run is not None:
            run.byte_count = key_size + value_size
            run.key_bytes = key_size

    def _callbacks(
        self,
        plan: TopicPlan,
        msgs: Sequence[Message],
        first: int,
        end: int,
        ack: DeliveryCallback | None,
    ) -> tuple[
        DeliveryCallback | None,
        DeliveryCallback | None,
        DeliveryCallback | None,
        int,
        ProducedRun | None,
    ]:
        """The callbacks of a run's records: (every record, first record, last record), how
        many of them are ``ack``, and the observed run (None without an observer)."""
        spreads = plan.partitioning.spreads
        if self.observer is None:
            if spreads:
                return ack, ack, ack, (end - first if ack is not None else 0), None
            return None, None, ack, (1 if ack is not None else 0), None
        # Observed: with ``partition: hash`` every run is one record (see copy()).
        part = msgs[first].partition() or 0
        first_offset = msgs[first].offset() or 0
        last = msgs[end - 1]
        last_offset = last.offset() or 0
        read_to = self._read_to
        tp = (plan.source, part)
        if plan.identical and (before := read_to.get(tp, first_offset)) < first_offset:
            identity = self.identity
            if identity is not None and identity.watched(tp):
                identity.gap(tp, before, first_offset)  # raises, or the partition is mapped
        run = ProducedRun(
            plan.source,
            part,
            first_offset,
            last_offset,
            end - first,
            plan.target,
            source_from=min(first_offset, read_to.get(tp, first_offset)),
            source_timestamp=last.timestamp()[1],
            read_at=time.time(),
        )
        read_to[tp] = last_offset + 1
        report = RunReport(run, self.observer, ack, single=end - first == 1)
        return None, report.on_first, report.on_last, (1 if ack is not None else 0), run

    def _trace_headers(
        self, plan: TopicPlan, topic: str, part: int
    ) -> tuple[list[Header], list[Header]]:
        """The tracing headers before and after the offset, built once per partition; the
        bidirectional marker's stamp goes last."""
        if plan.tracing is None and plan.marker is None:
            return [], []
        fixed = self._tracing.get((topic, part))
        if fixed is None:
            before, after = (
                plan.tracing.around_offset(topic, part) if plan.tracing is not None else ([], [])
            )
            if plan.marker is not None:
                after = [*after, plan.marker.stamp_header]
            fixed = self._tracing[(topic, part)] = (before, after)
        return fixed


def _gapless_end(msgs: Sequence[Message], first: int, end: int) -> int:
    """The end of the longest prefix of ``msgs[first:end]`` (one partition) whose source
    offsets are consecutive; one comparison when there is no gap."""
    base = msgs[first].offset() or 0
    if (msgs[end - 1].offset() or 0) - base == end - 1 - first:
        return end
    k = first + 1
    while k < end and msgs[k].offset() == base + (k - first):
        k += 1
    return k


class _FailingCopier(RecordCopier):
    """Test-only (``FAIL_AFTER_ENV``): raises once ``fail_at`` records were produced."""

    fail_at = 0

    def copy(self, msgs: Sequence[Message], strategy: CommitStrategy) -> None:
        super().copy(msgs, strategy)
        if self.records >= self.fail_at:
            raise RuntimeError(
                f"injected task failure after {self.records} records ({FAIL_AFTER_ENV})"
            )


def make_copier(
    plans: Mapping[str, TopicPlan],
    topics: set[str],
    on_event: Callable[[Message], None],
    on_produce_error: Callable[[Message, KafkaException], K2KError],
    observer: RunObserver | None = None,
    starts: Mapping[tuple[str, int], int] | None = None,
    reads: tuple[set[tuple[str, int]], set[tuple[str, int]]] | None = None,
    identity: Identity | None = None,
) -> RecordCopier:
    """The copier for a runner task: with the test-only failure hook when it is set for
    this task's first attempt. ``starts``: where the runner starts reading each partition;
    ``reads``: the source reader's ``touched`` and ``behind`` sets."""
    fail_at = _injected_failure_point()
    if fail_at is None:
        return RecordCopier(
            plans, topics, on_event, on_produce_error, observer, starts, reads, identity
        )
    copier = _FailingCopier(
        plans, topics, on_event, on_produce_error, observer, starts, reads, identity
    )
    copier.fail_at = fail_at
    return copier


def _injected_failure_point() -> int | None:
    raw = os.environ.get(FAIL_AFTER_ENV)
    if not raw:
        return None
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None or ctx.attemptNumber() > 0:
        return None
    return int(raw)
