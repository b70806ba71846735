"""Slicing a verify task (pure parts): slices tile the partition at the cuts, doubtful slices
are merged with their neighbour, slice results add up, and the driver's progress from the
tasks' frames. The cuts themselves are found on real brokers (test_verify_slices.py)."""

from __future__ import annotations

import dataclasses

from k2k.verify.align import align, combine, digest, fingerprint
from k2k.verify.progress import VerifyProgress
from k2k.verify.slicing import LOOKBEHIND, build_slices, check_cuts, merge_doubtful, merge_results
from k2k.verify.task import PartitionResult, PartitionTask, _result
from tests.unit.verify.test_align import PICKLED

#: One partition of 400,000 offsets, ``partition: source``, no tracing headers or mappings.
TASK = dataclasses.replace(
    PICKLED,
    partition=0,
    until=400_000,
    end=400_010,
    target_ranges={0: (0, 400_020)},
    claims_unattributed=(0,),
    tracing=None,
    mapped_runs={},
)


def test_slices_tile_the_partition_at_the_cuts_with_context_after_the_first():
    slices = build_slices(TASK, [(100_000, 100_003), (250_000, 250_009)])
    check_cuts(TASK, slices)
    assert [(s.start, s.until, s.end, s.target_ranges[0], s.slice) for s in slices] == [
        (0, 100_000, 100_000, (0, 100_003), (0, 3)),
        (100_000, 250_000, 250_000, (100_003, 250_009), (1, 3)),
        (250_000, 400_000, 400_010, (250_009, 400_020), (2, 3)),
    ]
    assert [s.context_from for s in slices] == [
        None,
        100_000 - LOOKBEHIND,
        250_000 - LOOKBEHIND,
    ]


#: Enough records for a slice to end in step with its cut (CUT_MARGIN of them matched).
FIVE = [b"a", b"b", b"c", b"d", b"e"]


def result_of(task: PartitionTask, values: list[bytes], **kw: object) -> PartitionResult:
    """The result of a slice whose lane holds ``values`` on both sides (offsets from start)."""
    fps = [fingerprint(0, task.start + i, None, b"k", v, [], 0) for i, v in enumerate(values)]
    lane = align(fps, fps, len(fps))
    return dataclasses.replace(
        _result(task, [lane], len(fps), 0, {0: (len(fps), len(fps))}, 0), **kw
    )


def test_a_doubtful_slice_is_merged_with_the_one_before_and_slices_are_renumbered():
    slices = build_slices(TASK, [(100_000, 100_003), (250_000, 250_009)])
    results = [result_of(s, FIVE) for s in slices]
    results[1] = dataclasses.replace(results[1], doubt=True)

    tasks, kept = merge_doubtful(slices, results)

    assert [(t.start, t.until, t.target_ranges[0], t.slice) for t in tasks] == [
        (0, 250_000, (0, 250_009), (0, 2)),
        (250_000, 400_000, (250_009, 400_020), (1, 2)),
    ]
    assert kept == [None, results[2]]
    # A slice that did not end in step with its cut is merged with the next one.
    results = [result_of(s, FIVE) for s in slices]
    results[1] = dataclasses.replace(results[1], doubt_end=True)
    tasks, kept = merge_doubtful(slices, results)
    assert [(t.start, t.until) for t in tasks] == [(0, 100_000), (100_000, 400_000)]
    assert kept == [results[0], None]


def test_slice_results_add_up_to_one_partition_result_with_combined_digests():
    slices = build_slices(TASK, [(100_000, 100_003)])
    values = [b"v%d" % i for i in range(10)]
    parts = [result_of(slices[0], values[:4]), result_of(slices[1], values[4:])]

    r = merge_results(parts)

    whole = digest(fingerprint(0, i, None, b"k", v, [], 0).h for i, v in enumerate(values))
    assert int(r.source_digest, 16) == whole == int(r.target_digest, 16)
    assert combine(int(parts[0].source_digest, 16), 4, int(parts[1].source_digest, 16)) == whole
    assert (r.start, r.until, r.end, r.slices, r.matched, r.source_records) == (
        0,
        400_000,
        400_010,
        2,
        10,
        10,
    )
    assert r.target_counts == {0: (10, 10)} and r.ok


def test_progress_counts_what_the_tasks_read_and_the_partitions_done():
    slices = build_slices(TASK, [(100_000, 100_003)])
    other = dataclasses.replace(TASK, partition=1, until=1_000, end=1_000)
    watch = VerifyProgress([*slices, other])
    ids = [watch.add(t) for t in (*slices, other)]
    # What each task reads: its source range with context, and its target range.
    total = (100_000 + 100_003) + (300_010 + LOOKBEHIND + 300_017) + (1_000 + 400_020)
    assert watch.snapshot() == (0, total, 0, 2)

    watch.frame(b"verify %d 5000 0" % ids[0])
    watch.frame(b"verify %d 1000 1" % ids[2])  # done: counts as all it had to read (401,020)
    watch.frame(b"verify 99 5 1")  # no such task
    watch.frame(b"garbage")

    assert watch.snapshot() == (5_000 + 401_020, total, 1, 2)
