"""Metrics on real brokers and real Spark (``k2k start -t``): a Prometheus scrape shows what
was replicated, the kafka exporter writes readable records, an OTLP receiver gets them.

Each test runs ``k2k start`` as a real process and reads its exporters from outside, as an
operator's Prometheus, Kafka consumer or OpenTelemetry collector would.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from k2k.formats.metrics import MetricsRecord
from k2k.local import free_port
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.integration.test_offset_mapping_app import (
    app_config,
    commit_source,
    fill,
    replicate_with_mappings,
    target_commits,
)

pytestmark = pytest.mark.integration

PER_PARTITION = 500


def _records(partitions: int) -> list:
    """``PER_PARTITION`` records per partition, an hour old, with known sizes."""
    return [
        (p, f"k{p}-{i}".encode(), f"value-{p}-{i:05d}".encode(), [], BASE_TS + i)
        for i in range(PER_PARTITION)
        for p in range(partitions)
    ]


def _bytes_per_partition(records: list, part: str) -> dict[int, float]:
    sizes: dict[int, float] = defaultdict(float)
    for p, key, value, _h, _ts in records:
        sizes[p] += len(key) if part == "key" else len(value)
    return dict(sizes)


def _scrape(port: int) -> dict[str, list[Any]]:
    """Samples by name from ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, list[Any]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append(sample)
    return samples


def _per_partition(
    samples: dict[str, list[Any]], name: str, topic: str, **labels: str
) -> dict[int, float]:
    return {
        int(s.labels["partition"]): s.value
        for s in samples.get(name, [])
        if s.labels.get("topic") == topic and labels.items() <= s.labels.items()
    }


def _pipeline_value(samples: dict[str, list[Any]], name: str) -> list[float]:
    return [s.value for s in samples.get(name, [])]


def _caught_up(port: int, topic: str, expected: dict[int, int]) -> dict[str, list[Any]]:
    """The scrape once records, lag and committed offsets show every record replicated."""

    def done() -> dict[str, list[Any]] | None:
        samples = _scrape(port)
        counted = _per_partition(samples, "k2k_replication_records_total", topic)
        lag = _per_partition(samples, "k2k_replication_lag_records", topic)
        committed = _per_partition(samples, "k2k_replication_committed_offset", topic)
        if counted == expected and lag == dict.fromkeys(expected, 0) and committed == expected:
            return samples
        return None

    return eventually(done, timeout=240, interval=1.0, ignore=(OSError,))


def test_prometheus_scrape_and_kafka_topic_show_what_was_replicated(clusters, tmp_path: Path):
    name, topic = "metrics-prom", "metrics-prom-src"
    create_topic(clusters.source, topic, 2)
    records = _records(2)
    produce(clusters.source, topic, records)
    metrics_topic = f"__k2k-metrics-{name}"
    doc = pipeline_dict(clusters, name, [topic], metrics={"kafka": {"topic": metrics_topic}})
    port = free_port()
    env = {
        "OTEL_METRICS_EXPORTER": "prometheus,kafka",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
        "OTEL_METRIC_EXPORT_INTERVAL": "1000",
    }
    started = time.time()
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log", "-t", env=env)
    try:
        expected = {p: PER_PARTITION for p in range(2)}
        samples = _caught_up(port, topic, expected)
        scraped = time.time()
        for part in ("key", "value"):
            assert _per_partition(
                samples, "k2k_replication_bytes_total", topic, part=part
            ) == _bytes_per_partition(records, part)
        _assert_conventions_and_health(samples, topic, expected)
        # Records carry timestamps from BASE_TS on (over an hour old): each observation is
        # an acknowledgement time, between the start and the scrape, minus such a timestamp.
        counts = _per_partition(samples, "k2k_replication_latency_seconds_count", topic)
        sums = _per_partition(samples, "k2k_replication_latency_seconds_sum", topic)
        oldest, newest = BASE_TS / 1000, (BASE_TS + PER_PARTITION) / 1000
        for p in (0, 1):
            assert counts[p] >= 1
            assert started - newest <= sums[p] / counts[p] <= scraped - oldest, (sums, counts)
        assert _per_partition(samples, "k2k_replication_lag_seconds", topic) == {0: 0.0, 1: 0.0}
        owned = [s.value for s in samples["k2k_partitions_owned"]]
        assert owned == [2.0]
        assert sum(s.value for s in samples["k2k_leases_total"]) >= 1
        assert sum(s.value for s in samples["k2k_commit_duration_seconds_count"]) >= 1
        assert not samples.get("k2k_commit_failures_total")
        # The kafka exporter: readable records with the same totals.
        assert _from_metrics_topic(clusters.target, metrics_topic, topic) == expected
        # Replicated content, not only counts.
        target = read_all(clusters.target, topic)
        assert {p: len(rs) for p, rs in target.items()} == expected
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]


