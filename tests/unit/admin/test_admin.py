"""The pure parts of ``k2k status`` and ``k2k offsets``: the observer's liveness rule, lag
arithmetic, plans and flag parsing. Real brokers: tests/integration/test_admin_commands.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from k2k.admin.offsets import (
    Change,
    JoinedDuringWrite,
    OffsetInputError,
    OffsetPlan,
    _refuse_joined,
    check_selection,
    destination,
    parse_timestamp,
)
from k2k.admin.reader import AssignmentState, MemberState
from k2k.admin.status import GONE_AFTER_MS, Lag, PartitionStatus, PipelineStatus, _distance
from k2k.admin.table import table
from k2k.coordination.assignment import AssignmentView
from k2k.errors import ConfigError
from k2k.formats import (
    AssignmentRecord,
    CutoverRecord,
    MemberRecord,
    OwnerRecord,
    ProgressRecord,
    ReleaseRecord,
)

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


def status_of(lags: list[Lag], members: list[MemberState] = ()) -> PipelineStatus:
    parts = [PartitionStatus("t", p, True, None, None, lag) for p, lag in enumerate(lags)]
    return PipelineStatus("p", "g", False, GRACE_MS, 100 * GONE_AFTER_MS, list(members), parts)


def test_max_lag_is_unknown_when_a_partition_behind_has_no_known_lag():
    known = status_of([Lag(4, 0, 10, 6, 2.5), Lag(10, 0, 10, 0, 0.0)])
    assert known.totals()["maxLagSeconds"] == 2.5
    unknown = status_of([Lag(4, 0, 10, 6, 2.5), Lag(4, 0, 10, 6, None)])
    assert unknown.totals()["maxLagSeconds"] is None
    assert "max lag unknown" in unknown.render()
    assert status_of([]).totals()["maxLagSeconds"] == 0.0


def test_positions_the_source_cannot_serve_are_flagged():
    doc = status_of([Lag(3, 10, 20, 10, 1.0), Lag(30, 0, 5, 0, 0.0)])
    assert [p["problem"] for p in doc.to_json()["partitions"]] == ["below-earliest", "past-end"]
    assert doc.totals()["problems"] == 2
    text = doc.render()
    assert "! t[0]: committed position below the source's earliest offset" in text
    assert "(position 3, source 10..20)" in text
    assert "! t[1]: committed position past the source's end" in text


def test_status_says_which_partitions_keep_identical_offsets():
    lag = Lag(10, 0, 10, 0, 0.0)
    kept = ProgressRecord(GROUP, "t", 0, 10, "p", 1)
    mapped = ProgressRecord(GROUP, "t", 1, 10, "p", 1, mapped_from=6)
    parts = [
        PartitionStatus("t", 0, True, None, kept, lag, identical=True),
        PartitionStatus("t", 1, True, None, mapped, lag, identical=True),
        PartitionStatus("u", 0, True, None, kept, lag),
    ]
    doc = PipelineStatus("p", "g", False, GRACE_MS, 100 * GONE_AFTER_MS, [], parts)
    rows = doc.to_json()["partitions"]
    assert [(r["offsets"], r["mappedFrom"]) for r in rows] == [
        ("identical", None),
        ("mapped", 6),
        ("assigned", None),
    ]
    text = doc.render()
    assert "! t[1]: offsets not identical from source offset 6 on" in text
    assert "t[0]: offsets" not in text


def test_status_shows_the_cut_over_once_k2k_cutover_began():
    plain = status_of([])
    assert plain.to_json()["cutover"] is None
    assert "cut over" not in plain.render()
    rec = CutoverRecord(
        GROUP, "p", ("cut", "drain", "stop", "groups"), {("t", 0): 4}, {}, (), (),
        1_700_000_000_000, 1_700_000_060_000, "host-a",
    )  # fmt: skip
    parts = plain.partitions
    doc = PipelineStatus("p", "g", False, GRACE_MS, plain.observed_at_ms, [], parts, rec)
    assert doc.to_json()["cutover"] == {
        "steps": ["cut", "drain", "stop", "groups"],
        "startedAt": 1_700_000_000_000,
        "updatedAt": 1_700_000_060_000,
        "host": "host-a",
    }
    lines = doc.render().splitlines()
    assert lines[2] == (
        "cut over: cut, drain, stop, groups (started 2023-11-14T22:13:20.000Z by host-a)"
    )


def test_members_gone_for_more_than_a_day_are_counted_not_listed():
    now = 100 * GONE_AFTER_MS

    def member(name: str, state: str, age_ms: int) -> MemberState:
        return MemberState(
            MemberRecord(GROUP, name, "s", "alive", False, "h", 0), now - age_ms, state
        )

    doc = status_of(
        [],
        [
            member("old", "left", GONE_AFTER_MS + 1),
            member("dead", "dead", 60_000),
            member("a", "alive", 1_000),
        ],
    )
    assert [m["member"] for m in doc.to_json()["members"]] == ["dead", "a"]
    assert doc.to_json()["membersNotShown"] == 1
    assert "(1 members gone for more than a day not shown)" in doc.render()


def test_selection_flags_are_checked_alone():
    check_selection("t", 0, False)
    check_selection(None, None, True)
    with pytest.raises(OffsetInputError, match="give exactly one of --topic T or --all-topics"):
        check_selection("t", None, True)
    with pytest.raises(OffsetInputError, match="--partition 0: needs --topic"):
        check_selection(None, 0, True)


def test_a_member_that_came_alive_during_the_write_is_named():
    a = MemberRecord(GROUP, "a", "s1", "alive", False, "ha", 0)
    _refuse_joined("p", {"a": a}, {"a": a})
    with pytest.raises(JoinedDuringWrite, match="restart them") as err:
        _refuse_joined(
            "p", {"a": a}, {"a": a, "b": MemberRecord(GROUP, "b", "s", "alive", False, "hb", 0)}
        )
    assert "b on hb" in str(err.value) and "a on" not in str(err.value)
    # The same name in a new session: a restarted process that may have read old positions.
    with pytest.raises(JoinedDuringWrite, match="a on ha"):
        _refuse_joined(
            "p", {"a": a}, {"a": MemberRecord(GROUP, "a", "s2", "alive", False, "ha", 0)}
        )


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
        [sys.executable, "-m", "k2k", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and "--help" in result.stdout


def test_foreign_records_are_shown_per_partition_with_a_problem_line():
    progress = ProgressRecord("g", "t", 1, 10, "p", 0, foreign=3)
    parts = [
        PartitionStatus("t", 0, True, None, None, Lag(10, 0, 10, 0, 0.0)),
        PartitionStatus("t", 1, True, None, progress, Lag(10, 0, 10, 0, 0.0)),
    ]
    doc = PipelineStatus("p", "g", False, GRACE_MS, 100 * GONE_AFTER_MS, [], parts)
    assert [p["foreignRecords"] for p in doc.to_json()["partitions"]] == [0, 3]
    assert doc.totals()["foreignRecords"] == 3 and doc.totals()["problems"] == 0
    text = doc.render()
    assert "FOREIGN" in text and "3 !" in text
    assert "! t[1]: 3 records on its target partition were not written by this pipeline" in text
    assert "! t[0]" not in text
