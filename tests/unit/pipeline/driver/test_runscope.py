"""The planner's run scope (k2k.pipeline.driver.runscope): what one run opens is closed in
reverse on one stack, also when preparation fails half-way, with Spark last."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any

import pytest

import k2k
from k2k.coordination.assignment import StandDown
from k2k.coordination.controltopics import ControlTopics
from k2k.errors import ClusterError, ReplicationError
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver import runscope
from k2k.pipeline.driver.planning import PlanningState
from k2k.pipeline.driver.runscope import RunOptions, open_run

DOC: dict[str, Any] = {
    "name": "scope-unit",
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:1"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:2"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}


class _View:
    bootstrap = "127.0.0.1:1"
    answering = True

    def topics(self) -> dict[str, Any]:
        return {}

    def offsets(self, partitions: list[Any], which: str) -> dict[Any, int]:
        return {}


class _Discovery:
    def __init__(self, cfg: Any, start_at: Any = None) -> None:
        self.source, self.target = _View(), _View()
        self.recreated: set[str] = set()
        self.on_records_lost = None

    def discover(self, *args: Any) -> dict[str, Any]:
        return {}

    def partitions(self) -> list[Any]:
        return []


class _Closes:
    """A resource that notes its name in ``closed`` when it closes."""

    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self.closed = name, closed

    def close(self) -> None:
        self.closed.append(self.name)


class _Watch(_Closes):
    def __init__(self, views: Any, closed: list[str]) -> None:
        super().__init__("watch", closed)
        self.reachability = type("R", (), {"down_since": None, "describe": None})()

    def start(self) -> None:
        pass


class _Membership(_Closes):
    def __init__(self, closed: list[str], fail_join: BaseException | None) -> None:
        super().__init__("membership", closed)
        self.stood_down = False
        self.fail_join = fail_join

    def __enter__(self) -> _Membership:
        return self

    def __exit__(self, _type: Any, exc: BaseException | None, _tb: Any) -> None:
        self.stood_down = isinstance(exc, StandDown)
        self.close()

    def refuse_if_cut_over(self) -> None:
        from k2k.pipeline.driver.cutover import CutOver

        if isinstance(self.fail_join, CutOver):
            raise self.fail_join

    def join(self) -> None:
        if self.fail_join is not None:
            raise self.fail_join

    def drained_now(self) -> bool:
        return False


class _Progress(_Closes):
    def load(self) -> dict[Any, Any]:
        return {}


class _Control(_Closes):
    address = ("127.0.0.1", 1, "token")
    on_frame = None

    def end_lease(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class _Spec:
    control: Any = None
    observer: Any = None
    telemetry: bool = False


class _Metrics(_Closes):
    on_frame = None

    def failed(self, exc: BaseException) -> None:
        self.closed.append(f"failed: {type(exc).__name__}")


class _Fixture:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_join: BaseException | None) -> None:
        self.closed: list[str] = []
        self.membership = _Membership(self.closed, fail_join)
        closed = self.closed
        patches = {
            "Discovery": _Discovery,
            "_syncs": lambda cfg, discovery: (),
            "ClusterWatch": lambda views: _Watch(views, closed),
            "diagnosed_on_failure": lambda cfg, log: contextlib.nullcontext(),
            "ensure_control_topics": lambda cfg, target: ControlTopics(1, 1, 0),
            "Membership": lambda *args: self.membership,
            "ProgressStore": lambda *args, **kwargs: _Progress("progress", closed),
            "lease_template": lambda cfg, **kwargs: _Spec(),
            "spark_context_running": lambda: False,
            "start_spark": lambda *args: type("SC", (), {"master": "local[1]"})(),
            "stop_spark": lambda sc: closed.append("spark"),
            "open_channel": lambda sc, host, port: _Control("control", closed),
        }
        for name, value in patches.items():
            monkeypatch.setattr(runscope, name, value)

    def open(self, telemetry: bool = False) -> contextlib.AbstractContextManager[runscope.RunScope]:
        cfg = k2k.load_pipeline(DOC, env={})
        options = RunOptions(member="m", telemetry=telemetry)
        return open_run(cfg, options, PlanningState(), PipelineStats(), threading.Event())


def test_a_run_closes_in_reverse_with_spark_last(monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = _Fixture(monkeypatch, fail_join=None)
    with fixture.open() as scope:
        assert scope.control.address == ("127.0.0.1", 1, "token")
        assert fixture.closed == []
    # The membership leaves before Spark stops: other members need not wait for it.
    assert fixture.closed == ["control", "progress", "membership", "watch", "spark"]
    assert not fixture.membership.stood_down


def test_a_step_that_fails_closes_what_was_opened_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = _Fixture(monkeypatch, fail_join=ClusterError("no answer"))
    with pytest.raises(ClusterError), fixture.open():
        pytest.fail("the scope opened although joining failed")
    # Progress was read and Spark started before the join (others hand over at the join).
    assert fixture.closed == ["progress", "membership", "watch", "spark"]


def test_a_newer_session_of_our_name_leaves_the_assignment_topic_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = _Fixture(monkeypatch, fail_join=None)
    with pytest.raises(StandDown), fixture.open():
        raise StandDown("a newer session")
    assert fixture.membership.stood_down
    assert fixture.closed[-1] == "spark"


def test_the_metrics_last_export_counts_the_error_that_ended_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from k2k.metrics import replicator

    fixture = _Fixture(monkeypatch, fail_join=None)
    metrics = _Metrics("metrics", fixture.closed)
    monkeypatch.setattr(replicator, "replicator_metrics", lambda *args, **kwargs: metrics)
    with pytest.raises(ReplicationError), fixture.open(telemetry=True) as scope:
        assert scope.metrics is metrics and scope.template.telemetry
        raise ReplicationError("a runner task failed")
    assert fixture.closed == [
        "control",  # no runner frame after the last export
        "failed: ReplicationError",
        "metrics",
        "progress",
        "membership",
        "watch",
        "spark",
    ]


class _Service(_Closes):
    """An MM2 heartbeat or checkpoint emitter: checked and on the stack, started later."""

    def start(self) -> None:
        self.closed.append(f"{self.name} started")


def _with_mm2_services(monkeypatch: pytest.MonkeyPatch, fixture: _Fixture) -> None:
    def services(cfg: Any, discovery: Any, stack: contextlib.ExitStack) -> tuple[Any, Any]:
        found = _Service("heartbeats", fixture.closed), _Service("checkpoints", fixture.closed)
        for service in found:
            stack.callback(service.close)
        return found

    monkeypatch.setattr(runscope, "_mm2_services", services)


def test_the_mm2_services_start_once_joined_and_stop_after_leaving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = _Fixture(monkeypatch, fail_join=None)
    _with_mm2_services(monkeypatch, fixture)
    with fixture.open():
        assert fixture.closed == ["heartbeats started", "checkpoints started"]
    assert fixture.closed[2:] == [
        "control",
        "progress",
        "membership",
        "checkpoints",
        "heartbeats",
        "watch",
        "spark",
    ]


def test_a_pipeline_cut_over_stops_before_spark_the_join_and_the_services(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from k2k.formats import CutoverRecord
    from k2k.pipeline.driver.cutover import CutOver

    done = CutoverRecord("g", "g", ("cut", "drain"), {}, {}, (), (), 1, 2, "host-a")
    fixture = _Fixture(monkeypatch, fail_join=CutOver(done))
    _with_mm2_services(monkeypatch, fixture)
    with pytest.raises(CutOver), fixture.open():
        pytest.fail("the scope opened although the pipeline was cut over")
    # Never started: no MM2 records, no progress read, no Spark; the member leaves.
    assert fixture.closed == ["membership", "checkpoints", "heartbeats", "watch"]
    assert not fixture.membership.stood_down
