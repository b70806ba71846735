"""The alignment of ``k2k verify`` (pure): each kind of difference at its place, replays as
duplicates, and the invariants of :mod:`k2k.verify.align` after every case."""

from __future__ import annotations

import pytest

from k2k.stages.headers import TracingHeaders
from k2k.verify.align import Fingerprint, LaneResult, align, fingerprint
from k2k.verify.task import PartitionTask


def rec(offset: int, value: bytes, *, ts: int = 0, source_offset: int | None = None) -> Fingerprint:
    return fingerprint(0, offset, source_offset, b"k", value, [("h", b"1")], ts)


SOURCE = [rec(i, b"v%d" % i) for i in range(20)]


def target(values: list[bytes]) -> list[Fingerprint]:
    return [rec(o, v) for o, v in enumerate(values)]


V = [b"v%d" % i for i in range(20)]


#: A task as the driver ships it (partition 1 of "orders", tracing headers, mapping runs).
PICKLED = PartitionTask(
    topic="orders",
    partition=1,
    start=0,
    until=10,
    end=12,
    partial=False,
    target_topic="dr.orders",
    target_ranges={1: (0, 12)},
    hash_partitions=0,
    claims_unattributed=(1,),
    tracing=TracingHeaders("k2k_topic", "k2k_partition", "k2k_offset", None, "dr"),
    mapped_runs={1: ((0, 5, 0), (5, 3, None))},
    keep_headers=True,
    keep_timestamp=True,
    source_consumer={"bootstrap.servers": "s:9092", "sasl.password": "secret"},
    target_consumer={"bootstrap.servers": "t:9092"},
)


def assert_invariants(r: LaneResult, compared: int, actual: int) -> None:
    """Every actual record counted once; every compared expected record counted once."""
    in_diffs_actual = sum(len(d.target_offsets) for d in r.differences)
    in_diffs_expected = sum(len(d.source_offsets) for d in r.differences)
    assert r.matched + r.duplicates + r.ahead + in_diffs_actual == actual, r
    if not r.gave_up:
        assert r.matched + in_diffs_expected == compared, r
    assert (r.source_digest == r.target_digest) == (not r.differences), r


CASES = {
    "equal": (V, []),
    "missing": (V[:7] + V[8:], [("missing", (7,), ())]),
    "changed": ([*V[:7], b"X", *V[8:]], [("changed", (7,), (7,))]),
    "extra inside": ([*V[:7], b"X", *V[7:]], [("extra", (), (7,))]),
    "extra at the end": ([*V, b"X"], [("extra", (), (20,))]),
    "reordered pair": ([*V[:7], V[8], V[7], *V[9:]], [("reordered", (7, 8), (7, 8))]),
    "missing at the end": (V[:19], [("missing", (19,), ())]),
    "changed at the end": ([*V[:19], b"X"], [("changed", (19,), (19,))]),
    "two places": (
        V[:3] + V[4:10] + [b"X"] + V[11:],
        [("missing", (3,), ()), ("changed", (10,), (9,))],
    ),
    "empty target": ([], [("missing", tuple(range(20)), ())]),
}


@pytest.mark.parametrize("case", CASES)
def test_each_difference_is_named_at_its_place(case):
    values, expected = CASES[case]
    r = align(SOURCE, target(values), 20)
    assert [(d.kind, d.source_offsets, d.target_offsets) for d in r.differences] == expected
    assert_invariants(r, 20, len(values))


@pytest.mark.parametrize(
    "values, duplicates",
    [
        (V[:12] + V[8:], 4),  # one replay from the last commit
        (V[:12] + V[8:10] + V[5:], 9),  # a replay cut short by a second failure
        (V + V[15:], 5),  # a replay at the very end
    ],
)
def test_at_least_once_replays_are_duplicates_not_differences(values, duplicates):
    r = align(SOURCE, target(values), 20)
    assert (r.differences, r.duplicates, r.matched) == ([], duplicates, 20)
    assert_invariants(r, 20, len(values))


def test_records_after_the_committed_range_are_ahead_not_compared():
    r = align(SOURCE, target(V[:15]), 12)
    assert (r.differences, r.matched, r.ahead) == ([], 12, 3)
    assert_invariants(r, 12, 15)


def test_a_changed_timestamp_and_a_wrong_source_offset_are_differences():
    dst = [rec(i, b"v%d" % i, source_offset=i) for i in range(20)]
    dst[4] = rec(4, b"v4", ts=99, source_offset=4)
    dst[9] = rec(9, b"v9", source_offset=8)
    src = [rec(i, b"v%d" % i, source_offset=i) for i in range(20)]
    r = align(src, dst, 20, by_offset=True)
    assert [(d.kind, d.source_offsets, d.target_offsets, d.fields) for d in r.differences] == [
        ("changed", (4,), (4,), ("timestamp",)),
        ("changed", (9,), (9,), ("offset",)),
    ]
    assert_invariants(r, 20, 20)


def test_payload_previews_are_truncated():
    long = b"s" * 100
    src = [fingerprint(0, 0, 0, b"key", long, [], 0)]
    r = align(src, [], 1)
    (d,) = r.differences
    assert d.source_preview == {"key": "key", "value": "s" * 24 + "..."}


def test_what_travels_to_and_from_a_verify_task_pickles():
    """The driver ships a PartitionTask to each Spark task and gets a PartitionResult back."""
    import pickle

    from k2k.verify.task import PartitionResult

    task = PICKLED
    r = align(SOURCE, target(V[:19]), 20)
    result = PartitionResult(
        "orders", 1, "dr.orders", 0, 10, 12, 20, 19, r.matched, 0, 0, 0,
        len(r.differences), tuple(r.differences), "a", "b", {1: (19, 19)},
    )  # fmt: skip
    assert pickle.loads(pickle.dumps(task)) == task
    assert pickle.loads(pickle.dumps(result)) == result
    assert "secret" not in repr(task)
