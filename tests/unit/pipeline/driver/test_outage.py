"""The planner's outage rider: when it gives up (``errorHandling.maxOutage``, counted from
the first unanswered probe) and what it says. Lease failures for real:
tests/integration/test_outages.py."""

from __future__ import annotations

import logging
import threading

import pytest

from k2k.errors import Unavailable
from k2k.kafka.admin import ClusterView
from k2k.pipeline.driver.outage import OutageRider

FAILURE = Unavailable("target cluster unreachable at h:1 while reading progress")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def views() -> dict[str, ClusterView]:
    """Real views of clusters nobody asks here: the rider reads only their ``answering``."""
    return {
        c: ClusterView(c, {"bootstrap.servers": "127.0.0.1:1"}, 1.0) for c in ("source", "target")
    }


def test_the_wait_ends_when_both_clusters_answer_and_the_outage_is_announced_once(caplog):
    clock = Clock()
    rider = OutageRider(views(), None, threading.Event(), clock=clock)
    with caplog.at_level(logging.INFO, logger="k2k.planner"):
        rider.wait(FAILURE)  # both answer (as the watch last saw them): one backoff
        clock.now += 70
        rider.resumed()
        rider.resumed()
        rider.over()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("replication paused: target cluster unreachable at h:1")
    assert "as long as it takes, errorHandling.maxOutage" in lines[0]
    assert lines[1:] == ["replicating again after 70 s"]
    assert (rider.since, rider.outages) == (None, 1)


def test_max_outage_counts_from_the_first_unanswered_probe():
    clock = Clock()
    rider = OutageRider(views(), 20.0, threading.Event(), lambda: clock.now - 50, clock)
    with pytest.raises(Unavailable) as err:
        rider.wait(FAILURE)
    assert str(err.value).endswith("; gave up after 50 s (errorHandling.maxOutage 20 s)")


def test_max_outage_ends_a_wait_for_clusters_that_stay_away():
    clock = Clock()
    away = views()
    away["target"].answering = False
    stop = threading.Event()
    rider = OutageRider(away, 20.0, stop, clock=clock)
    timer = threading.Timer(1.5, lambda: setattr(clock, "now", clock.now + 21))
    timer.start()
    with pytest.raises(Unavailable, match=r"gave up after 21 s \(errorHandling.maxOutage 20 s\)"):
        rider.wait(FAILURE)
    timer.join()


def test_a_stop_request_ends_the_wait():
    away = views()
    away["source"].answering = False
    stop = threading.Event()
    stop.set()
    OutageRider(away, None, stop).wait(FAILURE)  # returns at once


def test_a_drained_pipeline_ends_the_wait_for_a_source_that_stays_away():
    """k2k failover drains the pipeline while its source is gone: the member stops."""
    away = views()
    away["source"].answering = False
    asked = []

    def ended() -> bool:
        asked.append(True)
        return len(asked) >= 2

    OutageRider(away, None, threading.Event(), ended=ended).wait(FAILURE)
    assert len(asked) == 2


def test_outlasted_names_the_outage_past_the_bound_and_the_run_ends_with_it():
    clock = Clock()
    since: dict[str, float | None] = {"at": None}
    stop = threading.Event()
    rider = OutageRider(views(), 20.0, stop, lambda: since["at"], clock, lambda: "target gone")
    assert rider.outlasted() is None  # every cluster answers
    since["at"] = clock.now - 20
    assert rider.outlasted() is None  # down for exactly the bound
    since["at"] = clock.now - 26
    gave_up = rider.outlasted()
    assert isinstance(gave_up, Unavailable)
    assert str(gave_up) == "target gone; gave up after 26 s (errorHandling.maxOutage 20 s)"
    since["at"] = None  # the cluster answers again: the decision stands
    with pytest.raises(Unavailable) as err:
        rider.wait(gave_up)
    assert err.value is gave_up
    since["at"] = clock.now - 26
    stop.set()
    assert rider.outlasted() is None  # a requested stop ends the run cleanly instead


def test_without_a_bound_no_outage_is_outlasted():
    clock = Clock()
    rider = OutageRider(views(), None, threading.Event(), lambda: clock.now - 3600, clock)
    assert rider.outlasted() is None


def test_no_paused_line_for_a_wait_past_the_bound(caplog):
    clock = Clock()
    rider = OutageRider(views(), 20.0, threading.Event(), lambda: clock.now - 50, clock)
    with caplog.at_level(logging.INFO, logger="k2k.planner"), pytest.raises(Unavailable):
        rider.wait(FAILURE)
    assert not [r for r in caplog.records if "replication paused" in r.getMessage()]


def test_a_stop_request_ends_the_wait_also_past_the_bound(caplog):
    clock = Clock()
    stop = threading.Event()
    stop.set()
    rider = OutageRider(views(), 20.0, stop, lambda: clock.now - 50, clock)
    with caplog.at_level(logging.INFO, logger="k2k.planner"):
        rider.wait(FAILURE)  # returns: the stop wins over the bound
    assert not caplog.records
