"""The latency probe's figures: the tail percentiles and the largest latency per 10 s."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

import bench.latency
from bench.latency import figures


@pytest.mark.parametrize("module", [bench.latency])
def test_docstring_examples(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def test_latency_figures_have_the_tail_and_per_10_s_maxima() -> None:
    lat = [float(i) for i in range(1, 1001)]  # 1..1000 ms
    by_second = {1000 + i // 10: [lat[i]] for i in range(300)} | {1040: [999.0]}
    f = figures(lat, by_second)
    assert (f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"]) == (501.0, 990.0, 999.0, 1000.0)
    assert f["per_10s_max_ms"] == [100, 200, 300, None, 999]
