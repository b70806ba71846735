"""The runner: one Spark task copying one runner group of source partitions for one lease.

Read -> stages -> write -> commit, top to bottom in :meth:`Runner._copy`:

1. **read** — a librdkafka consumer assigned (never subscribed: no group membership, no
   offset commits on the source) to the group's partitions at their progress offsets,
   ``read_committed`` by default.
2. **stages** — decided per topic and per pipeline before the loop (route, partition
   mapping, headers, tracing, timestamp); the loop body only reads fields and calls
   ``produce``.
3. **write** — an idempotent producer to the target (per-partition order survives retries).
4. **commit** — at-least-once: records are grouped into *epochs* of at most ``batchSize``
   records or ``batchTimeout``. An epoch's progress records (next offset per source
   partition) are written only once every record of that epoch, and of every earlier epoch,
   has been acknowledged by the target. Epochs are pipelined: the loop keeps copying while
   acknowledgements arrive, so progress lags data by about one round trip.
   Exactly-once: a commit batch and its progress records are one transaction, written
   through two producers in turn (:mod:`k2k.pipeline.transactions`).

Acknowledgements are counted per *run*, not per record. A consumed batch holds runs of
consecutive records of one source partition. With ``partition: source`` every record of a
run goes to the same target partition, whose order the idempotent producer keeps, so only
the run's last record carries a delivery callback: its acknowledgement covers the run. A
failure of an earlier record cannot hide behind it: the producer's gapless guarantee makes
such a failure fatal, and records never expire locally (``PRODUCER_FORCED``); the runner
fails a lease whose oldest epoch waits longer than the user's delivery timeout. With
``partition: hash`` a run spreads over target partitions, so every record carries one.
This saves a Python call per record, the largest cost after consume and produce.

Python's cyclic garbage collector is off while a runner copies. Every consumed batch
allocates thousands of message objects, so the collector ran every few hundred records and
scanned them: 18 % of the copy loop's samples in a profile (py-spy) of an exactly-once
backlog copy. Nothing in the loop forms a reference cycle, so reference counting frees it
all; the collector is switched back on when the lease ends.

Invariants (checked by the tests after every restart):
  * progress for a partition never moves backwards within a lease;
  * progress never covers a record the target has not acknowledged;
  * nothing is ever produced to the source cluster (the runner has no source producer).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from k2k.clients.factory import build_consumer, build_producer
from k2k.clients.faults import Outcome, classify, describe, fatal_cause, kafka_error_of
from k2k.coordination.assignment import producer_ids
from k2k.coordination.formats import (
    OwnerRecord,
    ProgressKey,
    ProgressRecord,
    read_assignment,
)
from k2k.coordination.progress import ProgressStore
from k2k.coordination.tail import SyncTimeout, TopicTail
from k2k.errors import ClusterError, K2KError, ReplicationError
from k2k.pipeline.control import StopSignal
from k2k.pipeline.plan import (
    LeaseSpec,
    PartitionOutcome,
    PartitionRange,
    RunnerGroup,
    RunnerSummary,
)
from k2k.pipeline.stages import murmur2_partition
from k2k.pipeline.transactions import TransactionPair

__all__ = ["Runner", "run_groups"]

log = logging.getLogger("k2k.runner")

_MAX_CONSUME_BATCH = 10_000
_IDLE_WAIT_S = 0.05
_PARTITION_EOF = KafkaError._PARTITION_EOF
_FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
#: Test-only hook (never set in production): the first attempt of every runner task raises
#: once it has produced this many records, in the middle of a commit batch, so tests can
#: prove that a retried Spark task continues exactly after the committed progress.
FAIL_AFTER_ENV = "K2K_TEST_FAIL_TASK_AFTER_RECORDS"


class _Fenced(K2KError):
    """Another owner took this runner's partitions over; its uncommitted work is void."""


def run_groups(spec: LeaseSpec, groups: Iterable[RunnerGroup]) -> Iterator[RunnerSummary]:
    """Runs on: executor, once per Spark partition of the lease job (one runner group each).

    ``spec`` and the groups arrive pickled; clients are created here because they are not
    picklable. Yields one small picklable :class:`RunnerSummary` per group: faults come back
    inside it rather than as exceptions, so the planner alone decides what happens next.
    """
    for group in groups:
        yield Runner(spec, group).run()


