"""The mapping index against a brute-force model: every source position of a replicated
partition, across crashes that re-copy from an earlier position, translates to the target
offset of the newest copy of the next record (zero skipped, zero read again)."""

import itertools
import random

import pytest

from k2k.formats.offset_mapping import OffsetMappingRecord
from k2k.offsetmapping.index import PartitionIndex
from k2k.offsetmapping.retention import cut_points


def _replicate(rng: random.Random, records: list[int], crashes: int):
    """Runs as a replicator writes them: consecutive records split at gaps and at random
    batch ends; after a crash it restarts from a random earlier position. Yields
    (source_from, first, count, target_first)."""
    target = 1000
    position = 0
    crashes_left = crashes
    i = 0
    while i < len(records):
        j = i + 1
        limit = rng.randint(1, 8)
        while j < len(records) and j - i < limit and records[j] == records[j - 1] + 1:
            j += 1
        yield position, records[i], j - i, target
        target += j - i + rng.randint(0, 1)  # a transaction marker, sometimes
        position = records[j - 1] + 1
        i = j
        if crashes_left and rng.random() < 0.1:
            crashes_left -= 1
            i = rng.randint(0, i)
            position = records[i - 1] + 1 if i else 0


def _expected(runs, c: int) -> int:
    cover: dict[int, int | None] = {}
    last = None
    for frm, first, count, t in runs:
        for o in range(frm, first):
            cover[o] = None
        for k in range(count):
            cover[first + k] = t + k
    top = max(cover)
    if c > top:
        last = cover[max(o for o, v in cover.items() if v is not None)]
        return last + 1
    o = c
    while o <= top and cover.get(o) is None:
        o += 1
    if o > top:
        return cover[max(o for o, v in cover.items() if v is not None)] + 1
    return cover[o]


@pytest.mark.parametrize("seed", range(40))
def test_every_position_translates_to_the_newest_copy_of_the_next_record(seed):
    rng = random.Random(seed)
    records = sorted(rng.sample(range(200), rng.randint(1, 120)))
    runs = list(_replicate(rng, records, crashes=3))
    index = PartitionIndex()
    for n, (frm, first, count, t) in enumerate(runs):
        rec = OffsetMappingRecord("p", "s", 0, frm, first, count, "t", 0, t, t + count - 1, n)
        index.add(rec, (0, n))
    spans = index.spans
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
    for c in range(0, records[-1] + 3):
        found = index.translate(c)
        assert found is not None and found.exact, c
        assert found.offset == _expected(runs, c), c


def test_a_position_before_every_mapping_is_not_translated():
    index = PartitionIndex()
    index.add(OffsetMappingRecord("p", "s", 0, 50, 52, 3, "t", 0, 7, 9, 0), (0, 0))
    assert index.translate(49) is None
    assert index.translate(50).offset == 7


def test_an_interleaved_run_translates_to_a_lower_bound():
    index = PartitionIndex()
    # 4 records landed at 10..15: another writer's 2 records are somewhere in between.
    index.add(OffsetMappingRecord("p", "s", 0, 0, 0, 4, "t", 0, 10, 15, 0), (0, 0))
    inside = index.translate(2)
    assert (inside.offset, inside.exact) == (12, False)
    after = index.translate(4)
    assert (after.offset, after.exact) == (16, True)


def test_pruned_records_leave_a_hole_that_translates_to_a_lower_bound():
    index = PartitionIndex()
    for n in range(3):
        index.add(
            OffsetMappingRecord("p", "s", 0, 10 * n, 10 * n, 10, "t", 0, 100 * n, 100 * n + 9, n),
            (0, n),
        )
    # A newer copy of 10..19 sits at mapping offset 3; the original at 1 goes.
    index.add(OffsetMappingRecord("p", "s", 0, 10, 10, 10, "t", 0, 500, 509, 3), (0, 3))
    index.prune(2)
    assert [s.at[1] for s in index.spans] == [3, 2]
    assert index.translate(5) is None  # its span was pruned and nothing precedes it
    assert index.translate(15).offset == 505


def test_retention_keeps_what_live_groups_need():
    index = PartitionIndex()
    for n in range(10):
        index.add(
            OffsetMappingRecord("p", "s", 0, 10 * n, 10 * n, 10, "t", 0, 10 * n, 10 * n + 9, n),
            (0, n),
        )
    needed = {index.translate(25).span}
    assert cut_points({0: [index]}, count=3, oldest_ms=None, needed=needed) == {0: 2}
    assert cut_points({0: [index]}, count=3, oldest_ms=None, needed=set()) == {0: 7}
    # Everything is older than the limit: the last run stays (positions past the data).
    assert cut_points({0: [index]}, count=3, oldest_ms=100, needed=set()) == {0: 9}
