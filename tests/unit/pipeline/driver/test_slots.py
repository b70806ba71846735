"""A continuous lease's slots: where new partitions go, what a drop waits for, and the
assignments the runners fetch over a real lease channel."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterable

import pytest

from k2k.formats import ProgressRecord
from k2k.kafka import TP
from k2k.pipeline.channel import LeaseControl, StopSignal
from k2k.pipeline.driver.slots import LiveSlots, TopicCatalog
from k2k.pipeline.plan import (
    PartitionOutcome,
    PartitionRange,
    ProgressSnapshot,
    RunnerGroup,
    SlotAssignment,
)

NONE = TopicCatalog({}, {}, {"a": 3})


def _range(topic: str, p: int) -> PartitionRange:
    return PartitionRange(topic, p, 0, None, True)


@pytest.fixture
def control():
    c = LeaseControl("127.0.0.1")
    c.new_lease()
    yield c
    c.close()


def _slots(control: LeaseControl) -> LiveSlots:
    return LiveSlots(
        [
            RunnerGroup(
                0, (_range("a", 0), _range("a", 1)), "tx-0", (("a", 0, "c0"), ("a", 1, "c1"))
            ),
            RunnerGroup(1, (_range("a", 2),), "tx-1", (("a", 2, "c2"),)),
            RunnerGroup(2, (), "tx-2", ()),
        ],
        control,
        NONE,
        _driver_view,
    )


def _driver_view(tps: Iterable[TP]) -> ProgressSnapshot:
    """What the driver's commit-topic tail knows, read to offset 40: progress of ``b`` only."""
    known = {("b", 0): ProgressRecord("g", "b", 0, 9, "p", 1)}
    return ProgressSnapshot({0: 40}, {tp: known.get(tp) for tp in tps})


def test_new_partitions_go_to_the_slots_holding_the_fewest(control):
    slots = _slots(control)
    placed = slots.place([_range("b", p) for p in range(4)])
    # Loads 2, 1, 0: ties go to the lower slot.
    assert {g.index: [r.partition for r in g.ranges] for g in placed} == {0: [3], 1: [1], 2: [0, 2]}
    claimed = [
        RunnerGroup(g.index, g.ranges, None, tuple((r.topic, r.partition, "n") for r in g.ranges))
        for g in placed
    ]
    slots.add(claimed, NONE)
    assert slots.held() == {("a", 0), ("a", 1), ("a", 2)} | {("b", p) for p in range(4)}
    assert sorted(len(g.ranges) for g in slots.groups()) == [2, 2, 3]


def test_a_drop_is_released_only_once_its_slot_acknowledged_it(control):
    slots = _slots(control)
    signal = StopSignal(control.address, slot=0)
    try:
        slots.drop({("a", 1)}, NONE)
        assert ("a", 1) in slots.held()  # leaving, not yet acknowledged
        assert slots.claims() == {("a", 0): "c0", ("a", 2): "c2"}
        deadline = time.monotonic() + 5
        while not signal.wants_attention():
            assert time.monotonic() < deadline, "the runner never saw the new assignment"
            time.sleep(0.02)
        assignment = signal.take_assignment()
        assert assignment is not None and assignment.version == 1
        assert [(r.topic, r.partition) for r in assignment.ranges] == [("a", 0)]
        outcome = PartitionOutcome("a", 1, 0, 42, progress_written=True)
        threading.Timer(0.3, signal.applied, (1, [outcome])).start()
        dropped = slots.wait_dropped(5, lambda: False)
    finally:
        signal.close()
    assert dropped is not None
    released, outcomes = dropped
    assert released == {("a", 1): "c1"}
    assert outcomes == [outcome]
    assert ("a", 1) not in slots.held()


def test_a_slot_that_does_not_acknowledge_ends_the_lease(control):
    slots = _slots(control)
    slots.drop({("a", 2)}, NONE)
    started = time.monotonic()
    assert slots.wait_dropped(0.3, lambda: False) is None
    assert time.monotonic() - started < 2
    # Still held: released with the lease's end, by the runner's summary.
    assert any(("a", 2, "c2") in g.claims for g in slots.groups())


def test_a_grown_target_topic_is_sent_to_the_slots_writing_it(control):
    from k2k.stages.partitioning import partition_rule
    from k2k.stages.topicplan import TopicPlan

    slots = _slots(control)
    plan = TopicPlan("a", "a", partition_rule("hash"), True, True, None)
    grown = TopicCatalog({"a": plan}, {}, {"a": 5})
    slots.grown(grown)
    sent = {i: control._wanted.get(i) for i in range(3)}
    assert sent[2] is None  # holds nothing of a: nothing to tell
    for i in (0, 1):
        version, data = sent[i]
        assert version == 1
        assert pickle.loads(data).grown == {"a": 5}
    slots.grown(grown)  # told once
    assert control._wanted[0][0] == 1


def test_partitions_taken_on_carry_the_drivers_view_until_applied(control):
    """A runner applies the newest assignment it fetched, so the driver's view of a new
    partition's progress travels with every assignment until the runner applied one
    holding it."""
    slots = _slots(control)
    new = (_range("b", 0), _range("b", 1))
    slots.add([RunnerGroup(2, new, None, (("b", 0, "n0"), ("b", 1, "n1")))], NONE)
    assert _sent(control, 2).progress == ProgressSnapshot(
        {0: 40}, {("b", 0): ProgressRecord("g", "b", 0, 9, "p", 1), ("b", 1): None}
    )
    slots.drop({("b", 1)}, NONE)  # version 2, before the runner applied version 1
    assert _sent(control, 2).progress == ProgressSnapshot(
        {0: 40}, {("b", 0): ProgressRecord("g", "b", 0, 9, "p", 1)}
    )
    control._applied[2] = 2  # the runner applied version 2 (as its acknowledgement says)
    slots.drop({("b", 0)}, NONE)
    assert _sent(control, 2).progress is None  # nothing left to take on


def _sent(control: LeaseControl, slot: int) -> SlotAssignment:
    assignment: SlotAssignment = pickle.loads(control._wanted[slot][1])
    return assignment
