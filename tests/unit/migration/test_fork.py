"""The fork point of a finished cut-over: its target end offsets, when and by whom."""

from __future__ import annotations

import dataclasses

from k2k.formats.cutover import STEPS, CutoverRecord
from k2k.migration.fork import ForkPoint


def _record(steps: tuple[str, ...]) -> CutoverRecord:
    return CutoverRecord(
        "dr-group",
        "dr",
        steps,
        {("orders", 0): 9, ("orders", 1): 0},
        {("eu.orders", 0): 12, ("eu.orders", 1): 3},
        (),
        (),
        1_700_000_000_000,
        1_700_000_009_000,
        "host-a",
    )


def test_a_finished_cutover_forks_at_its_target_ends():
    fork = ForkPoint.of_record(_record(STEPS))
    assert fork.offsets == {("eu.orders", 0): 12, ("eu.orders", 1): 3}
    assert (fork.at_ms, fork.by, fork.group, fork.host) == (
        1_700_000_009_000,
        "cutover",
        "dr-group",
        "host-a",
    )
    assert fork.topics() == {"eu.orders"}
    assert repr(fork) == "ForkPoint(cutover of dr-group at 1700000009000 on host-a: 2 partitions)"


def test_the_fork_is_a_copy_of_the_record_offsets():
    rec = _record(STEPS)
    fork = ForkPoint.of_record(rec)
    fork.offsets[("eu.orders", 0)] = 0
    assert rec.target_ends[("eu.orders", 0)] == 12


def test_a_finished_failover_forks_the_same_way():
    rec = _record(STEPS)
    fork = ForkPoint.of_record(dataclasses.replace(rec, mode="failover"))
    assert (fork.by, fork.offsets) == ("failover", rec.target_ends)
