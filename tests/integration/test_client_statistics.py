"""librdkafka's client statistics on real brokers and real Spark (``k2k start -t`` with
``metrics.clientStatistics``): a Prometheus scrape shows the runners' source consumer and
target producer, with values that agree with what was replicated (off, it shows none:
test_metrics' Prometheus test checks that)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from k2k.local import free_port
from tests.helpers.kafka import create_topic, eventually, produce
from tests.helpers.pipelines import pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.integration.test_metrics import (
    PER_PARTITION,
    _caught_up,
    _records,
    _scrape,
)

pytestmark = pytest.mark.integration


def _value(samples: dict[str, list[Any]], name: str) -> float | None:
    """The one sample of ``name`` (one per pipeline: the runners' clients add up), or None."""
    found = samples.get(name, [])
    assert len(found) <= 1, found
    if not found:
        return None
    assert found[0].labels["pipeline"].startswith("g-"), found
    return float(found[0].value)


def _replicate(
    clusters,
    tmp_path: Path,
    name: str,
    topic: str,
    exactly_once: bool = False,
    **metrics: Any,
) -> tuple[dict[str, list[Any]], int]:
    """Replicate two partitions of known records with ``k2k start -t``; the scrape once
    every record is replicated and, with client statistics, counted by both clients, and
    the records' key and value bytes."""
    create_topic(clusters.source, topic, 2)
    records = _records(2)
    produce(clusters.source, topic, records)
    features = {"exactlyOnce": "enabled" if exactly_once else "disabled"}
    doc = pipeline_dict(clusters, name, [topic], metrics=metrics, features=features)
    port = free_port()
    env = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)}
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log", "-t", env=env)
    try:
        key_value_bytes = sum(len(key) + len(value) for _p, key, value, _h, _ts in records)
        _caught_up(port, topic, {p: PER_PARTITION for p in range(2)})
        total = 2 * PER_PARTITION

        def counted() -> dict[str, list[Any]] | None:
            samples = _scrape(port)
            sent = _value(samples, "k2k_target_producer_records_total") or 0
            fetched = _value(samples, "k2k_source_consumer_records_total") or 0
            return samples if sent >= total and fetched >= total else None

        return eventually(counted, timeout=60, interval=1.0, ignore=(OSError,)), key_value_bytes
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_client_statistics_show_the_runners_consumer_and_producer(
    clusters, tmp_path: Path, topic_name, group_name, exactly_once: bool
):
    """Exactly-once, a runner's two transactional producers add up."""
    stats = {"enabled": True, "interval": "1 second"}
    samples, key_value_bytes = _replicate(
        clusters, tmp_path, group_name("p"), topic_name("src"), exactly_once, clientStatistics=stats
    )
    replicated = 2 * PER_PARTITION
    # Totals: every replicated record was fetched and sent (the producer also sent the
    # progress records); bytes on the wire carry the records and the protocol around them.
    assert _value(samples, "k2k_source_consumer_records_total") >= replicated
    assert _value(samples, "k2k_source_consumer_bytes_total") > key_value_bytes
    assert _value(samples, "k2k_target_producer_records_total") >= replicated
    assert _value(samples, "k2k_target_producer_bytes_total") > key_value_bytes
    # Queues: present, and drained once caught up up to what is in flight.
    for name in (
        "k2k_source_consumer_fetch_queue_records",
        "k2k_source_consumer_fetch_queue_bytes",
        "k2k_target_producer_queue_records",
        "k2k_target_producer_queue_bytes",
        "k2k_target_producer_requests_queued",
        "k2k_target_producer_requests_in_flight",
    ):
        value = _value(samples, name)
        assert value is not None and value >= 0, name
    assert _value(samples, "k2k_source_consumer_fetch_queue_records") <= replicated
    # The consumer fetches all the time (long polls): its request latency is always there,
    # in seconds; the producer's only for an interval in which it sent.
    avg = _value(samples, "k2k_source_consumer_request_latency_avg_seconds")
    p99 = _value(samples, "k2k_source_consumer_request_latency_p99_seconds")
    assert avg is not None and p99 is not None
    assert 0 < avg <= p99 < 30, (avg, p99)
    for name in (
        "k2k_target_producer_request_latency_avg_seconds",
        "k2k_target_producer_queue_latency_avg_seconds",
    ):
        value = _value(samples, name)
        assert value is None or 0 <= value < 30, (name, value)
    assert _value(samples, "k2k_target_producer_errors_total") in (None, 0)