class _Epoch:
    """Records produced between two commit points, and the positions they reach.

    ``outstanding`` counts delivery callbacks not yet served; they run in the runner's own
    thread (inside ``poll``/``flush``), so no locking is needed.
    """

    __slots__ = ("error", "outstanding", "positions", "records", "sealed", "started")

    def __init__(self, now: float) -> None:
        self.outstanding = 0  # delivery callbacks still to come (one per run, see above)
        self.records = 0
        self.started = now
        self.sealed = now
        self.positions: dict[tuple[str, int], int] | None = None
        self.error: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: object) -> None:
        self.outstanding -= 1
        if err is not None and self.error is None:
            self.error = (
                f"target rejected a record for {msg.topic()}[{msg.partition()}]: "  # type: ignore[attr-defined]
                f"{describe(err)}"
            )


class Runner:
    """Runs on: executor. Copies one :class:`RunnerGroup` until its lease ends.

    A lease ends at its deadline, when the driver asks (:class:`StopSignal`), or when every
    bounded partition reached its end offset (``--until-caught-up``).
    """

    def __init__(self, spec: LeaseSpec, group: RunnerGroup) -> None:
        self.spec = spec
        self.group = group
        self.outcomes = {
            (r.topic, r.partition): PartitionOutcome(r.topic, r.partition, r.start, r.start)
            for r in group.ranges
        }
        self.committed = {key: o.start for key, o in self.outcomes.items()}
        self.unwritten = {(r.topic, r.partition) for r in group.ranges if not r.has_progress}
        self.eof: dict[tuple[str, int], int] = {}
        self.client_errors: list[str] = []
        self.progress_error: str | None = None
        self.fenced_by: KafkaError | None = None
        self.producers: list[object] = []  # polled for the cause of a fatal error
        self.totals = (0, 0)  # records and key+value bytes produced during the lease
        # Exactly-once: longest wait for a batch's acknowledgements, and again for its commit.
        self.txn_wait_s = min(spec.ack_timeout_s, 300.0)
        self._progress_keys: dict[tuple[str, int], tuple[bytes, int]] = {}
        # Exactly-once: where the next transaction starts per partition (the positions the
        # previous one, which commits first, ends at), and one partition per progress
        # partition to re-state that at the start of each transaction (see _open_transaction).
        self._txn_start: dict[tuple[str, int], int] = {}
        self._openers: list[tuple[str, int]] = []

    def run(self) -> RunnerSummary:
        """Runs on: executor. Never raises for k2k faults: they are returned in the summary."""
        started = time.monotonic()
        summary = RunnerSummary(self.group.index)
        collecting = gc.isenabled()
        gc.disable()  # see the module doc: the copy loop makes no reference cycles
        try:
            self._copy()
        except _Fenced as exc:
            summary.fenced = str(exc)
        except K2KError as exc:
            summary.error = str(exc)
        finally:
            if collecting:
                gc.enable()
        summary.partitions = list(self.outcomes.values())
        summary.records, summary.bytes = self.totals
        summary.seconds = time.monotonic() - started
        return summary

    # -- the copy loop -------------------------------------------------------------------

    def _copy(self) -> None:
        spec = self.spec
        opts = spec.options
        eos = spec.exactly_once
        consumer = stop = pair = None
        try:
            # Step 0. Ownership: in exactly-once mode initialising the transactional ids
            # fences every earlier producer of them (a failed or duplicate attempt of this
            # task); the claims are checked after that, then progress is read.
            producers = self.producers = self._start_producers()
            producer = producers[0]
            if eos:
                pair = TransactionPair(producers)
                self._verify_claims()
            ranges = self._load_progress()
            if eos:
                self._txn_start = dict(self.committed)
                self._openers = self._one_per_progress_partition()
            active = [r for r in ranges if r.end is None or r.start < r.end]
            for r in ranges:
                if r.end is not None and r.start >= r.end:
                    self.outcomes[(r.topic, r.partition)].reached_end = True
            if not active and not self.unwritten:
                return
            bounds = {(r.topic, r.partition): r.end for r in active if r.end is not None}
            unbounded = len(active) - len(bounds)
            assigned = [TopicPartition(r.topic, r.partition, r.start) for r in active]
            consumer = build_consumer(spec.source_consumer, on_error=self._on_client_error)
            stop = StopSignal(spec.control)
            if assigned:
                consumer.assign(assigned)
            # Decided once: per-topic and per-pipeline record handling.
            routes = spec.routes
            keep_headers = opts.keep_headers
            keep_ts = opts.keep_timestamp
            by_key = opts.partition_by_key
            track = not eos  # exactly-once: the commit itself confirms every record
            ack_each = by_key  # hash: a run spreads over target partitions (see module doc)
            many_topics = len({tp.topic for tp in assigned}) > 1  # else runs differ by partition
            trace = _TraceHeaders(opts, spec.pipeline)
            tracing = trace.enabled
            produce = producer.produce
            poll = producer.poll
            consume = consumer.consume
            # A transaction holds up to batchSize records per partition (at-least-once
            # epochs are pipelined, so smaller ones cost nothing there).
            batch_size = spec.batch_size * (max(1, len(active)) if eos else 1)
            batch_timeout = spec.batch_timeout_s
            deadline = time.monotonic() + spec.lease_s  # executor clock: no skew with the driver
            monotonic = time.monotonic
            epoch = _Epoch(monotonic())
            pending: deque[_Epoch] = deque()
            in_txn = False
            fail_at = _injected_failure_point()
            total_records = 0
            total_bytes = 0

            while assigned and not stop.is_set() and monotonic() < deadline:
                # Step 1. Read: what is queued now, or wait briefly for the next record.
                want = min(_MAX_CONSUME_BATCH, batch_size - epoch.records)
                msgs = consume(want, 0)
                if not msgs:
                    poll(0)
                    self._commit_ready(producer, pending)
                    # One record ends the wait: consume(n, t) would hold the first record
                    # back until n arrived or t passed, adding latency at low rates.
                    msgs = consume(1, _IDLE_WAIT_S)
                if msgs and eos and not in_txn:
                    producer.begin_transaction()
                    self._open_transaction(producer)
                    in_txn = True
                on_ack = epoch.on_delivery
                produced = acks = 0
                last = len(msgs) - 1
                # Steps 2 and 3. Stages and write, per record.
                for i, m in enumerate(msgs):
                    err = m.error()
                    if err is not None:
                        self._on_consumer_event(m, err)
                        continue
                    topic = m.topic()
                    part = m.partition()
                    value = m.value()
                    key = m.key()
                    headers = m.headers() if keep_headers else None
                    if tracing:
                        headers = trace.add(headers, topic, part, m.offset())
                    if keep_ts:
                        ts = m.timestamp()[1]
                        if ts < 0:
                            ts = 0
                    else:
                        ts = 0
                    # At-least-once: the last record of a partition run carries the run's
                    # acknowledgement.
                    cb = None
                    if track:
                        if ack_each or i == last:
                            cb = on_ack
                        else:
                            nxt = msgs[i + 1]
                            if (
                                nxt.partition() != part
                                or nxt.error() is not None
                                or (many_topics and nxt.topic() != topic)
                            ):
                                cb = on_ack
                    target_part = -1 if by_key else part
                    try:
                        produce(routes[topic], value, key, target_part, cb, None, ts, headers)
                    except BufferError:
                        self._produce_when_room(
                            producer, routes[topic], m, target_part, cb, ts, headers
                        )
                    except KafkaException as exc:
                        raise self._produce_failed(m, exc) from None
                    produced += 1
                    if cb is not None:
                        acks += 1
                    if value is not None:
                        total_bytes += len(value)
                    if key is not None:
                        total_bytes += len(key)
                epoch.outstanding += acks
                epoch.records += produced
                total_records += produced
                if fail_at is not None and total_records >= fail_at:
                    raise RuntimeError(
                        f"injected task failure after {total_records} records ({FAIL_AFTER_ENV})"
                    )

                # Range ends (--until-caught-up): stop reading partitions that reached theirs.
                if bounds:
                    self._retire_finished(consumer, bounds, assigned)
                    if not bounds and not unbounded:
                        break

                # Step 4. Commit: seal the epoch at batchSize records or batchTimeout.
                now = monotonic()
                if epoch.records >= batch_size or (
                    (epoch.records or self.unwritten) and now - epoch.started >= batch_timeout
                ):
                    positions = self._positions(consumer, assigned)
                    if eos:
                        self._seal(pair, positions, in_txn)
                        in_txn = False
                        producer = pair.current  # the other one, while this batch commits
                        produce = producer.produce
                        poll = producer.poll
                    else:
                        epoch.positions = positions
                        epoch.sealed = now
                        pending.append(epoch)
                    epoch = _Epoch(now)
                poll(0)
                self._commit_ready(producer, pending)

            # Lease end: seal the last epoch, wait for every acknowledgement, write progress.
            final = self._positions(consumer, assigned) if assigned else {}
            for key in self.unwritten:
                final.setdefault(key, self.committed[key])
            if eos:
                self._seal(pair, final, in_txn)
                self._collect(pair)
            else:
                epoch.positions = final
                pending.append(epoch)
                self._finish(producer, pending)
            self.totals = (total_records, total_bytes)
        except K2KError:
            if pair is not None and not isinstance(sys.exc_info()[1], _Fenced):
                # Abort now rather than hold the target's last stable offset until the
                # transaction times out (the planner releases this runner's partitions).
                written = pair.abandon()
                if written:
                    self._mark_committed(written)
            raise
        except (KafkaException, SystemError) as exc:
            # A fatal client error (e.g. the gapless guarantee, or a fenced transactional
            # producer) surfaces from poll/flush/produce.
            err = kafka_error_of(exc)
            if err is None:
                raise
            raise self._client_failed(err) from None
        finally:
            if pair is not None:
                pair.close()
            if stop is not None:
                stop.close()
            if consumer is not None:
                consumer.close()

    # -- ownership and start offsets -----------------------------------------------------

    def _start_producers(self) -> list[object]:
        """One idempotent producer at-least-once; exactly-once the two transactional
        producers of :class:`TransactionPair`, both initialised (which fences them)."""
        spec = self.spec
        txid = self.group.transactional_id
        if not (spec.exactly_once and txid):
            return [build_producer(spec.target_producer, on_error=self._on_client_error)]
        producers = []
        for pid in producer_ids(txid):
            conf = {**spec.target_producer, "transactional.id": pid}
            producer = build_producer(conf, on_error=self._on_client_error)
            # Metadata first: init_transactions on a fresh producer otherwise may stall.
            producer.list_topics(spec.commit_topic, timeout=spec.sync_timeout_s)
            producer.init_transactions(max(spec.sync_timeout_s, 10.0))
            producers.append(producer)
        return producers

    def _verify_claims(self) -> None:
        """Stand down unless the newest claim on every partition is still ours."""
        spec = self.spec
        mine = {(t, p): claim for t, p, claim in self.group.claims}
        if not mine:
            return
        keys = {OwnerRecord.key_bytes(spec.commit_group, t, p): (t, p) for t, p in mine}
        parts = {murmur2_partition(k, spec.assignment_partitions) for k in keys}
        newest: dict[tuple[str, int], OwnerRecord] = {}

        def take(m: object) -> None:
            tp = keys.get(m.key())  # type: ignore[attr-defined]
            if tp is None:
                return
            read = read_assignment(m, spec.on_bad_record, log)
            if read is not None and isinstance(read[1], OwnerRecord):
                newest[tp] = read[1]

        tail = TopicTail(
            spec.control_consumer,
            spec.assignment_topic,
            parts,
            group_id=f"k2k.{spec.commit_group}.runner",
            timeout_s=spec.sync_timeout_s,
        )
        try:
            tail.catch_up(take)
        except SyncTimeout as exc:
            raise ClusterError(f"{exc} (coordination.assignment.topic)") from None
        finally:
            tail.close()
        lost = [tp for tp, claim in mine.items() if tp not in newest or newest[tp].claim != claim]
        if lost:
            who = newest[lost[0]].member if lost[0] in newest else "nobody"
            raise _Fenced(
                f"{_tp_list(lost)} claimed by member {who} since this lease was planned; "
                "standing down"
            )

    def _load_progress(self) -> list[PartitionRange]:
        """The group's ranges, starting at the committed progress read now (after any
        predecessor was fenced), not at what the planner read earlier."""
        spec = self.spec
        ranges = list(self.group.ranges)
        if not ranges or not spec.control_consumer:
            return ranges
        parts = sorted({self._progress_slot((r.topic, r.partition))[1] for r in ranges})
        store = ProgressStore(
            spec.control_consumer,
            spec.commit_topic,
            spec.commit_group,
            sync_timeout_s=spec.sync_timeout_s,
            on_sync_timeout=spec.on_sync_timeout,  # type: ignore[arg-type]
            on_bad_record=spec.on_bad_record,  # type: ignore[arg-type]
            partitions=parts,
            # Predecessors are fenced or done by now; their last progress may sit behind
            # another runner's open transaction, which ends within one commit batch.
            past_open_transactions=True,
        )
        try:
            latest = store.load()
        finally:
            store.close()
        out = []
        for r in ranges:
            rec = latest.get((r.topic, r.partition))
            key = (r.topic, r.partition)
            if rec is not None:
                # The larger of the two: with onCommitSyncTimeout ignore the read may be
                # partial, and progress never moves backwards.
                start = max(rec.offset, r.start) if r.has_progress else rec.offset
                r = PartitionRange(r.topic, r.partition, start, r.end, True)
                self.outcomes[key] = PartitionOutcome(r.topic, r.partition, r.start, r.start)
                self.committed[key] = r.start
                self.unwritten.discard(key)
            out.append(r)
        return out

    def _fenced(self, err: KafkaError) -> _Fenced:
        return _Fenced(
            f"transactional id {self.group.transactional_id} was fenced by a newer owner "
            f"({describe(err)}); the open transaction was aborted, standing down"
        )

    # -- commit --------------------------------------------------------------------------

    def _commit_ready(self, producer: object, pending: deque[_Epoch]) -> None:
        """Write progress for every leading epoch whose records are all acknowledged.

        1. take the leading sealed epochs with no outstanding acknowledgement (order matters:
           an epoch's positions include every earlier epoch's records);
        2. fail if any record of a pending epoch was rejected (nothing of it is committed);
        3. produce one progress record per partition whose position moved, for the newest.
        """
        for ep in pending:
            if ep.error:
                raise ReplicationError(ep.error + self._uncommitted_of(ep.positions or {}))
        if self.progress_error:
            raise ReplicationError(self.progress_error)
        if pending and pending[0].outstanding:
            waited = time.monotonic() - pending[0].sealed
            if waited > self.spec.ack_timeout_s:
                raise self._unacknowledged(self.spec.ack_timeout_s, pending[-1].positions or {})
        # Consecutive complete epochs share one progress write: positions only grow, so the
        # newest covers the older ones (fewer control records when acknowledgements bunch).
        newest = None
        while pending and pending[0].outstanding == 0:
            newest = pending.popleft().positions
        if newest is not None:
            self._write_progress(producer, newest)

    def _write_progress(
        self, producer: object, positions: dict[tuple[str, int], int], *, staged: bool = False
    ) -> list[tuple[tuple[str, int], int]]:
        """Produce one progress record per partition whose position moved.

        At-least-once the positions count as committed at once (the records below them are
        acknowledged). ``staged`` (exactly-once) leaves that to :meth:`_mark_committed` after
        the transaction commits; returns what was written.
        """
        now_ms = int(time.time() * 1000)
        written = []
        for key, pos in positions.items():
            before = self.committed[key]
            if pos < before:
                pos = before  # never move progress backwards (positions lag after a seek)
            if staged:
                self._txn_start[key] = pos
            if pos == before and key not in self.unwritten:
                continue
            self._produce_progress(producer, key, pos, now_ms)
            written.append((key, pos))
        if not staged:
            self._mark_committed(written)
        return written

    def _produce_progress(
        self, producer: object, key: tuple[str, int], pos: int, now_ms: int
    ) -> None:
        spec = self.spec
        record = ProgressRecord(
            spec.commit_group, key[0], key[1], pos, spec.pipeline, now_ms, spec.member
        )
        slot = self._progress_slot(key)
        producer.produce(  # type: ignore[attr-defined]
            spec.commit_topic, record.encode_value(), slot[0], slot[1], self._on_progress_delivery
        )

    def _progress_slot(self, key: tuple[str, int]) -> tuple[bytes, int]:
        """The progress record's key bytes and its partition of the commit topic."""
        slot = self._progress_keys.get(key)
        if slot is None:
            k = ProgressKey(self.spec.commit_group, key[0], key[1]).encode()
            slot = self._progress_keys[key] = (k, murmur2_partition(k, self.spec.commit_partitions))
        return slot

    def _one_per_progress_partition(self) -> list[tuple[str, int]]:
        """One of this runner's partitions for each commit-topic partition its progress
        records go to."""
        chosen: dict[int, tuple[str, int]] = {}
        for key in sorted(self.committed):
            chosen.setdefault(self._progress_slot(key)[1], key)
        return list(chosen.values())

    def _open_transaction(self, producer: object) -> None:
        """Exactly-once: make the progress partitions part of the new transaction now.

        librdkafka adds a partition to a transaction (AddPartitionsToTxn, a round trip to
        the transaction coordinator) when the transaction's first record for it is
        produced, and holds that record until then. Progress records are produced at the
        commit point, so every commit waited for that round trip before its flush could end
        (a 3M x 100 B backlog on `k2k local` clusters: flush p50 12.4 ms, 5.6 ms with
        this). Here, one progress record per progress partition re-states where this
        transaction starts: the position the previous transaction ends at, which commits
        before this one can. Readers keep the newest record per key, so an equal offset
        changes nothing, and the commit point's records come later in the same partition.
        """
        now_ms = int(time.time() * 1000)
        for key in self._openers:
            self._produce_progress(producer, key, self._txn_start[key], now_ms)

    def _mark_committed(self, written: list[tuple[tuple[str, int], int]]) -> None:
        for key, pos in written:
            self.committed[key] = pos
            self.outcomes[key].committed = pos
            self.outcomes[key].progress_written = True
            self.unwritten.discard(key)

    def _seal(
        self, pair: TransactionPair, positions: dict[tuple[str, int], int], in_txn: bool
    ) -> None:
        """Exactly-once commit point: the progress records join the open transaction (or a
        new one when no record was copied); once every record of it is acknowledged, it
        commits in the background (after the previous batch did) while the other producer
        takes the next batch."""
        producer = pair.current
        if not in_txn:
            self._collect(pair)  # nothing to overlap with; and `committed` is current then
            if not any(
                pos > self.committed[k] or k in self.unwritten for k, pos in positions.items()
            ):
                return
            producer.begin_transaction()  # type: ignore[attr-defined]
        written = self._write_progress(producer, positions, staged=True)
        if producer.flush(self.txn_wait_s):  # type: ignore[attr-defined]
            raise self._unacknowledged(self.txn_wait_s, positions)
        self._collect(pair)
        pair.hand_off(functools.partial(self._commit, producer, positions), written)

    def _collect(self, pair: TransactionPair) -> None:
        """Wait for the batch committing in the background; mark its progress committed,
        or raise its error (the caller aborts the batch open on the other producer)."""
        written = pair.wait()
        if written is not None:
            self._mark_committed(written)
        if self.progress_error:
            raise ReplicationError(self.progress_error)

    def _commit(self, producer: object, positions: dict[tuple[str, int], int]) -> None:
        """Runs on: the pair's commit thread. Commits, retrying retriable errors within the
        delivery timeout; raises :class:`_Fenced` or :class:`ReplicationError`."""
        deadline = time.monotonic() + self.txn_wait_s
        while True:
            try:
                producer.commit_transaction(max(0.1, deadline - time.monotonic()))  # type: ignore[attr-defined]
                break
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is None:
                    raise
                if err.code() in _FENCED_CODES or self.fenced_by is not None:
                    raise self._fenced(self.fenced_by or err) from None
                if err.retriable() and time.monotonic() < deadline:
                    continue
                if err.txn_requires_abort():
                    with contextlib.suppress(KafkaException):
                        producer.abort_transaction(30)  # type: ignore[attr-defined]
                raise ReplicationError(
                    f"a transaction on the target failed, nothing of it is committed: "
                    f"{describe(err)}" + self._uncommitted_of(positions)
                ) from None

    def _finish(self, producer: object, pending: deque[_Epoch]) -> None:
        """Lease end: 1 flush data, 2 write remaining progress, 3 flush progress."""
        # Step 1. Every produced record acknowledged (or failed) within the flush timeout.
        left = producer.flush(self.spec.flush_timeout_s)  # type: ignore[attr-defined]
        if left:
            raise ReplicationError(
                f"the target did not acknowledge {left} records within "
                f"{self.spec.flush_timeout_s:.0f} s; nothing after the last progress is committed"
            )
        # Step 2. Progress for every epoch (all are complete now).
        self._commit_ready(producer, pending)
        # Step 3. The progress records themselves are acknowledged.
        left = producer.flush(self.spec.flush_timeout_s)  # type: ignore[attr-defined]
        if left or self.progress_error:
            raise ReplicationError(
                self.progress_error or f"{left} progress records were not acknowledged"
            )

    def _on_progress_delivery(self, err: KafkaError | None, msg: object) -> None:
        if err is not None and self.progress_error is None:
            self.progress_error = (
                f"could not write progress to {self.spec.commit_topic}: {describe(err)}"
            )

    # -- positions and range ends --------------------------------------------------------

    def _positions(
        self, consumer: object, assigned: list[TopicPartition]
    ) -> dict[tuple[str, int], int]:
        """Next offset to read per partition: the consumer's position, or the offset of a
        partition-EOF event past it (read_committed: transaction markers and aborted records
        occupy offsets that are never delivered)."""
        out: dict[tuple[str, int], int] = {}
        for tp in consumer.position(assigned):  # type: ignore[attr-defined]
            key = (tp.topic, tp.partition)
            pos = max(tp.offset, self.eof.get(key, -1), self.committed[key])
            out[key] = pos
        return out

    def _retire_finished(
        self,
        consumer: object,
        bounds: dict[tuple[str, int], int | None],
        assigned: list[TopicPartition],
    ) -> None:
        positions = self._positions(
            consumer, [tp for tp in assigned if (tp.topic, tp.partition) in bounds]
        )
        finished = [key for key, pos in positions.items() if pos >= (bounds[key] or 0)]
        if not finished:
            return
        done = set(finished)
        tps = [tp for tp in assigned if (tp.topic, tp.partition) in done]
        consumer.pause(tps)  # type: ignore[attr-defined]
        for key in finished:
            del bounds[key]
            self.outcomes[key].reached_end = True

    # -- faults --------------------------------------------------------------------------

    def _on_consumer_event(self, m: object, err: KafkaError) -> None:
        if err.code() == _PARTITION_EOF:
            self.eof[(m.topic(), m.partition())] = m.offset()  # type: ignore[attr-defined]
            return
        where = f"{m.topic()}[{m.partition()}]"  # type: ignore[attr-defined]
        if classify(err) is Outcome.RETRY:
            log.warning("source %s: %s (retrying)", where, describe(err))
            return
        raise ReplicationError(f"reading source {where} failed: {describe(err)}")

    def _on_client_error(self, err: KafkaError) -> None:
        """librdkafka's global error callback: transient ones are logged, fatal ones fail."""
        if err.code() in _FENCED_CODES:
            self.fenced_by = err  # the failing call raises too (maybe only as _FATAL)
            return
        if classify(err) is Outcome.FAIL and err.fatal():
            self.progress_error = f"fatal client error: {describe(err)}"
        elif len(self.client_errors) < 20:
            self.client_errors.append(describe(err))

    def _produce_when_room(
        self,
        producer: object,
        topic: str,
        m: object,
        part: int,
        cb: object,
        ts: int,
        headers: object,
    ) -> None:
        """The producer queue is full: serve acknowledgements until there is room."""
        while True:
            producer.poll(0.05)  # type: ignore[attr-defined]
            try:
                producer.produce(topic, m.value(), m.key(), part, cb, None, ts, headers)  # type: ignore[attr-defined]
                return
            except BufferError:
                continue
            except KafkaException as exc:
                raise self._produce_failed(m, exc) from None

    def _produce_failed(self, m: object, exc: KafkaException) -> K2KError:
        """A produce call failed: the producer as a whole (fatal: fenced, or an earlier
        record broke its guarantees), or this record, which the target cannot take."""
        err = kafka_error_of(exc)
        if err is not None and (err.fatal() or err.code() == KafkaError._FATAL):
            return self._client_failed(err)
        if self.fenced_by is not None:
            return self._fenced(self.fenced_by)
        return _record_error(m, exc)

    def _client_failed(self, err: KafkaError) -> K2KError:
        """A client failed as a whole: fenced (also when the call that noticed it only says
        ``_FATAL``), or fatally for another reason."""
        err = fatal_cause(err, self.producers)
        if err.code() in _FENCED_CODES or self.fenced_by is not None:
            return self._fenced(self.fenced_by or err)
        return ReplicationError(
            f"a Kafka client failed: {describe(err)}; progress stays at the last committed batch"
        )

    def _unacknowledged(
        self, timeout_s: float, positions: dict[tuple[str, int], int]
    ) -> ReplicationError:
        return ReplicationError(
            f"the target did not acknowledge a commit batch within {timeout_s:.0f} s "
            "(the producer's delivery timeout, message.timeout.ms)"
            + self._uncommitted_of(positions)
        )

    def _uncommitted_of(self, positions: dict[tuple[str, int], int]) -> str:
        parts = [
            f"{t}[{p}]@{self.committed[(t, p)]}..{pos - 1}"
            for (t, p), pos in sorted(positions.items())
            if pos > self.committed[(t, p)]
        ]
        return f" (uncommitted source ranges: {', '.join(parts)})" if parts else ""


