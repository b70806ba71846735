"""The bench's summary against MirrorMaker 2: one line per W1 workload, of medians."""

from __future__ import annotations

from bench.harness import Result, ratios
from bench.k2k_bench import K2KAtLeastOnce, K2KExactlyOnce
from bench.mm2 import MirrorMaker2AtLeastOnce

_SIZES = {"W1-100B": 100, "W1-1KB": 1024}


def _run(name: str, workload: str, rate: float, complete: bool = True) -> Result:
    r = Result(name, "-", workload, 1_000_000, _SIZES[workload], seconds=1_000_000 / rate)
    r.complete = complete
    return r


def _mm2_lines(results: list[Result]) -> list[str]:
    return [line for line in ratios(results) if line.startswith("ratio vs MirrorMaker 2")]


def test_each_w1_workload_gets_its_own_ratio_of_medians() -> None:
    k2k, mm2 = K2KAtLeastOnce.name, MirrorMaker2AtLeastOnce.name
    results = [
        *(_run(k2k, "W1-100B", r) for r in (900_000.0, 1_000_000.0, 1_100_000.0)),
        *(_run(mm2, "W1-100B", r) for r in (240_000.0, 250_000.0, 260_000.0)),
        *(_run(k2k, "W1-1KB", r) for r in (300_000.0, 330_000.0, 360_000.0)),
        *(_run(mm2, "W1-1KB", r) for r in (100_000.0, 110_000.0, 120_000.0)),
        _run(k2k, "W1-1KB", 10.0, complete=False),  # an incomplete run counts for nothing
    ]
    assert _mm2_lines(results) == [
        "ratio vs MirrorMaker 2, W1-100B: at-least-once 4.00",
        "ratio vs MirrorMaker 2, W1-1KB: at-least-once 3.00",
    ]


def test_a_workload_without_mirrormaker_2_has_no_ratio() -> None:
    k2k, eos = K2KAtLeastOnce.name, K2KExactlyOnce.name
    results = [_run(k2k, "W1-1KB", 300_000.0), _run(eos, "W1-1KB", 280_000.0)]
    assert _mm2_lines(results) == []
