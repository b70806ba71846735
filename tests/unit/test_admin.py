"""The pure parts of ``k2k status`` and ``k2k offsets``: the observer's liveness rule, lag
arithmetic, plans and flag parsing. Real brokers: tests/integration/test_admin_commands.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from k2k.admin.offsets import Change, OffsetInputError, OffsetPlan, destination, parse_timestamp
from k2k.admin.reader import AssignmentState
from k2k.admin.status import _distance
from k2k.admin.table import table
from k2k.coordination.assignment import AssignmentView
from k2k.errors import ConfigError
from k2k.formats import AssignmentRecord, MemberRecord, OwnerRecord, ReleaseRecord

GROUP = "g"
GRACE_MS = 10_000


def observed(*records: tuple[AssignmentRecord, int]) -> AssignmentState:
    """What an observer (no member name of its own) reads from ``records``."""
    view = AssignmentView(GROUP, "", "", GRACE_MS)
    newest = 0
    for rec, ts in records:
        view.apply(rec, ts)
        newest = max(newest, ts)
    return AssignmentState(view, newest)


def beat(member: str, at: int, state: str = "alive") -> tuple[MemberRecord, int]:
    return MemberRecord(GROUP, member, "s", state, False, f"{member}.host", at), at


def test_observer_judges_liveness_by_the_members_rule_on_its_own_clock():
    state = observed(beat("a", 100_000), beat("b", 95_000), beat("c", 99_000, "left"))
    now = state.observer_now(101_000)
    assert [(m.record.member, m.state) for m in state.members(now)] == [
        ("a", "alive"),
        ("b", "alive"),
        ("c", "left"),
    ]
    # Later on the observer's clock b's heartbeat is older than graceWindow: dead.
    later = state.observer_now(105_001)
    assert {m.record.member: m.state for m in state.members(later)}["b"] == "dead"
    assert set(state.alive(later)) == {"a"}
    assert state.alive(now, exclude="a").keys() == {"b"}


def test_observer_clock_never_runs_behind_the_topic():
    # An observer whose clock is behind the brokers' uses the newest timestamp it read, so
    # a member the members themselves count alive is alive for it too.
    state = observed(beat("a", 200_000), beat("b", 191_000))
    assert state.observer_now(150_000) == 200_000
    assert set(state.alive(state.observer_now(150_000))) == {"a", "b"}
    # With every member gone, the newest timestamp alone would keep the last one alive.
    assert state.alive(state.observer_now(400_000)) == {}


def test_newest_claim_and_whether_it_was_released():
    claim = OwnerRecord(GROUP, "t", 0, "a", "s", "", "s/1", 1)
    state = observed((claim, 1))
    assert state.owner(("t", 0)) == (claim, False)
    assert state.owner(("t", 1)) is None
    released = observed((claim, 1), (ReleaseRecord(GROUP, "t", 0, "s/1", 2), 2))
    assert released.owner(("t", 0)) == (claim, True)


def test_lag_distance():
    firsts = {("t", 0): 1_000, ("t", 1): None}
    assert _distance(10, 10, firsts, ("t", 0), 5_000) == (0, 0.0)
    assert _distance(4, 10, firsts, ("t", 0), 5_000) == (6, 4.0)
    # Only markers or aborted records left: nothing to replicate.
    assert _distance(4, 10, firsts, ("t", 1), 5_000) == (0, 0.0)
    # The first record was not read in time: records known, seconds unknown.
    assert _distance(4, 10, firsts, ("t", 2), 5_000) == (6, None)
    # A record stamped in the future is not negative lag.
    assert _distance(4, 10, {("t", 0): 9_000}, ("t", 0), 5_000) == (6, 0.0)


def test_plan_lists_every_change_and_writes_only_moves():
    plan = OffsetPlan(
        "p",
        "g",
        [Change("t", 0, 20, 5), Change("t", 1, None, 0), Change("t", 2, 7, 7)],
    )
    assert plan.render().splitlines() == [
        "pipeline p (commit group g): committed positions, before -> after",
        "  t[0]: 20 -> 5",
        "  t[1]: none -> 0",
        "  t[2]: 7 (unchanged)",
    ]
    assert [c.partition for c in plan.moving()] == [0, 1]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((5, None, False, False), ("offset", 5, "--offset")),
        ((None, "1700000000000", False, False), ("timestamp", 1700000000000, "--to-timestamp")),
        ((None, "2023-11-14T22:13:20Z", False, False), ("timestamp", 1700000000000, "--to-timestamp")),
        ((None, "2023-11-14T23:13:20+01:00", False, False), ("timestamp", 1700000000000, "--to-timestamp")),
        ((None, "2023-11-14T22:13:20", False, False), ("timestamp", 1700000000000, "--to-timestamp")),
        ((None, None, True, False), ("earliest", 0, "")),
        ((None, None, False, True), ("latest", 0, "")),
    ],
)  # fmt: skip
def test_destination_from_flags(flags, expected):
    to = destination(*flags)
    assert (to.kind, to.value, to.flag) == expected


@pytest.mark.parametrize(
    "flags",
    [(None, None, False, False), (1, None, True, False), (None, "x", False, True)],
)
def test_exactly_one_destination(flags):
    with pytest.raises(OffsetInputError, match="give exactly one of --offset O"):
        destination(*flags)


def test_unreadable_timestamp_is_bad_input():
    with pytest.raises(ConfigError, match=r"--to-timestamp 'yesterday': expected milliseconds"):
        parse_timestamp("yesterday")


@pytest.mark.parametrize(
    ("text", "why"), [("1969-12-31T23:59:59Z", "before 1970"), (str(2**63), "too large")]
)
def test_timestamps_kafka_cannot_look_up_are_bad_input(text, why):
    """Negative times are Kafka's LATEST/EARLIEST markers; past 2**63 the lookup overflows."""
    with pytest.raises(ConfigError, match=f"--to-timestamp '{text}': {why}; expected"):
        parse_timestamp(text)


def test_table_aligns_columns_and_says_none():
    assert table(["A", "B"], []) == ["A  B", "(none)"]
    assert table(["TOPIC", "P"], [["orders", "10"], ["x", "2"]]) == [
        "TOPIC   P",
        "orders  10",
        "x       2",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--help"],
        ["offsets", "--help"],
        ["offsets", "describe", "--help"],
        ["offsets", "set", "--help"],
        ["offsets", "reset", "--help"],
    ],
)
def test_admin_commands_have_help(argv):
    result = subprocess.run(
        [sys.executable, "-m", "k2k.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and "--help" in result.stdout
