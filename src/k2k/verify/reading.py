"""Reading one side of a verify task: a partition's committed records, batch by batch, and
the source and target records of a task as fingerprints.

Runs on: executor, for :func:`~k2k.verify.task.verify_partition`; on the driver too, where
:mod:`k2k.verify.slicing` looks for its cuts. Every read has a consumer of its own:
``read_committed``, *assigned* (no group membership), never committing, so verifying writes
nothing to either cluster.

How target records are attributed to the task's source partition (see
docs/operations.md#verifying-a-migration-k2k-verify for the limits):

* records carrying k2k's tracing headers belong to the source topic and partition those
  name, and with the offset header they are aligned by source offset as well as content;
* other records, with ``partition: source``, belong to the source partition of the same
  number (one task per target partition claims them, see ``claims_unattributed``);
* other records, with ``partition: hash``, belong to the source partition that holds their
  key; records whose key no source partition holds are claimed like unattributed ones.
  Null-key records cannot be placed that way and are counted as not compared.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, Message, TopicPartition

from k2k.errors import ClusterError
from k2k.kafka.factory import build_consumer
from k2k.stages.headers import TracingHeaders
from k2k.transforms import KEPT
from k2k.verify.align import Fingerprint

if TYPE_CHECKING:
    from k2k.stages.topicplan import RecordSteps
    from k2k.verify.task import PartitionTask

__all__ = ["Make", "Meter", "Tracing", "read_batches", "read_source", "read_target"]

#: Records per ``consume`` call.
_BATCH = 5_000
_error = Message.error

Make = Any  # compact or fingerprint: (partition, offset, source offset, key, value, headers, ts)


class Meter:
    """Counts the records a task has read on both sides, for the driver's progress line (a
    second pass is not counted again); ``done`` once the task has its result. Its frame is
    what :class:`~k2k.verify.progress.VerifyProgress` reads."""

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id
        self.read = 0
        self.counting = True
        self.done = False

    def add(self, n: int) -> None:
        if self.counting:
            self.read += n

    def again(self) -> None:
        self.counting = False

    def frame(self) -> bytes:
        return b"verify %d %d %d" % (self.task_id, self.read, self.done)


def read_batches(
    conf: Mapping[str, str],
    cluster: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout_s: float,
) -> Iterator[list[Message]]:
    """Runs on: executor. The committed records of ``topic[partition]`` in [start, end), in
    order, a consumed batch (never empty) at a time. Raises :class:`~k2k.errors.ClusterError`
    when the partition cannot be read or nothing arrives for ``timeout_s``."""
    if start >= end:
        return
    consumer = build_consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        last_seen = time.monotonic()
        position = start
        while True:
            # What remains, at most: consume() waits its whole timeout unless that many
            # records come, and transaction markers take offsets no record is delivered at.
            msgs = consumer.consume(max(1, min(_BATCH, end - position)), 0.1)
            if not msgs:
                if time.monotonic() - last_seen > timeout_s:
                    raise ClusterError(
                        f"{cluster} {topic}[{partition}]: nothing read for {timeout_s:.0f} s "
                        f"before offset {end} (verify)"
                    )
                continue
            last_seen = time.monotonic()
            last = msgs[-1]
            position = (last.offset() or position) + 1
            if (last.offset() or 0) < end - 1 and not any(map(_error, msgs)):
                yield msgs  # the common case: a whole batch of records inside the range
                continue
            out, ended = _records_before(msgs, end, f"{cluster} {topic}[{partition}]")
            if out:
                yield out
            if ended:
                return
    finally:
        consumer.close()


def _records_before(msgs: list[Message], end: int, where: str) -> tuple[list[Message], bool]:
    """The records of ``msgs`` before offset ``end``, and whether the read is over (the end
    reached, or the partition's end). Raises :class:`~k2k.errors.ClusterError` on an error."""
    out: list[Message] = []
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return out, True
            raise ClusterError(f"{where}: reading failed: {err.str()} (verify)")
        offset = m.offset() or 0
        if offset >= end:
            return out, True
        out.append(m)
        if offset >= end - 1:
            return out, True
    return out, False


class Tracing:
    """Reads and strips the tracing headers a pipeline adds after a record's own."""

    def __init__(self, tracing: TracingHeaders | None) -> None:
        self.names: list[str] = []
        if tracing is not None:
            self.names = [
                n for n in (tracing.topic, tracing.partition, tracing.offset, tracing.pipeline) if n
            ]
        self.topic = tracing.topic if tracing else None
        self.partition = tracing.partition if tracing else None
        self.offset = tracing.offset if tracing else None

    def names_source(self, traced: dict[str, str], topic: str, partition: int) -> bool:
        """Whether tracing values name ``topic[partition]`` (as far as they name anything)."""
        if self.topic and traced[self.topic] != topic:
            return False
        return not (self.partition and traced[self.partition] != str(partition))

    def source_offset(self, traced: dict[str, str] | None) -> int | None:
        """The source offset a record's tracing header names, None without one."""
        if traced is None or not self.offset:
            return None
        try:
            return int(traced[self.offset])
        except ValueError:
            return None

    def split(
        self, headers: list[tuple[str, bytes | None]]
    ) -> tuple[list[tuple[str, bytes | None]], dict[str, str] | None]:
        """The record's own headers, and the tracing values (None when the record does not
        end with the pipeline's tracing headers)."""
        n = len(self.names)
        if not n or len(headers) < n:
            return headers, None
        tail = headers[len(headers) - n :]
        if [h[0] for h in tail] != self.names:
            return headers, None
        values = {name: (v or b"").decode(errors="replace") for name, v in tail}
        return headers[: len(headers) - n], values


def source_batches(task: PartitionTask, start: int) -> Iterator[list[Message]]:
    """Runs on: executor. The task's source records from ``start`` to its end, as the
    pipeline writes them: with transform steps, the records they keep, rewritten (offsets
    and timestamps stay the source's); batches left empty are skipped."""
    batches = read_batches(
        task.source_consumer, "source", task.topic, task.partition, start, task.end, task.timeout_s
    )
    steps = task.steps
    if steps is None:
        yield from batches
        return
    for batch in batches:
        out = [t for m in batch if (t := _transformed(steps, m)) is not None]
        if out:
            yield out


def _transformed(steps: RecordSteps, m: Message) -> Message | None:
    """``m`` as the steps write it; None when they leave it out."""
    outcome, output = steps.run(m)
    if outcome != KEPT:
        return None
    key, value, headers = output if output is not None else (m.key(), m.value(), m.headers())
    return Message(
        topic=m.topic(),
        partition=m.partition(),
        offset=m.offset(),
        key=key,
        value=value,
        headers=headers if steps.keep_headers or output is not None else None,
        timestamp=m.timestamp(),
    )


def read_source(
    task: PartitionTask, make: Make, meter: Meter
) -> tuple[list[Fingerprint], list[bytes | None]]:
    """Runs on: executor. The source records of the task's range (context included) and
    their keys (only with ``partition: hash``)."""
    expected: list[Fingerprint] = []
    keys: list[bytes | None] = []
    keep_headers, keep_timestamp, p = task.keep_headers, task.keep_timestamp, task.partition
    hashed = task.hash_partitions > 0
    first = task.start if task.context_from is None else task.context_from
    add = expected.append
    canon = task.schema_ids[0] if task.schema_ids else None
    for batch in source_batches(task, first):
        batch_keys = (
            [m.key() for m in batch] if canon is None else [canon.key(m.key()) for m in batch]
        )
        for m, key in zip(batch, batch_keys, strict=True):
            offset = m.offset()
            add(
                make(
                    p,
                    offset,
                    offset,
                    key,
                    m.value() if canon is None else canon.value(m.value()),
                    (m.headers() or ()) if keep_headers else (),
                    m.timestamp()[1] if keep_timestamp else 0,
                )
            )
        if hashed:
            keys.extend(batch_keys)
        meter.add(len(batch))
    return expected, keys


def read_target(
    task: PartitionTask,
    tracing: Tracing,
    keys: list[bytes | None],
    make: Make,
    meter: Meter,
) -> tuple[dict[int, list[Fingerprint]], list[Fingerprint], dict[int, tuple[int, int]]]:
    """Runs on: executor. The target records attributed to the task's source partition
    (see the module docstring), per target partition; with ``partition: hash`` the null-key
    ones apart; and per target partition (records read, records attributed here, counting
    the null-key records this task claims but cannot compare)."""
    hashed = task.hash_partitions > 0
    by_trace = bool(tracing.topic or tracing.partition)
    by_key = hashed and not by_trace
    own_keys = {k for k in keys if k is not None} if by_key else set()
    actual: dict[int, list[Fingerprint]] = {}
    null_keys: list[Fingerprint] = []
    counts: dict[int, tuple[int, int]] = {}
    keep_timestamp = task.keep_timestamp
    canon = task.schema_ids[1] if task.schema_ids else None
    identical_below = -1 if task.identical_below is None else task.identical_below
    for tp, (first, last) in sorted(task.target_ranges.items()):
        lane = actual.setdefault(tp, [])
        claims = tp in task.claims_unattributed
        runs = task.mapped_runs.get(tp, ())
        seen = taken = 0
        for batch in read_batches(
            task.target_consumer, "target", task.target_topic, tp, first, last, task.timeout_s
        ):
            seen += len(batch)
            meter.add(len(batch))
            for m in batch:
                headers: Any = m.headers() or []
                own, traced = tracing.split(headers)
                key = m.key() if canon is None else canon.key(m.key())
                # Identical offsets: compared at its own offset.
                own_offset = m.offset() or 0
                source_offset = (
                    own_offset if own_offset < identical_below else tracing.source_offset(traced)
                )
                in_run, from_run = _mapped(runs, m.offset() or 0) if runs else (False, None)
                if in_run:
                    if from_run is None:
                        continue  # another source partition's run
                    source_offset = from_run
                elif traced is not None and by_trace:
                    if not tracing.names_source(traced, task.topic, task.partition):
                        continue
                elif by_key:
                    if key is None:
                        taken += claims
                        continue
                    if key not in own_keys:
                        continue
                elif not claims:
                    continue
                taken += 1
                ts = m.timestamp()[1] if keep_timestamp else 0
                value = m.value() if canon is None else canon.value(m.value())
                fp = make(tp, m.offset() or 0, source_offset, key, value, own, ts)
                (null_keys if hashed and key is None else lane).append(fp)
        counts[tp] = (seen, taken)
    return actual, null_keys, counts


def _mapped(runs: tuple[tuple[int, int, int | None], ...], offset: int) -> tuple[bool, int | None]:
    """Whether a target offset lies in a mapping run, and the source offset it maps to
    (None for another source partition's run). Runs hold distinct target offsets (one
    record each), so the only candidate is the last run starting at or before ``offset``."""
    k = bisect.bisect_right(runs, (offset, 1 << 62, 1 << 62)) - 1
    if k < 0:
        return False, None
    first, count, source_first = runs[k]
    if offset >= first + count:
        return False, None
    return True, None if source_first is None else source_first + offset - first
