"""The cut-over record's bytes, its steps and its report rows."""

from __future__ import annotations

import pytest

from k2k.errors import ControlRecordError
from k2k.formats import CutoverRecord, decode_assignment
from k2k.formats.cutover import STEPS, GroupPosition, PartitionCount

REC = CutoverRecord(
    "g",
    "p",
    ("cut",),
    {("orders", 0): 42, ("orders", 1): 7},
    {},
    (),
    (),
    1_700_000_000_000,
    1_700_000_000_000,
    "host-a",
)


def test_a_full_record_round_trips_through_the_assignment_decoder():
    done = REC.with_step("drain", 1).with_step("stop", 2, target_ends={("dr.orders", 0): 50})
    done = done.with_step(
        "groups",
        3,
        positions=(
            GroupPosition("app", "orders", 0, 40, "dr.orders", 0, 48, "exact"),
            GroupPosition("app", "orders", 1, None, None, None, None, "no-position"),
            GroupPosition("app2", "orders", 0, 3, "dr.orders", 0, 9, "lower-bound", 2),
        ),
        counts=(PartitionCount("orders", 0, 0, 42, "dr.orders", 0, 8, 50, 40, 40),),
    )
    assert done.steps == STEPS and done.done and done.drained
    assert decode_assignment(*done.encode(), "t[0]@1") == ("g", done)


def test_steps_keep_their_order_whatever_order_they_are_added_in():
    assert REC.with_step("stop", 1).with_step("drain", 2).steps == ("cut", "drain", "stop")


def test_an_unknown_step_is_refused_with_the_locator():
    key, value = REC.encode()
    bad = value.replace(b'"steps":["cut"]', b'"steps":["cut","teleport"]')
    with pytest.raises(ControlRecordError, match=r"t\[0\]@3: malformed"):
        CutoverRecord.decode(key, bad, "t[0]@3")


def test_a_newer_value_version_says_upgrade():
    key, value = REC.encode()
    with pytest.raises(ControlRecordError, match="unknown cutover value version 2"):
        CutoverRecord.decode(key, value.replace(b'"v":1', b'"v":2'), "t[0]@4")
