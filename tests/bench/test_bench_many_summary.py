"""The W3 and long W2 report: the second table and the summary lines of medians."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest

import bench.harness
import bench.long_w2
import bench.w3
from bench.harness import Result, k2k_leases, tail_ratios, tails_table


@pytest.mark.parametrize("module", [bench.harness, bench.long_w2, bench.w3])
def test_docstring_examples(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def _r(name: str, workload: str, **figures: float) -> Result:
    r = Result(name, "-", workload, 400_000, 100, **figures)
    r.complete = True
    return r


def test_w3_summary_compares_medians_with_the_bare_loop_and_mirrormaker() -> None:
    k2k, bare, mm2 = "k2k at-least-once", "bare librdkafka loop", "MirrorMaker 2 at-least-once"
    w = "W3-catch-up-1000x8"
    results = [
        _r(k2k, w, seconds=4.0, first_s=9.0, all_s=13.0),
        _r(k2k, w, seconds=5.0, first_s=10.0, all_s=15.0),
        _r(k2k, w, seconds=6.0, first_s=11.0, all_s=17.0),
        _r(bare, w, seconds=4.0, first_s=2.0, all_s=6.0),
        _r(mm2, w, seconds=10.0, first_s=20.0, all_s=30.0),
        _r(k2k, "W3-steady-1000x8-1,000/s", p50_ms=30, p99_ms=90, max_ms=200),
        _r(bare, "W3-steady-1000x8-1,000/s", p50_ms=20, p99_ms=60, max_ms=100),
    ]
    incomplete = _r(bare, w, seconds=1.0, first_s=1.0, all_s=2.0)
    incomplete.complete = False  # counts for nothing
    lines = tail_ratios([*results, incomplete])
    assert lines == [
        "W3-catch-up-1000x8, k2k at-least-once vs bare librdkafka loop: throughput 80,000 vs "
        "100,000 records/s (80%); first record 10.0 vs 2.0 s; all copied 15.0 vs 6.0 s",
        "W3-catch-up-1000x8, k2k at-least-once vs MirrorMaker 2 at-least-once: throughput "
        "80,000 vs 40,000 records/s (200%); first record 10.0 vs 20.0 s; all copied 15.0 vs "
        "30.0 s",
        "W3-steady-1000x8-1,000/s, k2k at-least-once vs bare librdkafka loop: p50 30 vs 20 ms "
        "(150%); p99 90 vs 60 ms (150%); max 200 vs 100 ms (200%)",
    ]
    table = tails_table(results).splitlines()
    assert len(table) == 2 + len(results)
    assert (
        "| k2k at-least-once | - | W3-catch-up-1000x8 | 400,000 | 9.0 | 13.0 | 100,000 |"
        in table[2]
    )


def test_long_w2_summary_has_the_tail_percentiles() -> None:
    w = "W2-long-5k/s-17min"
    results = [
        _r("k2k at-least-once", w, p50_ms=25, p99_ms=44, p999_ms=120, max_ms=898),
        _r("MirrorMaker 2 at-least-once", w, p50_ms=30, p99_ms=80, p999_ms=240, max_ms=700),
    ]
    assert tail_ratios(results) == [
        f"{w}, k2k at-least-once vs MirrorMaker 2 at-least-once: p50 25 vs 30 ms (83%); "
        "p99 44 vs 80 ms (55%); p99.9 120 vs 240 ms (50%); max 898 vs 700 ms (128%)"
    ]
    assert tail_ratios([]) == [] and tails_table([]) == ""


def test_the_lease_count_comes_from_k2ks_last_summary_line(tmp_path: Path) -> None:
    log = tmp_path / "k2k.log"
    log.write_text(
        "2026-11-27 23:17:00,010 INFO k2k.planner: lease 1: 2 groups over 8 partitions\n"
        "bench-dcea485c: replicated 416,472 records (44.9 MB of keys and values) in 156.0 s "
        "over 5 lease(s); remaining lag 0 records\n"
    )
    assert k2k_leases(log) == 5
    assert k2k_leases(tmp_path / "mm2.log") is None