def _tp_list(tps: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(tps))


def _injected_failure_point() -> int | None:
    """The test-only failure hook (``FAIL_AFTER_ENV``), for the first attempt of a task."""
    raw = os.environ.get(FAIL_AFTER_ENV)
    if not raw:
        return None
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None or ctx.attemptNumber() > 0:
        return None
    return int(raw)


def _record_error(m: object, exc: KafkaException) -> ReplicationError:
    err = kafka_error_of(exc)
    detail = describe(err) if err is not None else str(exc)
    size = len(m.value() or b"") + len(m.key() or b"")  # type: ignore[attr-defined]
    return ReplicationError(
        f"cannot replicate {m.topic()}[{m.partition()}]@{m.offset()} "  # type: ignore[attr-defined]
        f"({size} bytes): {detail}"
    )


class _TraceHeaders:
    """Tracing headers, with everything but the offset encoded once per topic/partition."""

    __slots__ = ("_cache", "enabled", "names", "pipeline")

    def __init__(self, opts: object, pipeline: str) -> None:
        self.names = (
            opts.trace_topic,  # type: ignore[attr-defined]
            opts.trace_partition,  # type: ignore[attr-defined]
            opts.trace_offset,  # type: ignore[attr-defined]
            opts.trace_pipeline,  # type: ignore[attr-defined]
        )
        self.enabled = any(self.names)
        self.pipeline = pipeline.encode()
        self._cache: dict[tuple[str, int], tuple[list, list]] = {}

    def add(self, headers: list | None, topic: str, partition: int, offset: int) -> list:
        fixed = self._cache.get((topic, partition))
        if fixed is None:
            fixed = self._fixed(topic, partition)
        out = headers if headers is not None else []
        out.extend(fixed[0])
        if self.names[2]:
            out.append((self.names[2], str(offset).encode()))
        out.extend(fixed[1])
        return out

    def _fixed(
        self, topic: str, partition: int
    ) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        """Headers before the offset (topic, partition) and after it (pipeline)."""
        t, p, _, pl = self.names
        before = []
        if t:
            before.append((t, topic.encode()))
        if p:
            before.append((p, str(partition).encode()))
        after = [(pl, self.pipeline)] if pl else []
        self._cache[(topic, partition)] = (before, after)
        return before, after
