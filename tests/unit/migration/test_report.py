"""The cut-over report as the operator reads it, and the exit decision."""

from __future__ import annotations

from k2k.formats import CutoverRecord
from k2k.formats.cutover import STEPS, GroupPosition, PartitionCount
from k2k.migration.report import CutoverReport, PartitionLeft

EXACT = GroupPosition("app", "orders", 0, 40, "dr.orders", 0, 48, "exact")
LOWER = GroupPosition("app", "orders", 1, 3, "dr.orders", 1, 9, "lower-bound", 2)
COUNT = PartitionCount("orders", 0, 0, 42, "dr.orders", 0, 8, 50, 40, 41)
RECORD = CutoverRecord(
    "g",
    "p",
    STEPS,
    {("orders", 0): 42},
    {("dr.orders", 0): 50},
    (EXACT, LOWER),
    (COUNT,),
    1_700_000_000_000,
    1_700_000_100_000,
    "host-a",
)


def test_the_table_names_each_class_and_the_differing_counts():
    text = CutoverReport.of_record(RECORD, already=True).render()
    assert text.startswith("pipeline p: already cut over at 2023-11-14T22:15:00.000Z (by host-a)")
    assert "lower bound (at most 2 re-read)" in text
    assert "DIFFERS" in text
    assert "positions: 1 exact, 1 lower-bound" in text
    assert "record counts differ on 1 partitions" in text


def test_exit_zero_needs_every_position_exact_unless_lower_bounds_are_allowed():
    report = CutoverReport.of_record(RECORD, already=False)
    assert report.inexact(False) == [LOWER]
    assert report.inexact(True) == []
    report.positions.append(GroupPosition("x", "orders", 2, 1, None, None, None, "no-position"))
    assert len(report.inexact(True)) == 1


def test_json_carries_the_record_and_the_dry_run_left_to_copy():
    doc = CutoverReport.of_record(RECORD, already=False).to_json()
    assert doc["cutover"]["steps"] == list(STEPS)
    assert doc["cutover"]["cut"] == [{"topic": "orders", "partition": 0, "offset": 42}]
    assert doc["positions"][1]["reread"] == 2
    assert doc["counts"][0]["targetRecords"] == 41
    dry = CutoverReport(
        "p", None, [EXACT], left=[PartitionLeft("orders", 0, 50, 40, 9)], dry_run=True
    )
    doc = dry.to_json()
    assert doc["dryRun"] is True and "cutover" not in doc
    assert doc["partitions"] == [
        {"topic": "orders", "partition": 0, "end": 50, "committed": 40, "toCopy": 9}
    ]
    assert "nothing written" in dry.render()


def test_a_failover_reports_its_recovery_point():
    from k2k.formats.cutover import RecoveryPoint

    started = 1_700_000_100_000
    rec = CutoverRecord(
        "g",
        "p",
        STEPS,
        {("orders", 0): 40, ("orders", 1): 9},
        {},
        (EXACT,),
        (),
        started,
        started,
        "host-a",
        "failover",
        (
            RecoveryPoint("orders", 0, 40, 45, started - 2_500),
            RecoveryPoint("orders", 1, 9, 9, started - 60_000),  # caught up: nothing lost
        ),
    )
    report = CutoverReport.of_record(rec, already=False)
    report.notes = ["group 'x': not moved: it has active members on the target"]
    text = report.render()
    assert text.startswith("pipeline p: failed over at ")
    assert "group 'x': not moved" in text
    assert "recovery point: 5 source offsets known not replicated; partitions behind " in text
    assert "up to 2.5 s before the failover" in text
    doc = report.to_json()
    assert doc["recovery"]["total"] == {"notReplicated": 5, "seconds": 2.5}
    assert doc["recovery"]["partitions"][0]["lastSeenEnd"] == 45
    assert doc["notes"] == report.notes