def _assert_conventions_and_health(
    samples: dict[str, list[Any]], topic: str, expected: dict[int, int]
) -> None:
    """The messaging conventions' counters, record age, and the caught-up health gauges."""
    consumed = {
        int(s.labels["messaging_destination_partition_id"]): s.value
        for s in samples["messaging_client_consumed_messages_total"]
        if s.labels.get("messaging_destination_name") == topic
    }
    assert consumed == expected
    sent = [
        s
        for s in samples["messaging_client_sent_messages_total"]
        if s.labels.get("messaging_destination_name") == topic
    ]
    assert [(s.labels["messaging_system"], s.value) for s in sent] == [
        ("kafka", float(sum(expected.values())))
    ]
    # Records an hour old: read an hour after their timestamps, at least.
    counts = _per_partition(samples, "k2k_replication_record_age_seconds_count", topic)
    sums = _per_partition(samples, "k2k_replication_record_age_seconds_sum", topic)
    assert all(counts[p] >= 1 and sums[p] / counts[p] > 3000 for p in expected), (counts, sums)
    ratio = _per_partition(samples, "k2k_replication_lag_retention_ratio", topic)
    assert ratio == dict.fromkeys(expected, 0.0)
    assert _pipeline_value(samples, "k2k_replication_recovery_point_seconds") == [0.0]
    assert _pipeline_value(samples, "k2k_ready") == [1.0]
    assert _pipeline_value(samples, "k2k_members_alive") == [1.0]
    assert not samples.get("k2k_replication_catchup_time_seconds")  # nothing to catch up
    # metrics.clientStatistics is off by default: no client series.
    assert not [
        n for n in samples if n.startswith(("k2k_source_consumer_", "k2k_target_producer_"))
    ]


def _from_metrics_topic(bootstrap: str, metrics_topic: str, topic: str) -> dict[int, int]:
    """The newest records-replicated point per partition in the metrics topic."""

    def newest() -> dict[int, int]:
        found: dict[int, int] = {}
        for part, recs in read_all(bootstrap, metrics_topic).items():
            for offset, r in enumerate(recs):
                rec = MetricsRecord.decode(r.key, r.value, metrics_topic, part, offset)
                if rec.metric != "k2k.replication.records":
                    continue
                assert rec.kind == "sum" and rec.unit == "{record}"
                for point in rec.points:
                    if point["attributes"]["topic"] == topic:
                        found[point["attributes"]["partition"]] = point["value"]
        return found

    return eventually(newest, expected={0: PER_PARTITION, 1: PER_PARTITION}, timeout=60, interval=1)


class _OtlpReceiver(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP metrics receiver: keeps the newest value of every sum data point."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        self.resources: list[dict[str, Any]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
                    ExportMetricsServiceRequest,
                )

                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportMetricsServiceRequest.FromString(body)
                receiver.take(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def take(self, request: Any) -> None:
        for rm in request.resource_metrics:
            self.resources.append({a.key: a.value.string_value for a in rm.resource.attributes})
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._points(metric)

    def _points(self, metric: Any) -> None:
        """Sums and gauges by their value, histograms by their count (``<name>.count``)."""
        kind = metric.WhichOneof("data")
        if kind not in ("sum", "gauge", "histogram"):
            return
        for point in getattr(metric, kind).data_points:
            attrs = tuple(
                sorted((a.key, a.value.string_value or a.value.int_value) for a in point.attributes)
            )
            if kind == "histogram":
                self.sums[(metric.name + ".count", attrs)] = point.count
            else:
                value = point.as_int if point.HasField("as_int") else point.as_double
                self.sums[(metric.name, attrs)] = value

    def value(self, name: str, attributes: dict[str, Any]) -> float | None:
        return self.sums.get((name, tuple(sorted(attributes.items()))))

    def records(self, topic: str) -> dict[int, float]:
        return {
            dict(attrs)["partition"]: value
            for (name, attrs), value in self.sums.items()
            if name == "k2k.replication.records" and dict(attrs).get("topic") == topic
        }


def test_otlp_receiver_gets_the_metrics_of_an_exactly_once_pipeline(clusters, tmp_path: Path):
    name, topic = "metrics-otlp", "metrics-otlp-src"
    create_topic(clusters.source, topic, 2)
    produce(clusters.source, topic, _records(2))
    doc = pipeline_dict(clusters, name, [topic], features={"exactlyOnce": "enabled"})
    receiver = _OtlpReceiver()
    env = {
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}",
        "OTEL_METRIC_EXPORT_INTERVAL": "1000",
        "OTEL_SERVICE_NAME": "k2k-test",
    }
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log", "-t", env=env)
    try:
        eventually(
            lambda: receiver.records(topic),
            expected={0: PER_PARTITION, 1: PER_PARTITION},
            timeout=240,
            interval=1.0,
        )
        assert any(r.get("service.name") == "k2k-test" for r in receiver.resources)
        assert any(r.get("k2k.pipeline") == name for r in receiver.resources)
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]
        receiver.shutdown()


