"""The offset-confidence classes, from mappings as the replicator writes them."""

from __future__ import annotations

from k2k.formats.offset_mapping import OffsetMappingRecord
from k2k.migration.confidence import classify_groups
from k2k.offsetmapping.index import PartitionIndex, Translation

SRC = ("orders", 0)


def _index(*runs: tuple[int, int, int, int, int]) -> PartitionIndex:
    """Runs as (from, first, count, target first, target last)."""
    idx = PartitionIndex()
    for i, (frm, first, count, t_first, t_last) in enumerate(runs):
        rec = OffsetMappingRecord("p", *SRC, frm, first, count, "dr.orders", 0, t_first, t_last, 0)
        idx.add(rec, (0, i))
    return idx


def _one(position: int | None, idx: PartitionIndex | None, resolve=None):
    committed = {SRC: position} if position is not None else {("orders", 1): 0}
    (row,) = [
        r
        for r in classify_groups(
            {"g": committed}, [SRC, ("orders", 1)], lambda tp: idx if tp == SRC else None, resolve
        )
        if (r.topic, r.partition) == SRC
    ]
    return row


def test_inside_a_contiguous_run_and_past_the_end_are_exact():
    idx = _index((0, 0, 10, 100, 109))
    assert (_one(3, idx).target, _one(3, idx).confidence) == (103, "exact")
    assert (_one(10, idx).target, _one(10, idx).confidence) == (110, "exact")
    assert _one(3, idx).target_topic == "dr.orders"


def test_another_writer_inside_a_run_is_a_lower_bound_with_its_reread_bound():
    idx = _index((0, 0, 10, 100, 112))  # three foreign records among ours
    row = _one(5, idx)
    assert (row.target, row.confidence, row.reread) == (105, "lower-bound", 3)


def test_a_hole_between_runs_bounds_the_reread_by_the_next_run():
    idx = _index((0, 0, 10, 100, 109), (20, 20, 5, 130, 134))  # mappings of 10..19 lost
    row = _one(15, idx)
    assert (row.target, row.confidence, row.reread) == (110, "lower-bound", 20)


def test_the_target_made_exact_by_reading_the_run_back():
    idx = _index((0, 0, 10, 100, 110))  # a commit marker inside the run

    def resolve(found: Translation, position: int) -> Translation:
        return Translation(found.target, 106, True, found.span)

    row = _one(5, idx, resolve)
    assert (row.target, row.confidence) == (106, "exact")


def test_before_the_oldest_mapping_and_without_a_position():
    idx = _index((50, 50, 10, 100, 109))
    assert _one(10, idx).confidence == "before-oldest-mapping"
    row = _one(None, idx)
    assert (row.source, row.target, row.confidence) == (None, None, "no-position")


def test_a_topic_the_group_never_read_gives_no_row():
    rows = classify_groups({"g": {("other", 0): 5}}, [SRC], lambda tp: None)
    assert rows == []
