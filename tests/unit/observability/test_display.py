"""The live panel and the progress line: --until-caught-up shows what is done and the time left."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from k2k.observability.display import LiveDisplay, LogDisplay
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver.planning import PlanningState

TP0, TP1 = ("t", 0), ("t", 1)


def _stats(committed: dict[tuple[str, int], int]) -> PipelineStats:
    planning = PlanningState(committed=dict(committed), ends={TP0: 600, TP1: 400})
    return PipelineStats(planning=planning, leases=1, topics=1)


def test_live_panel_appears_at_the_first_tick_with_progress() -> None:
    out = io.StringIO()
    display = LiveDisplay("p", Console(file=out, force_terminal=True, width=120))
    assert out.getvalue() == ""  # start-up steps are log lines until the first lease
    display(_stats({TP0: 0, TP1: 0}))
    display(_stats({TP0: 300, TP1: 200}))
    display.close()
    text = out.getvalue()
    assert "until caught up" in text
    assert "50.0 % of 1,000 records" in text


def test_progress_line_without_a_terminal_says_done_and_time_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "k2k")
    display = LogDisplay("p", interval_s=0.0)
    display(_stats({TP0: 0, TP1: 0}))  # the lag at the first tick is the whole job
    display(_stats({TP0: 300, TP1: 200}))
    first, second = (r.getMessage() for r in caplog.records if r.name == "k2k")
    assert first.endswith(
        "until caught up: 0.0 % of 1,000 records, time left unknown (no recent progress)"
    )
    assert "until caught up: 50.0 % of 1,000 records, about " in second
    assert second.endswith(" s left")


def test_no_progress_figures_without_until_caught_up(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "k2k")
    display = LogDisplay("p", interval_s=0.0)
    display(PipelineStats(planning=PlanningState(committed={TP0: 5}, latest={TP0: 8})))
    assert [r.getMessage() for r in caplog.records if r.name == "k2k"] == [
        "p: 0 records/s, lag 3 records over 1 partitions (lease 0)"
    ]
