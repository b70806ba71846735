"""Metrics without brokers: the frames' arithmetic, the instruments the driver feeds from
them (read back through the SDK's in-memory reader), and bad ``OTEL_*`` input."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

from k2k.errors import K2KError
from k2k.metrics.frames import LATENCY_BOUNDS_S
from k2k.metrics.health import PipelineGauges
from k2k.metrics.replicator import ReplicatorMetrics, replicator_histograms
from k2k.metrics.tally import RunTally
from k2k.metrics.telemetry import Telemetry
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver.planning import PlanningState
from k2k.pipeline.plan import RunnerSummary
from k2k.pipeline.task.observe import ProducedRun


class _InMemory:
    """A Telemetry stand-in built from the real SDK with its in-memory reader."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        views = [
            View(instrument_name=h.name, aggregation=ExplicitBucketHistogramAggregation(h.bounds))
            for h in replicator_histograms("k2k.")
        ]
        self.provider = MeterProvider(metric_readers=[self.reader], views=views)

    def meter(self, name: str) -> Any:
        return self.provider.get_meter(name)

    def close(self) -> None:
        self.provider.shutdown()

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            p
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.data.data_points
        ]


def _metrics(
    stats: PipelineStats | None = None, identical: bool = False
) -> tuple[ReplicatorMetrics, _InMemory]:
    telemetry = _InMemory()
    gauges = PipelineGauges("dr", stats or PipelineStats(), ages=None, identical=identical)
    metrics = ReplicatorMetrics(
        telemetry,  # type: ignore[arg-type]
        gauges,
        prefix="k2k.",
        mode="at-least-once",
    )
    return metrics, telemetry


def _run(count: int, size: int, age_s: float) -> ProducedRun:
    ts = int((time.time() - age_s) * 1000)
    return ProducedRun("t", 0, 0, count - 1, count, "t", byte_count=size, source_timestamp=ts)


def test_frames_sent_twice_or_lost_count_once_and_summary_makes_good():
    metrics, telemetry = _metrics()
    tally = RunTally(lease=1)
    tally.on_run(_run(10, 100, 2.0))
    first = tally.frame().encode()
    metrics.on_frame(first)
    metrics.on_frame(first)  # repeated: ignored
    tally.on_run(_run(5, 50, 0.02))
    tally.frame()  # lost on the way
    summary = RunnerSummary(0, metrics=tally.frame(full=True).encode())
    metrics.lease_ended(1, [summary], fencings=0)
    metrics.on_frame(first)  # late, after the lease ended: ignored
    (records,) = telemetry.points("k2k.replication.records")
    (size,) = telemetry.points("k2k.replication.bytes")
    (latency,) = telemetry.points("k2k.replication.latency")
    assert (records.value, size.value) == (15, 150)
    assert dict(records.attributes) == {"pipeline": "dr", "topic": "t", "partition": 0}
    # Two observations, in the buckets they fell in, and their sum kept.
    assert latency.count == 2 and 2.0 < latency.sum < 2.5
    bounds = (*LATENCY_BOUNDS_S, float("inf"))
    bucket = dict(zip(bounds, latency.bucket_counts, strict=True))
    assert bucket[2.5] == 1 and bucket[0.025] + bucket[0.05] == 1


def test_gauges_read_the_planners_view():
    planning = PlanningState(
        committed={("t", 0): 5, ("t", 1): 9}, latest={("t", 0): 8, ("t", 1): 9}
    )
    stats = PipelineStats(planning=planning)
    metrics, telemetry = _metrics(stats)
    lag = {
        p.attributes["partition"]: p.value for p in telemetry.points("k2k.replication.lag.records")
    }
    assert lag == {0: 3, 1: 0}
    seconds = {
        p.attributes["partition"]: p.value for p in telemetry.points("k2k.replication.lag.seconds")
    }
    assert seconds == {1: 0.0}  # partition 0 lags, its age is unknown without a source reader
    (owned,) = telemetry.points("k2k.partitions.owned")
    assert owned.value == 2
    metrics.close()


def test_partitions_whose_identical_offsets_ended_are_reported():
    from k2k.formats import ProgressRecord

    planning = PlanningState()
    ended = ProgressRecord("g", "t", 1, 90, "p", 0, mapped_from=60)
    planning.take_progress([ProgressRecord("g", "t", 0, 40, "p", 0), ended])
    metrics, telemetry = _metrics(PipelineStats(planning=planning), identical=True)
    assert [p.value for p in telemetry.points("k2k.partitions.not_identical")] == [1]
    (offset,) = telemetry.points("k2k.replication.identity.ended.offset")
    assert (offset.attributes["partition"], offset.value) == (1, 60)
    # Reset and copied afresh: its newest progress is identical again.
    planning.take_progress([ProgressRecord("g", "t", 1, 95, "p", 0)])
    assert [p.value for p in telemetry.points("k2k.partitions.not_identical")] == [0]
    metrics.close()


def test_faults_and_fencings_are_counted_by_class():
    metrics, telemetry = _metrics()
    failed = RunnerSummary(0, error="boom", error_class="ReplicationError")
    stood_down = RunnerSummary(1, fenced="claimed by b")
    metrics.lease_ended(3, [failed, stood_down], fencings=2)
    (errors,) = telemetry.points("k2k.errors")
    assert (errors.value, errors.attributes["class"]) == (1, "ReplicationError")
    assert [p.value for p in telemetry.points("k2k.fencings.suffered")] == [1]
    assert [p.value for p in telemetry.points("k2k.fencings.done")] == [2]


def test_a_busy_prometheus_port_is_one_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)}
        with pytest.raises(K2KError, match=rf"cannot serve /metrics on 127.0.0.1:{port}: .*"):
            Telemetry(instance="i", attributes={}, env=env)


GOOD = {
    "name": "demo",
    "source": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:1"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "127.0.0.1:2"}}},
    "replication": [{"source": {"topic": "t"}}, {"sink": {"topic": "source"}}],
}


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        ("OTEL_METRICS_EXPORTER", "prometheus,statsd", "unknown exporter 'statsd'"),
        ("OTEL_EXPORTER_PROMETHEUS_PORT", "99999", "not a port, got '99999'"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "unsupported protocol 'http/json'"),
    ],
)
@pytest.mark.parametrize("command", [["start"], ["offset-mapping", "start"]])
def test_bad_otel_variables_fail_before_connecting(
    tmp_path: Path, command, variable, value, needle
):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    env = {**os.environ, "OTEL_METRICS_EXPORTER": "prometheus,otlp", variable: value}
    result = subprocess.run(
        [sys.executable, "-m", "k2k", *command, "-t", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {variable}: "), result.stderr
    assert needle in lines[0]
