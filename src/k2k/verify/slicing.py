"""Slicing a large source partition into several verify tasks, cut where both sides agree.

Runs on: driver, while ``k2k verify`` plans (:func:`slice_tasks`), and after the job for
the slices to verify again (:func:`merge_doubtful`, :func:`merge_results`).

Without tracing headers the target records of a source partition carry no source offset:
where a source offset range ends on the target is only known by content. So a partition is
cut only at an *anchor*: a source offset ``a`` and a target offset ``b`` such that the
``2 * MARGIN`` records around ``a`` (source) are, one for one, the records around ``b``
(the target lane, attributed as the task attributes them), pairwise distinct, and found
exactly once in the target records searched. Records before the cut belong to the slice
before it on both sides, the rest to the slice after it. A difference cannot sit on a cut
(the records around it agree), so each is found by exactly one slice, at its own offsets.

How an anchor is looked for: the even split of the range gives a wanted source offset; the
source records within :data:`SEARCH` of it are read, and the target records within
:data:`WINDOW` of where that offset should be on the target: exactly by the offset
mappings' runs when there are any, else at the target offset of the source record's
timestamp (timestamps compared), else in proportion to the ranges. The source record
nearest to the wanted offset that anchors is the cut; with none, the partition is cut in
fewer places (a slice then covers two shares).

At-least-once replays across a cut: a slice after a cut reads the :data:`LOOKBEHIND`
source records before its range as context, so target records replaying them are
duplicates, as in one task. A replay reaching back further looks like extra records ending
where the target had got; a slice that sees such a shape (or gives up on a difference)
says so (``doubt``), and the driver verifies it again together with the slice before it
(:func:`merge_doubtful`), until no slice doubts: the report is the one a single task
would give.

Not sliced: ``partition: hash`` (each slice would read every target partition), and
partitions whose range is at most ``slice_records`` offsets.

Invariants (checked by :func:`check_cuts`):

1. the cuts of a partition strictly increase on both sides and lie strictly inside the
   compared source range and the target range;
2. the slices' source ranges ``[start, until)`` and target ranges tile the partition's:
   every offset belongs to exactly one slice.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException, TopicPartition

from k2k.kafka.factory import build_consumer
from k2k.kafka.faults import cluster_error
from k2k.verify.align import CUT_MARGIN, Fingerprint, combine, compact
from k2k.verify.reading import Meter, Tracing, read_batches, read_source, read_target
from k2k.verify.task import MAX_REPORTED, PartitionResult, PartitionTask, digest_text

__all__ = [
    "LOOKBEHIND",
    "MARGIN",
    "check_cuts",
    "merge_doubtful",
    "merge_results",
    "slice_task",
    "slice_tasks",
]

log = logging.getLogger("k2k.verify")

#: Records on each side of a cut that must agree one for one.
MARGIN = CUT_MARGIN
#: How far (source offsets) from the even split a cut may move to find an anchor.
SEARCH = 256
#: Target records read on each side of the estimated target offset of a cut.
WINDOW = 2_048
#: Source records before a slice read as context, for replays reaching back across a cut.
LOOKBEHIND = 20_000
#: Partitions whose cuts are looked for at the same time (each look reads both clusters).
_PARALLEL_LOOKUPS = 8

Cut = tuple[int, int]


def slice_tasks(tasks: Sequence[PartitionTask], slice_records: int) -> list[PartitionTask]:
    """Runs on: driver. Every task whose compared range exceeds ``slice_records`` offsets,
    cut into slices of about that size where anchors are found; the others as they are.
    ``slice_records`` 0 slices nothing."""
    if slice_records <= 0:
        return list(tasks)
    with ThreadPoolExecutor(_PARALLEL_LOOKUPS, thread_name_prefix="k2k-verify-cut") as pool:
        sliced = list(pool.map(lambda t: slice_task(t, slice_records), tasks))
    return [s for group in sliced for s in group]


def slice_task(task: PartitionTask, slice_records: int) -> list[PartitionTask]:
    """Runs on: driver. The slices of one partition's task (itself when not sliced)."""
    span = task.until - task.start
    tp = task.partition
    if task.hash_partitions or tp not in task.target_ranges or span <= slice_records:
        return [task]
    n = -(-span // slice_records)
    cuts: list[Cut] = []
    for k in range(1, n):
        cut = find_cut(task, task.start + span * k // n)
        if cut is not None and (not cuts or (cut[0] > cuts[-1][0] and cut[1] > cuts[-1][1])):
            cuts.append(cut)
    if len(cuts) < n - 1:
        log.info(
            "%s[%d]: %d of %d cuts found (no anchor near the others): %d slices",
            task.topic,
            tp,
            len(cuts),
            n - 1,
            len(cuts) + 1,
        )
    slices = build_slices(task, cuts)
    check_cuts(task, slices)
    return slices


def build_slices(task: PartitionTask, cuts: Sequence[Cut]) -> list[PartitionTask]:
    """The slices of ``task`` at ``cuts`` (the first keeps a partial range's handling; the
    others read :data:`LOOKBEHIND` context records; the last keeps the range's end)."""
    tp = task.partition
    t_first, t_end = task.target_ranges[tp]
    sources = [task.start, *(a for a, _ in cuts), task.until]
    targets = [t_first, *(b for _, b in cuts), t_end]
    n = len(cuts) + 1
    out = []
    for k in range(n):
        last = k == n - 1
        start, until = sources[k], sources[k + 1]
        out.append(
            dataclasses.replace(
                task,
                start=start,
                until=until,
                end=task.end if last else until,
                partial=task.partial if k == 0 else False,
                context_from=None if k == 0 else max(task.start, start - LOOKBEHIND),
                target_ranges={tp: (targets[k], targets[k + 1])},
                slice=(k, n),
            )
        )
    return out


def check_cuts(task: PartitionTask, slices: Sequence[PartitionTask]) -> None:
    """Invariants 1 and 2 of the module doc."""
    tp = task.partition
    assert slices[0].start == task.start and slices[-1].until == task.until, slices
    assert slices[-1].end == task.end, slices
    assert slices[0].target_ranges[tp][0] == task.target_ranges[tp][0], slices
    assert slices[-1].target_ranges[tp][1] == task.target_ranges[tp][1], slices
    for before, after in itertools.pairwise(slices):
        assert before.until == after.start and before.start < before.until, slices
        b0, b1 = before.target_ranges[tp]
        a0, _ = after.target_ranges[tp]
        assert b1 == a0 and b0 < b1, slices


def find_cut(task: PartitionTask, wanted: int) -> Cut | None:
    """Runs on: driver. The anchor (source offset, target offset) nearest to ``wanted``,
    or None. Raises :class:`~k2k.errors.ClusterError` when a cluster does not answer."""
    lo = max(task.start + MARGIN, wanted - SEARCH)
    hi = min(task.until - MARGIN, wanted + SEARCH)
    if lo >= hi:
        return None
    window = dataclasses.replace(
        task,
        start=lo - MARGIN,
        until=hi + MARGIN,
        end=hi + MARGIN,
        partial=False,
        context_from=None,
        progress=None,
    )
    expected, _ = read_source(window, compact, Meter(0))
    if len(expected) < 2 * MARGIN:
        return None
    tracing = Tracing(task.tracing)
    by_offset = tracing.offset is not None or bool(task.mapped_runs)
    tried: list[int] = []
    for estimate in _estimates(task, expected, wanted):
        if any(abs(estimate - b) < WINDOW // 2 for b in tried):
            continue
        tried.append(estimate)
        actual = _target_window(task, tracing, estimate)
        cut = _anchor(expected, actual, wanted, by_offset, task)
        if cut is not None:
            return cut
    return None


def _target_window(task: PartitionTask, tracing: Tracing, estimate: int) -> list[Fingerprint]:
    tp = task.partition
    first, end = task.target_ranges[tp]
    lo, hi = max(first, estimate - WINDOW), min(end, estimate + WINDOW)
    if lo >= hi:
        return []
    window = dataclasses.replace(task, target_ranges={tp: (lo, hi)}, progress=None)
    actual, _, _ = read_target(window, tracing, [], compact, Meter(0))
    return actual.get(tp, [])


def _estimates(task: PartitionTask, expected: list[Fingerprint], wanted: int) -> list[int]:
    """Where the source offset ``wanted`` should be on the target, best guess first."""
    tp = task.partition
    out = []
    for first, count, source_first in task.mapped_runs.get(tp, ()):
        if source_first is not None and source_first <= wanted < source_first + count:
            out.append(first + wanted - source_first)
            break
    if task.keep_timestamp:
        offsets = [f.offset for f in expected]
        k = min(bisect.bisect_left(offsets, wanted), len(expected) - 1)
        found = _offset_for_time(task, expected[k].offset)
        if found is not None:
            out.append(found)
    t_first, t_end = task.target_ranges[tp]
    share = (wanted - task.start) / max(1, task.end - task.start)
    out.append(t_first + int(share * (t_end - t_first)))
    return out


def _offset_for_time(task: PartitionTask, source_offset: int) -> int | None:
    """The target offset of the first record at or after the timestamp of the source record
    at ``source_offset`` (None when the target has none)."""
    ts = None
    for batch in read_batches(
        task.source_consumer,
        "source",
        task.topic,
        task.partition,
        source_offset,
        source_offset + 1,
        task.timeout_s,
    ):
        ts = batch[0].timestamp()[1] if batch else None
    if ts is None:
        return None
    target = build_consumer(task.target_consumer)
    try:
        want = [TopicPartition(task.target_topic, task.partition, ts)]
        found = target.offsets_for_times(want, timeout=task.timeout_s)
    except KafkaException as exc:
        bootstrap = task.target_consumer.get("bootstrap.servers", "?")
        raise cluster_error(exc, "target", bootstrap, "looking up an offset by timestamp") from None
    finally:
        target.close()
    offset = found[0].offset if found else -1
    return offset if offset >= 0 else None


def _anchor(
    expected: list[Fingerprint],
    actual: list[Fingerprint],
    wanted: int,
    by_offset: bool,
    task: PartitionTask,
) -> Cut | None:
    """The anchor nearest to ``wanted`` between a source window and a target window."""
    ids_e = [f.identity(by_offset) for f in expected]
    ids_a = [f.identity(by_offset) for f in actual]
    where: dict[object, list[int]] = {}
    for j, ident in enumerate(ids_a):
        where.setdefault(ident, []).append(j)
    t_first, t_end = task.target_ranges[task.partition]
    candidates = sorted(
        range(MARGIN, len(expected) - MARGIN + 1), key=lambda i: abs(expected[i].offset - wanted)
    )
    for i in candidates:
        if not task.start < expected[i].offset < task.until:
            continue
        around = ids_e[i - MARGIN : i + MARGIN]
        if any(len(where.get(x, ())) != 1 for x in around):
            continue  # each record once in the target searched: no replay over the cut there
        (j,) = where[ids_e[i]]
        if (
            MARGIN <= j <= len(actual) - MARGIN
            and ids_a[j - MARGIN : j + MARGIN] == around
            and t_first < actual[j].offset < t_end
        ):
            return expected[i].offset, actual[j].offset
    return None


def merge_doubtful(
    tasks: list[PartitionTask], results: list[PartitionResult]
) -> tuple[list[PartitionTask], list[PartitionResult | None]]:
    """Runs on: driver, after a job. Each slice whose result doubts (see the module doc)
    merged with the slice before it: the new task list, and the results still valid
    (None for the merged tasks, to run again). Tasks and results are in the same order,
    a partition's slices one after the other."""
    out_tasks: list[PartitionTask] = []
    out_results: list[PartitionResult | None] = []
    for task, result in zip(tasks, results, strict=True):
        prev = out_tasks[-1] if out_tasks else None
        same = prev is not None and (prev.topic, prev.partition) == (task.topic, task.partition)
        prev_result = out_results[-1] if out_results else None
        doubts = result.doubt or (prev_result is not None and prev_result.doubt_end)
        if doubts and task.slice[0] > 0 and same and prev is not None:
            out_tasks[-1] = _join(prev, task)
            out_results[-1] = None
            continue
        out_tasks.append(task)
        out_results.append(result)
    return _renumber(out_tasks), out_results


def _renumber(tasks: list[PartitionTask]) -> list[PartitionTask]:
    """Each partition's slices numbered again (k, n) after some were merged."""
    out: list[PartitionTask] = []
    for _, group in itertools.groupby(tasks, key=lambda t: (t.topic, t.partition)):
        slices = list(group)
        out.extend(dataclasses.replace(t, slice=(k, len(slices))) for k, t in enumerate(slices))
    return out


def _join(first: PartitionTask, then: PartitionTask) -> PartitionTask:
    tp = first.partition
    return dataclasses.replace(
        first,
        until=then.until,
        end=then.end,
        target_ranges={tp: (first.target_ranges[tp][0], then.target_ranges[tp][1])},
    )


def merge_results(parts: Sequence[PartitionResult]) -> PartitionResult:
    """Runs on: driver. One partition's result from its slices' results, in source order:
    counts added, differences in order, digests combined (equal to one task's)."""
    if len(parts) == 1:
        return dataclasses.replace(parts[0], slices=1, doubt=False, doubt_end=False)
    src = dst = src_n = dst_n = 0
    counts: dict[int, tuple[int, int]] = {}
    for r in parts:
        src, src_n = combine(src, src_n, int(r.source_digest, 16)), src_n + r.source_records
        dst, dst_n = combine(dst, dst_n, int(r.target_digest, 16)), dst_n + r.target_digested
        for tp, (seen, taken) in r.target_counts.items():
            s0, t0 = counts.get(tp, (0, 0))
            counts[tp] = (s0 + seen, t0 + taken)
    diffs = [d for r in parts for d in r.differences]
    first, last = parts[0], parts[-1]
    return dataclasses.replace(
        first,
        until=last.until,
        end=last.end,
        source_records=src_n,
        target_records=sum(r.target_records for r in parts),
        matched=sum(r.matched for r in parts),
        duplicates=sum(r.duplicates for r in parts),
        ahead=sum(r.ahead for r in parts),
        not_compared=sum(r.not_compared for r in parts),
        difference_count=sum(r.difference_count for r in parts),
        differences=tuple(diffs[:MAX_REPORTED]),
        source_digest=digest_text(src),
        target_digest=digest_text(dst),
        target_counts=counts,
        target_digested=dst_n,
        slices=len(parts),
        doubt=False,
        doubt_end=False,
    )
