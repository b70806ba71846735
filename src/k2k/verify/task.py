"""The verify task: one source partition (or one slice of it) and the target records
routed from it, compared.

Runs on: executor, once per selected source partition or slice (one Spark task each).
Each task reads its source range and the target partition(s) its records were routed to
with consumers of its own: ``read_committed``, *assigned* (no group membership), never
committing, so verifying writes nothing to either cluster.

Two passes, the second only when needed: first every record becomes a *compact*
fingerprint (its offsets and one 64-bit content hash) and each lane is checked for plain
equality (:func:`~k2k.verify.align.equal_lane`); a task whose lanes are all equal is done.
Otherwise the task reads its ranges again with full fingerprints (field digests and
payload previews) and aligns them, which names each difference and recognises replays.

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
import itertools
import operator
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message, TopicPartition

from k2k.errors import ClusterError
from k2k.kafka.factory import build_consumer
from k2k.kafka.murmur2 import murmur2_partition
from k2k.stages.headers import TracingHeaders
from k2k.verify.align import (
    CUT_MARGIN,
    Difference,
    Fingerprint,
    LaneResult,
    align,
    combine,
    compact,
    digest,
    equal_lane,
    fingerprint,
)
from k2k.verify.schemas import SchemaIdCanon

__all__ = [
    "MAX_REPORTED",
    "PartitionResult",
    "PartitionTask",
    "digest_text",
    "read_batches",
    "verify_partition",
]

#: Differences listed per source partition (all are counted).
MAX_REPORTED = 10
#: How many first source records of a partial range may start the target's part of it.
TRIM_PROBE = 8
#: Records per ``consume`` call.
_BATCH = 5_000
_error = Message.error

_key, _value, _headers, _timestamp = Message.key, Message.value, Message.headers, Message.timestamp
_ts = operator.itemgetter(1)


def _hashes(batch: list[Message], keep_headers: bool, keep_timestamp: bool) -> Iterator[int]:
    """The content hashes (:func:`~k2k.verify.align.content_hash`) of a batch of records,
    computed without a Python loop over them (the lean pass's hot path)."""
    n = len(batch)
    headers: Any = itertools.repeat((), n)
    if keep_headers:
        headers = [tuple(h) if h else () for h in map(_headers, batch)]
    stamps = map(_ts, map(_timestamp, batch)) if keep_timestamp else itertools.repeat(0, n)
    return map(hash, zip(map(_key, batch), map(_value, batch), headers, stamps, strict=False))


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """What one task verifies; built on the driver, shipped to the task (picklable)."""

    topic: str
    partition: int
    #: The source range read: [start, end); records before ``until`` are compared, later
    #: ones only recognised on the target (replicated, not yet committed).
    start: int
    until: int
    end: int
    #: The range starts after the source's earliest offset (``--from-timestamp``,
    #: ``--sample``): target records of earlier source records are left out.
    partial: bool
    target_topic: str
    #: Target partitions to read, each with its [earliest, end) offsets.
    target_ranges: dict[int, tuple[int, int]]
    #: The target topic's partition count with ``partition: hash``; 0 with ``source``.
    hash_partitions: int
    #: Target partitions whose records no source partition explains are reported by this task.
    claims_unattributed: tuple[int, ...]
    tracing: TracingHeaders | None
    #: With ``features.offsetMapping`` and no tracing headers naming the source: per target
    #: partition read, the exact mapping runs there, sorted, as (target first offset, count,
    #: source first offset, or None when the run is another source partition's).
    mapped_runs: dict[int, tuple[tuple[int, int, int | None], ...]]
    keep_headers: bool
    keep_timestamp: bool
    source_consumer: dict[str, str] = field(repr=False)
    target_consumer: dict[str, str] = field(repr=False)
    timeout_s: float = 30.0
    #: A slice after the first (:mod:`k2k.verify.slicing`): source records from here to
    #: ``start`` are read as context (the slice before compares them), so that target
    #: records replaying them are recognised; ``start`` without context.
    context_from: int | None = None
    #: (this slice's number, the partition's slice count); (0, 1) for a whole partition.
    slice: tuple[int, int] = (0, 1)
    #: (host, port, token) of the driver's progress channel, None for no progress frames;
    #: ``task_id`` names this task in them.
    progress: tuple[str, int, str] | None = None
    task_id: int = 0
    #: With schema mapping on this topic: (source side, target side) canonical schema ids
    #: (:mod:`k2k.verify.schemas`); None compares keys and values byte for byte.
    schema_ids: tuple[SchemaIdCanon, SchemaIdCanon] | None = None


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What one task found; returned to the driver (small, picklable)."""

    topic: str
    partition: int
    target_topic: str
    start: int
    until: int
    #: The source's end offset when planned (offsets from ``until`` on were not compared).
    end: int
    source_records: int
    target_records: int
    matched: int
    duplicates: int
    ahead: int
    not_compared: int
    difference_count: int
    differences: tuple[Difference, ...]
    source_digest: str
    target_digest: str
    #: Per target partition read: (records read, records attributed to this partition).
    target_counts: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Target records of source records before a partial range, left out.
    before: int = 0
    #: How many target records the target digest covers (to combine slices' digests).
    target_digested: int = 0
    #: How many slices (tasks) the partition was verified in.
    slices: int = 1
    #: A slice whose lane may hold a replay reaching back before its context: the driver
    #: verifies it again together with the slice before (see :mod:`k2k.verify.slicing`).
    doubt: bool = False
    #: A slice whose walk was not in step at its end cut: verified again with the next.
    doubt_end: bool = False

    @property
    def ok(self) -> bool:
        return self.difference_count == 0 and self.source_digest == self.target_digest

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "targetTopic": self.target_topic,
            "sourceRange": [self.start, self.until],
            "sourceEnd": self.end,
            "slices": self.slices,
            "sourceRecords": self.source_records,
            "targetRecords": self.target_records,
            "matched": self.matched,
            "duplicates": self.duplicates,
            "ahead": self.ahead,
            "notCompared": self.not_compared,
            "beforeRange": self.before,
            "sourceDigest": self.source_digest,
            "targetDigest": self.target_digest,
            "ok": self.ok,
            "differenceCount": self.difference_count,
            "differences": [d.to_json() for d in self.differences],
        }


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


class _Tracing:
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


def verify_partition(task: PartitionTask) -> PartitionResult:
    """Runs on: executor, once per task. Reads both sides and compares them (compact
    fingerprints first, full ones only when a lane is not plainly equal, see the module
    doc); returns a :class:`PartitionResult` (its differences cut to :data:`MAX_REPORTED`).
    With ``task.progress`` it reports the records it has read to the driver as it goes."""
    from k2k.pipeline.channel import StopSignal

    meter = _Meter(task.task_id)
    signal = StopSignal(task.progress, meter.frame) if task.progress else None
    try:
        plain = not (
            task.hash_partitions
            or task.mapped_runs
            or task.partial
            or task.tracing
            or task.schema_ids
        )
        result = _verify_plain(task, meter) if plain else _verify(task, compact, meter)
        if result is None:
            meter.again()
            result = _verify(task, fingerprint, meter)
        assert result is not None
        meter.done = True
        return result
    finally:
        if signal is not None:
            signal.close()
            signal.send_now()


class _Meter:
    """Counts the records a task has read on both sides, for the driver's progress line (a
    second pass is not counted again); ``done`` once the task has its result."""

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


Make = Any  # compact or fingerprint: (partition, offset, source offset, key, value, headers, ts)


def _verify_plain(task: PartitionTask, meter: _Meter) -> PartitionResult | None:
    """The compact pass for the common case, kept lean: ``partition: source``, no tracing
    headers, no offset mappings, a range from the earliest offset (or a slice). One lane:
    source partition p -> target partition p; only content hashes are kept, and the lane
    is equal when the target's hashes are the source's from the context on. None when not."""
    hashes: list[int] = []
    keep_headers, keep_timestamp = task.keep_headers, task.keep_timestamp
    first = task.start if task.context_from is None else task.context_from
    tp = task.partition
    context = compared = 0  # records before start, before until
    for batch in read_batches(
        task.source_consumer, "source", task.topic, task.partition, first, task.end, task.timeout_s
    ):
        hashes.extend(_hashes(batch, keep_headers, keep_timestamp))
        low, high = batch[0].offset() or 0, batch[-1].offset() or 0
        if high < task.start:
            context += len(batch)
        elif low >= task.start and high < task.until:
            pass
        else:
            context += sum(1 for m in batch if (m.offset() or 0) < task.start)
        if high < task.until:
            compared += len(batch)
        else:
            compared += sum(1 for m in batch if (m.offset() or 0) < task.until)
        meter.add(len(batch))
    lane: list[int] = []
    seen = 0
    if tp in task.target_ranges and tp in task.claims_unattributed:
        t_first, t_end = task.target_ranges[tp]
        for batch in read_batches(
            task.target_consumer, "target", task.target_topic, tp, t_first, t_end, task.timeout_s
        ):
            seen += len(batch)
            lane.extend(_hashes(batch, True, keep_timestamp))
            meter.add(len(batch))
    n = len(lane)
    own = compared - context
    if n < own or lane != hashes[context : context + n]:
        return None
    same = digest(hashes[context:compared])  # lane[:own] is that very sequence of hashes
    r = LaneResult(
        matched=own,
        ahead=n - own,
        expected=own,
        actual=n,
        source_digest=same,
        target_digest=same,
        target_digested=own,
        tail_matched=n,
    )
    counts = {tp: (seen, seen)} if tp in task.target_ranges else {}
    return _result(task, [r], own, 0, counts, 0)


def _verify(task: PartitionTask, make: Make, meter: _Meter) -> PartitionResult | None:
    """One pass over the task's ranges with ``make`` fingerprints. With compact ones: None
    as soon as a lane is not plainly equal."""
    full = make is fingerprint
    # Step 1. The source records, in order, with their keys (for ``partition: hash``).
    expected, keys = _read_source(task, make, meter)
    # Step 2. The target records attributed to this source partition, per target partition.
    tracing = _Tracing(task.tracing)
    actual, null_keys, counts = _read_target(task, tracing, keys, make, meter)
    by_offset = tracing.offset is not None or bool(task.mapped_runs)
    # Step 3. Align lane by lane.
    lanes, skipped = _lanes(task, expected, keys, actual, null_keys, by_offset)
    if task.mapped_runs and tracing.offset is None:
        lanes = [(e, _infer_offsets(e, a)) for e, a in lanes]
    before = 0
    if task.partial:
        trimmed = [_trim_before(e, a, task.start, by_offset) for e, a in lanes]
        lanes = [(e, a) for (e, _), (a, _) in zip(lanes, trimmed, strict=True)]
        before = sum(n for _, n in trimmed)
    results = []
    for e, a in lanes:
        compared = sum(1 for f in e if f.offset < task.until)
        context = sum(1 for f in e if f.offset < task.start)
        if full:
            results.append(align(e, a, compared, by_offset=by_offset, before=context))
            continue
        r = equal_lane(e, a, compared, by_offset, context)
        if r is None:
            return None
        results.append(r)
    compared = sum(1 for f in expected if task.start <= f.offset < task.until)
    return _result(task, results, compared, skipped, counts, before)


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


def _infer_offsets(expected: list[Fingerprint], actual: list[Fingerprint]) -> list[Fingerprint]:
    """With offset mappings, target records no run covers (written after the last one, or
    by someone else) get the source offset of the next source record of equal content after
    the one before them, or of the last such record before (a replay); none without one."""
    by_content: dict[Any, list[int]] = {}
    for f in expected:
        by_content.setdefault(f.content, []).append(f.offset)
    out = []
    last = -1
    for f in actual:
        if f.source_offset is None and (found := by_content.get(f.content)):
            k = bisect.bisect_right(found, last)
            f = f._replace(source_offset=found[k] if k < len(found) else found[-1])
        if f.source_offset is not None:
            last = f.source_offset
        out.append(f)
    return out


def _trim_before(
    expected: list[Fingerprint], actual: list[Fingerprint], start: int, by_offset: bool
) -> tuple[list[Fingerprint], int]:
    """A lane's target records without those of source records before ``start``, and how
    many were left out. With the offset header that is exact. Without it the target lane
    starts at its first record equal to one of the lane's first :data:`TRIM_PROBE` source
    records (so a missing first record is still reported); all of it is left out when the
    lane has no source record in the range, none when no such record is found (everything
    before then shows as extra)."""
    if by_offset:
        kept = [f for f in actual if f.source_offset is None or f.source_offset >= start]
        return kept, len(actual) - len(kept)
    if not expected:
        return [], len(actual)
    firsts = {f.content for f in expected[:TRIM_PROBE]}
    for k, f in enumerate(actual):
        if f.content in firsts:
            return actual[k:], k
    return actual, 0


def _read_source(
    task: PartitionTask, make: Make, meter: _Meter
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
    for batch in read_batches(
        task.source_consumer, "source", task.topic, p, first, task.end, task.timeout_s
    ):
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


def _read_target(
    task: PartitionTask,
    tracing: _Tracing,
    keys: list[bytes | None],
    make: Make,
    meter: _Meter,
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
                source_offset = tracing.source_offset(traced)
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


def _lanes(
    task: PartitionTask,
    expected: list[Fingerprint],
    keys: list[bytes | None],
    actual: dict[int, list[Fingerprint]],
    null_keys: list[Fingerprint],
    by_offset: bool,
) -> tuple[list[tuple[list[Fingerprint], list[Fingerprint]]], int]:
    """The (expected, actual) lanes to align, and how many source records were not
    compared (null keys with ``partition: hash`` and no offset header)."""
    if not task.hash_partitions:
        return [(expected, actual.get(task.partition, []))], 0
    n = task.hash_partitions
    per_tp: dict[int, list[Fingerprint]] = {tp: [] for tp in actual}
    expected_null: list[Fingerprint] = []
    for f, key in zip(expected, keys, strict=True):
        if key is None:
            expected_null.append(f)
        else:
            per_tp.setdefault(murmur2_partition(key, n), []).append(f)
    lanes = [(per_tp[tp], actual.get(tp, [])) for tp in sorted(per_tp)]
    if by_offset:
        # Null keys went to any partition: their order is the source offsets'.
        null_keys.sort(key=lambda f: f.source_offset if f.source_offset is not None else -1)
        lanes.append((expected_null, null_keys))
        return lanes, 0
    return lanes, sum(1 for f in expected_null if f.offset < task.until)


def _result(
    task: PartitionTask,
    lanes: list[LaneResult],
    compared: int,
    not_compared: int,
    counts: dict[int, tuple[int, int]],
    before: int,
) -> PartitionResult:
    diffs = sorted(
        (d for r in lanes for d in r.differences),
        key=lambda d: (
            d.source_offsets[0] if d.source_offsets else 1 << 62,
            d.target_offsets[0] if d.target_offsets else 1 << 62,
        ),
    )
    src = dst = src_n = dst_n = 0
    for r in lanes:  # the digests of the lanes one after the other
        src, src_n = combine(src, src_n, r.source_digest), src_n + r.expected
        dst, dst_n = combine(dst, dst_n, r.target_digest), dst_n + r.target_digested
    return PartitionResult(
        topic=task.topic,
        partition=task.partition,
        target_topic=task.target_topic,
        start=task.start,
        until=task.until,
        end=task.end,
        source_records=compared,
        target_records=sum(r.actual for r in lanes),
        matched=sum(r.matched for r in lanes),
        duplicates=sum(r.duplicates for r in lanes),
        ahead=sum(r.ahead for r in lanes),
        not_compared=not_compared,
        difference_count=len(diffs),
        differences=tuple(diffs[:MAX_REPORTED]),
        source_digest=digest_text(src),
        target_digest=digest_text(dst),
        target_counts=counts,
        before=before,
        target_digested=dst_n,
        slices=task.slice[1],
        doubt=any(r.doubt for r in lanes),
        doubt_end=task.slice[0] < task.slice[1] - 1
        and any(r.tail_matched < CUT_MARGIN and not r.gave_up for r in lanes),
    )


def digest_text(value: int) -> str:
    """A digest as shown: 64 hexadecimal digits."""
    return f"{value:064x}"