def test_offset_mapping_app_exports_what_its_pass_did(clusters, tmp_path: Path):
    """``k2k offset-mapping start --once -t``: the last push, at exit, carries the pass."""
    source, target, mapping = "metrics-om-src", "metrics-om-dst", "metrics-om-map"
    create_topic(clusters.source, source, 2)
    create_topic(clusters.target, target, 2)
    create_topic(clusters.target, mapping, 3, {"cleanup.policy": "delete"})
    fill(clusters.source, source, 2, 20, "metrics-om")
    replicate_with_mappings(clusters, "metrics-om", {source: target}, mapping)
    commit_source(clusters, "metrics-om-group", {(source, 0): 5, (source, 1): 12})
    receiver = _OtlpReceiver()
    doc = app_config(clusters, "metrics-om-app", mapping, ["metrics-om-group"])
    path = tmp_path / "offset-mapping.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}",
    }
    try:
        result = k2k_cli("offset-mapping", "start", "-t", "--once", "-f", str(path), env=env)
        assert result.returncode == 0, result.stderr
        app = {"app": "metrics-om-app"}
        assert receiver.value("k2k.offsetmapping.passes", app) == 1
        assert receiver.value("k2k.offsetmapping.commits", app) == 2
        assert receiver.value("k2k.offsetmapping.partitions.translated", app) == 2
        # Both positions were seen and committed in the one pass: two latencies, and when.
        assert receiver.value("k2k.offsetmapping.checkpoint.latency.count", app) == 2
        last_pass = receiver.value("k2k.offsetmapping.last.pass.timestamp", app)
        assert last_pass is not None and time.time() - 120 < last_pass <= time.time()
        assert target_commits(clusters, "metrics-om-group") == {(target, 0): 5, (target, 1): 12}
    finally:
        receiver.shutdown()


def test_lag_seconds_is_the_age_of_the_oldest_unreplicated_record(clusters):
    """The gauge's source read: committed at offset 3 of 10 -> the age of record 3; at the
    end (10), the age of that read."""
    from k2k.metrics.lag import OldestUnreplicated

    topic = "metrics-lag-age"
    create_topic(clusters.source, topic, 1)
    produce(
        clusters.source, topic, [(0, f"k{i}", "v", [], BASE_TS + i * 60_000) for i in range(10)]
    )
    ages = OldestUnreplicated({"bootstrap.servers": clusters.source}, "k2k.metrics-lag", 15)
    try:
        age = eventually(
            lambda: ages.oldest({(topic, 0): 3}, {(topic, 0): 7}).get((topic, 0)),
            timeout=30,
            interval=0.2,
        )
        expected = time.time() - (BASE_TS + 3 * 60_000) / 1000
        assert abs(age - expected) < 5, (age, expected)
        assert ages.oldest({(topic, 0): 10}, {(topic, 0): 0}) == {}  # caught up: no read
        # Lag reported at the end offset (the end moved on, or was read late): the read finds
        # nothing there, and the age counts from that read, not from record 3's old answer.
        fresh = eventually(
            lambda: (
                (a := ages.oldest({(topic, 0): 10}, {(topic, 0): 1}).get((topic, 0))) is not None
                and a < 15
                and a
            ),
            timeout=30,
            interval=0.2,
        )
        assert 0 <= fresh < 15, fresh
    finally:
        ages.close()
