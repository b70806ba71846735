"""The runner: one Spark task copying one runner group of source partitions for one lease.

Runs on: executor. In the order a record meets it:

0. **own** — the producers start (exactly-once: initialising both transactional ids fences
   every earlier producer of them), the claims are verified, then progress is read
   (:class:`~k2k.pipeline.task.commit.ledger.ProgressLedger`);
1. **read** — :class:`~k2k.pipeline.task.source.SourceReader`, a consumer assigned to the group's
   partitions at their progress offsets;
2. **stages and write** — :class:`~k2k.pipeline.task.copier.RecordCopier` applies each topic's
   compiled plan and produces to the target, run by run;
3. **commit** — the delivery mode's :mod:`commit strategy <k2k.pipeline.task.commit>` seals
   batches at ``batchSize``, ``batchTimeout`` or when caught up, and commits at lease end.

In a continuous lease (``LeaseSpec.live``) a runner is a *slot*: it copies until the lease
ends, and between two consumed batches it applies the assignment changes the driver sends
over the lease channel: it commits, lets go of the partitions it lost, takes on the new
ones (claims verified, progress read) and acknowledges; its other partitions never stop
(docs/architecture.md#leases-that-do-not-stop).

Python's cyclic garbage collector is off while a runner copies: every consumed batch
allocates thousands of message objects, and the collector kept scanning them
(docs/benchmarks.md#cyclic-gc-off-while-copying). Nothing in the loop forms a reference
cycle, so reference counting frees it all; the collector is switched back on at lease end.

Invariants (checked by the tests after every restart):
  * progress for a partition never moves backwards within a lease;
  * progress never covers a record the target has not acknowledged;
  * nothing is ever produced to the source cluster (the runner has no source producer).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterable, Iterator

from confluent_kafka import KafkaException, Producer

from k2k.coordination.claims import lost_claims
from k2k.errors import ClusterError, K2KError, ReplicationError, Unavailable
from k2k.kafka import TP
from k2k.kafka.counting import count_records
from k2k.kafka.factory import StatsCallback, build_producer, ready
from k2k.metrics.clientstats import CONSUMER, PRODUCER, ClientStatistics, Role
from k2k.metrics.tally import RunTally
from k2k.pipeline.channel import StopSignal
from k2k.pipeline.plan import LeaseSpec, PartitionRange, RunnerGroup, RunnerSummary, SlotAssignment
from k2k.pipeline.task.commit import CommitStrategy
from k2k.pipeline.task.commit.at_least_once import AtLeastOnce
from k2k.pipeline.task.commit.exactly_once import ExactlyOnce, start_transactional_producers
from k2k.pipeline.task.commit.ledger import ProgressLedger
from k2k.pipeline.task.copier import RecordCopier, make_copier
from k2k.pipeline.task.faults import DriverGone, Fenced, RunnerFaults
from k2k.pipeline.task.foreign import ForeignWatch, watched_targets
from k2k.pipeline.task.identical import Identity
from k2k.pipeline.task.observe import observers
from k2k.pipeline.task.source import SourceReader
from k2k.schemamapping.mapper import registered_by

__all__ = ["Runner", "run_groups"]

log = logging.getLogger("k2k.runner")

#: How long a continuous lease's runner with no partition waits for an assignment per turn.
_EMPTY_SLOT_WAIT_S = 0.25


def run_groups(spec: LeaseSpec, groups: Iterable[RunnerGroup]) -> Iterator[RunnerSummary]:
    """Runs on: executor, once per Spark partition of the lease job (one runner group each).

    ``spec`` and the groups arrive pickled; clients are created here because they are not
    picklable. Yields one small picklable :class:`RunnerSummary` per group: faults come back
    inside it rather than as exceptions, so the planner alone decides what happens next.
    """
    for group in groups:
        yield Runner(spec, group).run()


class Runner:
    """Runs on: executor. Copies one :class:`RunnerGroup` until its lease ends.

    A lease ends at its deadline, when the driver asks (:class:`StopSignal`), or when every
    bounded partition reached its end offset (``--until-caught-up``). When the driver is
    gone it ends at once, committing nothing (:class:`DriverGone`).
    """

    def __init__(self, spec: LeaseSpec, group: RunnerGroup) -> None:
        self.spec = spec
        self.group = group
        self.faults = RunnerFaults(group.transactional_id)
        self.ledger = ProgressLedger(
            group.ranges,
            self.faults,
            control=spec.control_topics,
            consumer=spec.clients.control_consumer,
            policies=spec.policies,
            topic_ids=spec.topic_ids,
        )
        #: Records, key+value bytes and bidirectional skips of a lease that ended cleanly.
        self.copied = (0, 0, 0, 0, 0)
        #: The runner's metrics (telemetry), fed by the run observer and the commits.
        self.tally = RunTally(spec.lease_id) if spec.telemetry else None
        self.ledger.timing = self.tally
        #: librdkafka's statistics of the source consumer and target producers, sent in the
        #: tally's frames (telemetry with metrics.clientStatistics).
        self.statistics: ClientStatistics | None = None
        if self.tally is not None and spec.clients.statistics_interval_ms:
            self.statistics = ClientStatistics(spec.clients.statistics_interval_ms)
            self.tally.client_statistics = self.statistics
        #: The foreign-write watch, when a topic can be watched (kept for changes).
        self.foreign: ForeignWatch | None = None
        #: Identical offsets' resume point and checks, when a topic asks for them.
        self.identity = (
            Identity(
                dict(spec.topics),
                self.ledger,
                self.faults,
                spec.policies.on_offset_gap,
                spec.clients.control_consumer,
                spec.clients.source_consumer,
            )
            if spec.commit.identical_offsets
            else None
        )

    def run(self) -> RunnerSummary:
        """Runs on: executor, once per task. Never raises for k2k faults: they are returned
        in the summary."""
        started = time.monotonic()
        summary = RunnerSummary(self.group.index)
        collecting = gc.isenabled()
        gc.disable()  # see the module doc: the copy loop makes no reference cycles
        signal: list[StopSignal] = []
        try:
            self._run(signal)
        except Fenced as exc:
            summary.fenced = str(exc)
        except K2KError as exc:
            summary.error, summary.error_class = str(exc), type(exc).__name__
        finally:
            if collecting:
                gc.enable()
            if signal and self.spec.live and not signal[0].is_set():
                signal[0].ended()  # the driver ends the lease rather than run a slot short
        summary.partitions = list(self.ledger.outcomes.values())
        (
            summary.records,
            summary.bytes,
            summary.skipped,
            summary.filtered,
            summary.transform_failed,
        ) = self.copied
        summary.schemas_registered = registered_by(p.transform for p in self.spec.topics.values())
        summary.seconds = time.monotonic() - started
        if self.tally is not None:
            summary.metrics = self.tally.frame(full=True).encode()
        return summary

    def _run(self, signal: list[StopSignal]) -> None:
        """Own, read progress, copy until the lease ends, commit. The consumer, the stop
        signal and the commit thread are closed here whatever happens (producers have no
        close: they go with the task). ``signal`` receives the stop signal."""
        spec = self.spec
        with contextlib.ExitStack() as closing:
            try:
                producers = self._own()
                slot = self.group.index if spec.live else None
                stop = StopSignal(spec.control, self._frames if self.tally else None, slot)
                signal.append(stop)
                closing.callback(stop.close)
                ranges = self.ledger.load(
                    list(self.group.ranges), abort=stop.is_set, known=self.group.progress
                )
                if ranges is None:
                    return  # the lease ended before its progress could be read: nothing copied
                if self.identity is not None:
                    ranges = self.identity.resume(ranges)
                consumer_conf, on_stats = self._client(CONSUMER)
                source = SourceReader(
                    consumer_conf,
                    ranges,
                    self.ledger.committed,
                    self.ledger.outcomes,
                    self.faults.on_client_error,
                    spec.policies.on_records_lost,
                    on_stats,
                )
                closing.callback(source.close)
                self.ledger.seen_end = source.seen_end
                if not source.assigned and not self.ledger.unwritten and not spec.live:
                    return
                strategy = self._strategy(producers, source)
                closing.callback(strategy.close)
                self._copy(source, strategy, stop)
            except (KafkaException, SystemError) as exc:
                # A fatal client error (e.g. the gapless guarantee, or a fenced transactional
                # producer) surfaces from poll/flush/produce.
                failure = self.faults.from_client_exception(exc)
                if failure is None:
                    raise
                raise failure from None

    def _frames(self) -> bytes:
        """The metrics frame the stop signal's thread sends (telemetry only)."""
        return self.tally.frame().encode() if self.tally is not None else b""

    def _own(self) -> list[Producer]:
        """Step 0: the producers. Exactly-once, initialising the transactional ids fences
        every earlier producer of them, and the claims are checked after that (see
        k2k.coordination.assignment); only then is progress read."""
        spec, txid = self.spec, self.group.transactional_id
        conf, on_stats = self._client(PRODUCER)
        if spec.commit.exactly_once:
            if not txid:
                raise ReplicationError(
                    f"runner group {self.group.index} has no transactional id; exactly-once "
                    "needs one per runner (a planner bug: nothing was copied)"
                )
            producers = start_transactional_producers(
                conf, spec.control_topics, txid, self.faults, on_stats
            )
            self.faults.producers = producers
            self._verify_claims(self.group.claims)
        else:
            producer = build_producer(conf, self.faults.on_client_error, on_stats)
            producers = [ready(producer, spec.control_topics.commit_topic)]
            self.faults.producers = producers
        return producers

    def _client(self, role: Role) -> tuple[dict[str, str], StatsCallback | None]:
        """The settings of the runner's ``role`` client and its statistics callback (None
        while client statistics are off)."""
        clients = self.spec.clients
        conf = clients.source_consumer if role == CONSUMER else clients.target_producer
        if self.statistics is None:
            return conf, None
        return self.statistics.settings(conf), self.statistics.callback(role)

    def _strategy(self, producers: list[Producer], source: SourceReader) -> CommitStrategy:
        """The commit strategy of the lease's delivery mode."""
        commit = self.spec.commit
        if commit.exactly_once:
            return ExactlyOnce(
                commit,
                producers,
                self.ledger,
                self.faults,
                len(source.assigned),
                source.touched,
                serve_idle=self.statistics is not None,
            )
        return AtLeastOnce(commit, producers[0], self.ledger, self.faults)

    def _verify_claims(self, claims: tuple[tuple[str, int, str], ...]) -> None:
        """Stand down unless the newest claim on every partition of ``claims`` is still ours."""
        control = self.spec.control_topics
        mine = {(t, p): claim for t, p, claim in claims}
        if not mine:
            return
        lost = lost_claims(
            self.spec.clients.control_consumer,
            control.assignment_topic,
            control.assignment_partitions,
            control.commit_group,
            mine,
            sync_timeout_s=control.sync_timeout_s,
            on_bad_record=self.spec.policies.on_bad_record,
        )
        if lost:
            first = min(lost)
            raise Fenced(
                f"{', '.join(f'{t}[{p}]' for t, p in sorted(lost))} claimed by member "
                f"{lost[first]} since this lease was planned; standing down"
            )

    def _copy(self, source: SourceReader, strategy: CommitStrategy, stop: StopSignal) -> None:
        """Steps 1-3 until the lease ends, then the last commit. On a fault the strategy
        abandons what is uncommitted at once (exactly-once: the open transaction is aborted
        rather than left to hold the target's last stable offset until it times out)."""
        spec = self.spec
        copier = make_copier(
            spec.topics,
            source.topics,
            source.on_event,
            self.faults.produce_failed,
            observers(
                spec.observer(strategy) if spec.observer else None,
                self.tally,
                self._foreign_watch(strategy),
                self.identity,
            ),
            dict(self.ledger.committed),
            (source.touched, source.behind),
            self.identity,
        )
        if self.identity is not None:
            self.identity.plans = copier.plans  # grown in place as topics are added
        try:
            try:
                self._loop(source, strategy, copier, stop)
                strategy.finish(source.final_positions(self.ledger.unwritten))
            except (KafkaException, SystemError) as exc:
                failure = self.faults.from_client_exception(exc)
                if failure is None:
                    raise
                raise failure from None
            self.copied = (
                copier.records,
                copier.bytes,
                copier.skipped,
                copier.filtered,
                copier.failed,
            )
        except Fenced:
            raise  # the fencer aborted the open transaction; an in-flight commit fails
        except K2KError:
            strategy.abandon()  # what is queued goes first: the mark must not wait for it
            if self.identity is not None:
                self.identity.record_breaks(self.faults.producers)
            raise

    def _foreign_watch(self, strategy: CommitStrategy) -> ForeignWatch | None:
        """The watch for foreign writes on the target (None when no topic can be watched)."""
        watched = watched_targets(self.spec.topics)
        if not watched:
            return None
        self.foreign = ForeignWatch(
            watched,
            self.ledger,
            self.faults,
            self.spec.policies.on_foreign_writes,
            (lambda: strategy.batch) if isinstance(strategy, ExactlyOnce) else None,
            self.tally,
            self._target_data_records if isinstance(strategy, ExactlyOnce) else None,
        )
        return self.foreign

    def _target_data_records(self, tp: TP, first: int, last: int) -> int | None:
        """Data records of a target partition's ``[first, last]`` (the foreign-write check)."""
        control = self.spec.control_topics
        try:
            counts = count_records(
                self.spec.clients.control_consumer,
                control.commit_group,
                {tp: (first, last + 1)},
                stall_s=control.sync_timeout_s,
                committed_only=False,
            )
        except (ClusterError, KafkaException) as exc:
            log.info("could not read %s[%d] to check a foreign write: %s", tp[0], tp[1], exc)
            return None
        return counts[tp]

    def _loop(
        self, source: SourceReader, strategy: CommitStrategy, copier: RecordCopier, stop: StopSignal
    ) -> None:
        monotonic = time.monotonic
        deadline = monotonic() + self.spec.lease_s  # executor clock: no skew with the driver
        live = self.spec.live
        unwritten = self.ledger.unwritten  # one set for the task: updated in place
        while True:
            if stop.wants_attention():  # the lease ends, or this slot's partitions change
                if stop.is_set():
                    break
                self._reassign(stop.take_assignment(), source, strategy, copier, stop)
                continue
            if not source.reading:
                if not live:
                    break
                strategy.service()  # a slot with nothing to read waits for an assignment
                source.serve()
                stop.wait(_EMPTY_SLOT_WAIT_S)
                continue
            if monotonic() >= deadline:
                break
            # Step 1. Read what is queued now; with nothing queued the runner may be caught
            # up and the strategy may commit, then the loop waits briefly for the next record.
            msgs = source.take(strategy.room())
            if not msgs:
                strategy.idle(source.caught_up)
                msgs = source.wait()
            # Step 2. Stages and write, run by run.
            if msgs:
                copier.copy(msgs, strategy)
            # Step 3. Range ends (--until-caught-up), then the commit point.
            if not self._commit_point(source, strategy, unwritten):
                break
        if stop.driver_gone:
            raise DriverGone(f"{stop.driver_gone}; this runner stopped without committing")

    def _commit_point(
        self, source: SourceReader, strategy: CommitStrategy, unwritten: set[TP]
    ) -> bool:
        """Retire finished ranges (``--until-caught-up``) and seal at ``batchSize`` records or
        ``batchTimeout``, over the partitions read since the last commit point; False when
        nothing is left to read and the lease ends."""
        if source.bounds:
            source.retire_finished()
            if not source.reading and not self.spec.live:
                return False
        if strategy.due(time.monotonic()):
            strategy.seal(source.moved_positions(unwritten))
        strategy.service()
        return True

    def _reassign(
        self,
        assignment: SlotAssignment | None,
        source: SourceReader,
        strategy: CommitStrategy,
        copier: RecordCopier,
        stop: StopSignal,
    ) -> None:
        """Apply a slot's new assignment: commit everything, let go of the partitions it no
        longer holds, take on the new ones, acknowledge (docs/architecture.md#leases-that-do-not-stop)."""
        if assignment is None:
            return
        ledger = self.ledger
        wanted = {(r.topic, r.partition): r for r in assignment.ranges}
        gone = set(ledger.committed) - wanted.keys()
        new = [r for tp, r in sorted(wanted.items()) if tp not in ledger.committed]
        if gone or new:
            strategy.finish(source.final_positions(ledger.unwritten))
        dropped = ledger.drop(gone) if gone else []
        if gone:
            source.drop(gone)
        self._see_target_partitions(assignment.grown)
        if new:
            self._take_on(new, assignment, source, copier, stop)
        copier.reassigned(assignment.topics, source.topics, gone)
        if self.foreign is not None:
            self.foreign.reassigned(watched_targets(copier.plans), gone)
        strategy.reassigned(len(source.assigned))
        stop.applied(assignment.version, dropped)

    def _see_target_partitions(self, grown: dict[str, int]) -> None:
        """Wait until every producer's metadata shows the partitions target topics gained:
        librdkafka refuses a partition it does not know, and its partitioner spreads records
        over the partitions it knows."""
        if not grown:
            return
        wait_s = max(self.spec.control_topics.sync_timeout_s, 30.0)
        deadline = time.monotonic() + wait_s
        for producer in self.faults.producers:
            while True:
                topics = producer.list_topics(timeout=wait_s).topics
                short = {
                    t: len(topics[t].partitions) if t in topics else 0
                    for t, n in grown.items()
                    if t not in topics or len(topics[t].partitions) < n
                }
                if not short:
                    break
                if time.monotonic() > deadline:
                    t, seen = next(iter(short.items()))
                    raise Unavailable(
                        f"target topic {t} has {grown[t]} partitions, but the runner's producer "
                        f"sees {seen} after {wait_s:g} s"
                    )
                time.sleep(0.2)

    def _take_on(
        self,
        new: list[PartitionRange],
        assignment: SlotAssignment,
        source: SourceReader,
        copier: RecordCopier,
        stop: StopSignal,
    ) -> None:
        """New partitions of this slot: claims verified (exactly-once), progress read from
        the commit topic, then read from there."""
        ledger = self.ledger
        ledger.topic_ids.update(assignment.topic_ids)
        if self.spec.commit.exactly_once:
            mine = {(r.topic, r.partition) for r in new}
            self._verify_claims(tuple(c for c in assignment.claims if (c[0], c[1]) in mine))
        ledger.add(new)
        ranges = ledger.load(new, abort=stop.is_set, known=assignment.progress)
        if ranges is None:
            return  # the lease ends: the partitions are released with the others
        if self.identity is not None:
            for topic, plan in assignment.topics.items():
                copier.plans.setdefault(topic, plan)  # the plans resume() reads
            ranges = self.identity.resume(ranges)
        source.add(ranges)
        copier.start_at({(r.topic, r.partition): r.start for r in ranges})
