"""The verify task: one source partition (or one slice of it) and the target records
routed from it, compared.

Runs on: executor, once per selected source partition or slice (one Spark task each).
Each task reads its source range and the target partition(s) its records were routed to
(:mod:`k2k.verify.reading`, which also says how target records are attributed to it), and
writes nothing to either cluster.

Two passes, the second only when needed: first every record becomes a *compact*
fingerprint (its offsets and one 64-bit content hash) and each lane is checked for plain
equality (:func:`~k2k.verify.align.equal_lane`); a task whose lanes are all equal is done.
Otherwise the task reads its ranges again with full fingerprints (field digests and
payload previews) and aligns them, which names each difference and recognises replays.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from k2k.kafka.murmur2 import murmur2_partition
from k2k.stages.headers import TracingHeaders
from k2k.stages.topicplan import RecordSteps
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
from k2k.verify.reading import (
    Make,
    Meter,
    Tracing,
    read_batches,
    read_source,
    read_target,
    source_batches,
)
from k2k.verify.schemas import SchemaIdCanon

__all__ = [
    "MAX_REPORTED",
    "PartitionResult",
    "PartitionTask",
    "digest_text",
    "verify_partition",
]

#: Differences listed per source partition (all are counted).
MAX_REPORTED = 10
#: How many first source records of a partial range may start the target's part of it.
TRIM_PROBE = 8
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
    #: ``offsets: identical``: target records below this offset are the source records at
    #: the same offset (compared there, so the first difference is where identity breaks);
    #: None without identical offsets.
    identical_below: int | None = None
    #: The pipeline's transform steps for this topic: the source records are compared as
    #: the steps write them (None: as they are).
    steps: RecordSteps | None = None


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


def verify_partition(task: PartitionTask) -> PartitionResult:
    """Runs on: executor, once per task. Reads both sides and compares them (compact
    fingerprints first, full ones only when a lane is not plainly equal, see the module
    doc); returns a :class:`PartitionResult` (its differences cut to :data:`MAX_REPORTED`).
    With ``task.progress`` it reports the records it has read to the driver as it goes."""
    from k2k.pipeline.channel import StopSignal

    meter = Meter(task.task_id)
    signal = StopSignal(task.progress, meter.frame) if task.progress else None
    try:
        plain = not (
            task.hash_partitions
            or task.mapped_runs
            or task.partial
            or task.tracing
            or task.schema_ids
            or task.identical_below is not None
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


def _verify_plain(task: PartitionTask, meter: Meter) -> PartitionResult | None:
    """The compact pass for the common case, kept lean: ``partition: source``, no tracing
    headers, no offset mappings, a range from the earliest offset (or a slice). One lane:
    source partition p -> target partition p; only content hashes are kept, and the lane
    is equal when the target's hashes are the source's from the context on. None when not."""
    hashes: list[int] = []
    keep_headers, keep_timestamp = task.keep_headers, task.keep_timestamp
    first = task.start if task.context_from is None else task.context_from
    tp = task.partition
    context = compared = 0  # records before start, before until
    for batch in source_batches(task, first):
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


def _verify(task: PartitionTask, make: Make, meter: Meter) -> PartitionResult | None:
    """One pass over the task's ranges with ``make`` fingerprints. With compact ones: None
    as soon as a lane is not plainly equal."""
    full = make is fingerprint
    # Step 1. The source records, in order, with their keys (for ``partition: hash``).
    expected, keys = read_source(task, make, meter)
    # Step 2. The target records attributed to this source partition, per target partition.
    tracing = Tracing(task.tracing)
    actual, null_keys, counts = read_target(task, tracing, keys, make, meter)
    by_offset = (
        tracing.offset is not None or bool(task.mapped_runs) or task.identical_below is not None
    )
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
