"""What a copy must leave on the target, compared with the source partition by partition:
at-least-once (everything, in order, duplicates only as replays) and exact."""

from __future__ import annotations

from tests.helpers.kafka import Rec

__all__ = ["assert_at_least_once", "assert_same_records"]


def assert_at_least_once(src: dict[int, list[Rec]], dst: dict[int, list[Rec]]) -> int:
    """Every source record is on the target with its key, value, headers and timestamp, in
    source order per partition (a replay restarts an earlier run, never skips or reorders);
    returns the number of duplicates. The target records name their source offset in the
    ``k2k_offset`` header; source offsets may have gaps (transaction markers, aborted
    records)."""
    assert sorted(dst) == sorted(src)
    duplicates = 0
    for p in sorted(src):
        index = {r.offset: i for i, r in enumerate(src[p])}
        offsets = [int(dict(r.headers)["k2k_offset"]) for r in dst[p]]
        assert set(offsets) == set(index), (
            f"partition {p}: lost {sorted(set(index) - set(offsets))[:20]}"
        )
        positions = [index[o] for o in offsets]
        assert all(
            cur <= prev + 1 for prev, cur in zip([-1, *positions], positions, strict=False)
        ), p
        for r, o in zip(dst[p], offsets, strict=True):
            s = src[p][index[o]]
            assert (r.key, r.value, r.timestamp) == (s.key, s.value, s.timestamp), (p, o)
            assert [h for h in r.headers if not h[0].startswith("k2k_")] == s.headers, (p, o)
        duplicates += len(offsets) - len(set(offsets))
    return duplicates


def assert_same_records(src: dict[int, list[Rec]], dst: dict[int, list[Rec]]) -> int:
    """The target equals the source partition by partition, record for record (key, value,
    headers, timestamp, in order); returns the number compared."""
    assert sorted(dst) == sorted(src), f"partitions differ: {sorted(src)} vs {sorted(dst)}"
    for p, records in sorted(src.items()):
        want, got = [r.content() for r in records], [r.content() for r in dst[p]]
        if got != want:
            repeated = len(got) - len({r[1] for r in got})
            first = next(
                (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                min(len(want), len(got)),
            )
            raise AssertionError(
                f"partition {p}: source {len(want)} records, target {len(got)} ({repeated} "
                f"repeated values); first difference at position {first}"
            )
    return sum(len(records) for records in src.values())
