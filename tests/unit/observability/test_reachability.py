"""The outage lines: one when a cluster becomes unreachable, one every 30 s, one when back.

Pure logic on an injected clock (k2k.observability.reachability); the last test probes a
real client against a port nobody listens on.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

import pytest

from k2k.kafka.admin import ClusterView
from k2k.local import free_port
from k2k.observability.reachability import ClusterWatch, Reachability
from tests.helpers.kafka import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reach(clock: Clock) -> Reachability:
    return Reachability(clock=clock, remind_every_s=30.0)


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "k2k.reachability"]


def test_one_line_when_unreachable_one_every_30_s_one_when_back(
    reach: Reachability, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "k2k.reachability")
    reach.failed("target", "h:9092", "Connection refused", since=clock.now - 15)
    for _ in range(29):  # failures keep arriving; reminders only every 30 s
        clock.now += 1
        reach.failed("target", "h:9092", "Connection refused", since=clock.now)
        reach.remind()
    assert _lines(caplog) == [
        (logging.WARNING, "target cluster unreachable at h:9092: Connection refused")
    ]
    clock.now += 1
    reach.failed("target", "h:9092", "timed out", since=clock.now)  # the newest cause is quoted
    reach.remind()
    reach.remind()
    clock.now += 12
    reach.answered("target")
    reach.answered("target")  # already back: nothing more
    assert _lines(caplog)[1:] == [
        (logging.WARNING, "target cluster still unreachable at h:9092 after 45 s: timed out"),
        (logging.INFO, "target cluster reachable again at h:9092 after 57 s"),
    ]
    assert not reach.unreachable("target")


def test_reminders_every_30_s_for_each_cluster_on_its_own(
    reach: Reachability, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "k2k.reachability")
    reach.failed("source", "s:1", "refused", since=clock.now)
    clock.now += 10
    reach.failed("target", "t:1", "refused", since=clock.now)
    for _ in range(100):  # 100 s in steps of a second
        clock.now += 1
        reach.remind()
    messages = [m for _, m in _lines(caplog)]
    assert [m.split(" after ")[1] for m in messages if "still" in m and "source" in m] == [
        "30 s: refused",
        "60 s: refused",
        "90 s: refused",
    ]
    assert [m.split(" after ")[1] for m in messages if "still" in m and "target" in m] == [
        "30 s: refused",
        "60 s: refused",
        "90 s: refused",
    ]
    reach.answered("source")
    assert reach.unreachable("target") and not reach.unreachable("source")


def test_answers_without_an_outage_say_nothing(
    reach: Reachability, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "k2k.reachability")
    reach.answered("target")
    reach.remind()
    assert _lines(caplog) == []


class FakeView:
    """A ClusterView whose probes the test answers."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sent: list[Future[object]] = []
        self.causes: dict[int, str | None] = {}

    def probe(self) -> Future[object]:
        self.sent.append(Future())
        return self.sent[-1]

    def probe_failure(self, probe: Future[object]) -> str | None:
        return self.causes[id(probe)]

    def finish(self, cause: str | None) -> None:
        probe = self.sent[-1]
        self.causes[id(probe)] = cause
        probe.set_result(None)


def test_watch_probes_each_cluster_again_an_interval_after_the_answer(
    reach: Reachability, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "k2k.reachability")
    source, target = FakeView("s:1"), FakeView("t:1")
    watch = ClusterWatch({"source": source, "target": target}, reach, interval_s=5.0)  # type: ignore[dict-item]
    watch.step()
    assert (len(source.sent), len(target.sent)) == (1, 1)
    clock.now += 20  # the target's probe is still in flight: never a second one meanwhile
    source.finish(None)
    watch.step()
    assert (len(source.sent), len(target.sent)) == (1, 1)
    clock.now += 5
    watch.step()
    assert (len(source.sent), len(target.sent)) == (2, 1)
    sent_at = 1000.0
    target.finish("Connect to t:1 failed: Connection refused")  # unanswered since it was sent
    clock.now += 1
    watch.step()
    assert _lines(caplog) == [
        (
            logging.WARNING,
            "target cluster unreachable at t:1: Connect to t:1 failed: Connection refused",
        )
    ]
    assert reach.unreachable("target") and not reach.unreachable("source")
    clock.now += 5
    watch.step()
    target.finish(None)
    clock.now += 0.5
    watch.step()
    assert _lines(caplog)[-1] == (
        logging.INFO,
        f"target cluster reachable again at t:1 after {round(clock.now - sent_at)} s",
    )


def test_unreachable_cluster_named_with_its_cause_and_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real client and a port nobody listens on: the line names the cluster, the address
    and librdkafka's cause, and never the SASL password of the configuration."""
    caplog.set_level(logging.DEBUG)
    secret = "hunter2-not-logged"
    bootstrap = f"127.0.0.1:{free_port()}"
    view = ClusterView(
        "source",
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "k2k",
            "sasl.password": secret,
        },
        timeout_s=1.0,
    )
    watch = ClusterWatch({"source": view})
    watch.start()
    try:
        line = _wait_for_line(caplog)
    finally:
        watch.close()
    assert line.startswith(f"source cluster unreachable at {bootstrap}: ")
    assert "Connection refused" in line
    assert not view.answering
    assert secret not in caplog.text


def _wait_for_line(caplog: pytest.LogCaptureFixture) -> str:
    eventually(lambda: _lines(caplog), timeout=20)
    return _lines(caplog)[0][1]


def test_describe_names_the_oldest_outage_with_its_newest_cause(
    reach: Reachability, clock: Clock
) -> None:
    assert reach.describe() is None
    reach.failed("target", "t:9092", "Connection refused", since=clock.now - 10)
    reach.failed("source", "s:9092", "timed out", since=clock.now - 5)
    reach.failed("target", "t:9092", "reset", since=clock.now)
    assert reach.describe() == "target cluster unreachable at t:9092: reset"
    reach.answered("target")
    assert reach.describe() == "source cluster unreachable at s:9092: timed out"
