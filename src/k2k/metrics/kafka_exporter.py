"""The ``kafka`` metrics exporter: OpenTelemetry's export calls, written to the metrics topic.

Runs on: driver (or the Offset Mapping app), in the SDK's export thread. One
:class:`~k2k.formats.metrics.MetricsRecord` per metric per export. Metrics never stop
replication: a failed export is logged (once a minute at most) and the next one carries the
cumulative values again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    Sum,
)

from k2k.config import PipelineConfig
from k2k.config.offset_mapping import OffsetMappingAppConfig
from k2k.coordination.controltopics import ensure_metrics_topic
from k2k.formats.metrics import MetricsRecord
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import build_producer, producer_settings
from k2k.kafka.faults import describe

__all__ = ["KafkaMetricExporter", "kafka_exporter_factory"]

log = logging.getLogger("k2k.metrics")

_WARN_EVERY_S = 60.0


class KafkaMetricExporter(MetricExporter):
    """Writes every export to ``topic`` on the target through an idempotent producer."""

    def __init__(
        self, producer_conf: Mapping[str, str], topic: str, *, instance: str, pipeline: str
    ) -> None:
        super().__init__()
        self.topic = topic
        self.instance = instance
        self.pipeline = pipeline
        self._producer = build_producer(dict(producer_conf), on_error=self._on_client_error)
        self._failed: str | None = None
        self._warned_at = 0.0

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self._failed = None
        for resource_metrics in metrics_data.resource_metrics:
            service = str(resource_metrics.resource.attributes.get("service.name", "k2k"))
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    record = self._record(service, metric)
                    if record is not None:
                        self._produce(record)
        left = self._producer.flush(timeout_millis / 1000)
        if left or self._failed:
            self._warn(self._failed or f"{left} metrics records not acknowledged in time")
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._producer.flush(timeout_millis / 1000) == 0

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._producer.flush(min(timeout_millis / 1000, 5.0))

    def _record(self, service: str, metric: Any) -> MetricsRecord | None:
        data = metric.data
        if isinstance(data, Histogram):
            kind, points = "histogram", [_histogram_point(p) for p in data.data_points]
        elif isinstance(data, Sum):
            kind = "sum" if data.is_monotonic else "gauge"
            points = [_number_point(p) for p in data.data_points]
        elif isinstance(data, Gauge):
            kind, points = "gauge", [_number_point(p) for p in data.data_points]
        else:
            return None
        if not points:
            return None
        first = data.data_points[0]
        return MetricsRecord(
            service=service,
            instance=self.instance,
            pipeline=self.pipeline,
            metric=metric.name,
            unit=metric.unit or "",
            kind=kind,
            points=tuple(points),
            time_ms=first.time_unix_nano // 1_000_000,
            start_ms=(getattr(first, "start_time_unix_nano", 0) or 0) // 1_000_000,
            description=metric.description or "",
        )

    def _produce(self, record: MetricsRecord) -> None:
        key, value = record.encode()
        try:
            self._producer.produce(self.topic, value, key, on_delivery=self._on_delivery)
        except (BufferError, KafkaException) as exc:
            self._failed = f"could not queue a metrics record: {exc}"

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._failed = f"the target rejected a metrics record: {describe(err)}"

    def _on_client_error(self, err: KafkaError) -> None:
        self._failed = describe(err)

    def _warn(self, why: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("metrics export to topic %r failed: %s", self.topic, why)


def _number_point(p: Any) -> dict[str, Any]:
    return {"attributes": dict(p.attributes or {}), "value": p.value}


def _histogram_point(p: Any) -> dict[str, Any]:
    return {
        "attributes": dict(p.attributes or {}),
        "count": p.count,
        "sum": p.sum,
        "bounds": list(p.explicit_bounds),
        "counts": list(p.bucket_counts),
    }


def kafka_exporter_factory(
    cfg: PipelineConfig | OffsetMappingAppConfig, target: ClusterView, instance: str
) -> Callable[[], KafkaMetricExporter]:
    """Builds the exporter only when ``OTEL_METRICS_EXPORTER`` names ``kafka``: the metrics
    topic (``metrics.kafka.topic``) is created or checked then."""

    def build() -> KafkaMetricExporter:
        topic = cfg.metrics.kafka.topic
        validate = cfg.features.validate_control_topic_settings
        ensure_metrics_topic(topic, cfg.topic_creation, validate=validate, target=target)
        producer = producer_settings(cfg.target_client("producer"), False, exactly_once=False)
        return KafkaMetricExporter(producer, topic, instance=instance, pipeline=cfg.name)

    return build
