"""Start offsets given to a run (the reverse run's fork point): each partition at its fork
offset, new partitions and re-created topics from their start, retention losses reported."""

from __future__ import annotations

from k2k.pipeline.driver.positions import StartPositions, starts_at

T0, T1 = ("eu.orders", 0), ("eu.orders", 1)


def test_a_partition_starts_at_its_fork_offset():
    starts, lost = starts_at({T0: 40}, [T0], {T0: 0}, {T0: 55})
    assert (starts, lost) == ({T0: 40}, {})


def test_a_partition_at_its_end_starts_there():
    assert starts_at({T0: 55}, [T0], {T0: 0}, {T0: 55}) == ({T0: 55}, {})


def test_a_partition_added_since_the_fork_starts_at_its_earliest_offset():
    assert starts_at({T0: 40}, [T0, T1], {T0: 0, T1: 2}, {T0: 40, T1: 9}) == (
        {T0: 40, T1: 2},
        {},
    )


def test_a_partition_whose_end_is_below_its_fork_was_created_again():
    assert starts_at({T0: 40}, [T0], {T0: 0}, {T0: 7}) == ({T0: 0}, {})


def test_records_deleted_by_retention_since_the_fork_are_reported():
    assert starts_at({T0: 40}, [T0], {T0: 45}, {T0: 60}) == ({T0: 45}, {T0: (40, 45)})


def test_given_starts_never_override_committed_progress():
    positions = StartPositions()
    positions.load({T0: 50})
    starts, _ = starts_at({T0: 40, T1: 3}, positions.missing([T0, T1]), {T1: 0}, {T1: 9})
    positions.add_initial(starts)
    assert positions.starts == {T0: 50, T1: 3}
