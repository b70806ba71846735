"""The bench's CPU figures: the tree's CPU at a moment between samples, and the summary of CPU
seconds per million records over the whole run and inside the copy window."""

from __future__ import annotations

import pytest

from bench.harness import Monitor, Result, cpu_per_million


def _monitor(points: list[tuple[float, float]]) -> Monitor:
    monitor = Monitor([])
    monitor.timeline = points
    return monitor


def test_cpu_at_interpolates_between_samples_and_clamps_outside() -> None:
    monitor = _monitor([(10.0, 1.0), (10.1, 1.2), (10.2, 1.6)])
    assert monitor.cpu_at(10.15) == pytest.approx(1.4)
    assert monitor.cpu_at(10.1) == pytest.approx(1.2)
    assert monitor.cpu_at(9.0) == 1.0
    assert monitor.cpu_at(11.0) == 1.6
    assert _monitor([]).cpu_at(5.0) == 0.0


def _run(name: str, cpu: float, copy_cpu: float | None, complete: bool = True) -> Result:
    r = Result(name, "at-least-once", "W1-100B", 5_000_000, 100, seconds=5.0, cpu_s=cpu)
    r.copy_cpu_s, r.complete = copy_cpu, complete
    return r


def test_cpu_per_million_compares_medians_whole_and_in_the_window() -> None:
    results = [
        _run("k2k", 11.0, 6.0),
        _run("k2k", 12.0, 7.0),
        _run("k2k", 13.0, 8.0),
        _run("k2k", 99.0, 99.0, complete=False),  # an incomplete run counts for nothing
        _run("bare", 6.0, 5.0),
        _run("bare", 7.0, 5.5),
        _run("bare", 8.0, 6.0),
    ]
    assert cpu_per_million(results, "k2k", "bare") == [
        "CPU s per million records, k2k vs bare, W1-100B: whole run 2.40 vs 1.40 (1.7x); "
        "copy window 1.40 vs 1.10 (1.3x) (medians of 3 runs each)"
    ]


def test_cpu_per_million_needs_both_contenders() -> None:
    assert cpu_per_million([_run("k2k", 11.0, 6.0)], "k2k", "bare") == []
