"""The ``metrics:`` block: metric-name prefixes and the metrics topic (docs/metrics.md).

Shared by the replicator and the Offset Mapping app; which exporters run is not here but in
the standard ``OTEL_*`` environment variables, read when ``-t/--telemetry`` is given.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated

from pydantic import Field, field_validator

from k2k.config.base import K2KModel
from k2k.config.errors import describe, problems_error
from k2k.config.fields import Duration, Flag, TopicName
from k2k.config.inert import Inert

__all__ = [
    "AppMetricPrefixes",
    "AppMetrics",
    "ClientStatistics",
    "Health",
    "MetricsKafka",
    "PipelineMetrics",
    "ReplicatorPrefixes",
]

_TELEMETRY = "Used with `-t/--telemetry`."


class MetricsKafka(K2KModel):
    """The metrics topic on the target (``OTEL_METRICS_EXPORTER=kafka``)."""

    topic: TopicName = Field(
        "__k2k-metrics",
        description="Topic on the target that the `kafka` exporter writes to; auto-created, "
        "never compacted (creation settings: `topicCreation.control.metrics`). " + _TELEMETRY,
    )


class ReplicatorPrefixes(K2KModel):
    """Name prefixes of the replicator's metrics."""

    replicator: str = Field(
        "k2k.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$|^$",
        description="Prefix of every replicator metric name (`k2k.` gives "
        "`k2k.replication.records`, scraped as `k2k_replication_records_total`). " + _TELEMETRY,
    )
    source_consumer: str = Field(
        "k2k.source.consumer.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$|^$",
        description="Prefix of the runners' source consumer statistics (`k2k.source.consumer.` "
        "gives `k2k.source.consumer.records`, scraped as `k2k_source_consumer_records_total`). "
        "Used with `-t/--telemetry` and `metrics.clientStatistics.enabled`.",
    )
    target_producer: str = Field(
        "k2k.target.producer.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$|^$",
        description="Prefix of the runners' target producer statistics (`k2k.target.producer.` "
        "gives `k2k.target.producer.records`, scraped as `k2k_target_producer_records_total`). "
        "Used with `-t/--telemetry` and `metrics.clientStatistics.enabled`.",
    )


class ClientStatistics(K2KModel):
    """librdkafka's statistics of the runners' source consumers and target producers."""

    enabled: Flag = Field(
        False,
        description="Export rates, queues and request latency of the runners' source "
        "consumers and target producers (docs/metrics.md#client-statistics). Each client "
        "then emits librdkafka's statistics every `interval`, which the runner parses into a "
        "summary: nothing per record. " + _TELEMETRY,
    )
    interval: Duration = Field(
        timedelta(seconds=15),
        description="Time between two statistics of one client (librdkafka's "
        "`statistics.interval.ms`): the gauges' sampling interval, and the delay of the "
        "counters. From 1 second to 1 day; rounded up to whole milliseconds.",
    )

    @field_validator("interval")
    @classmethod
    def _librdkafka_range(cls, value: timedelta) -> timedelta:
        """librdkafka refuses more than a day, and would do so on the executors only; under a
        second the parsing would run on the copy thread many times a second."""
        got = f"{value.total_seconds():g} seconds"
        if value > timedelta(days=1):
            raise problems_error([((), describe("too long", got=got, expected="at most 1 day"))])
        if value < timedelta(seconds=1):
            raise problems_error(
                [((), describe("too short", got=got, expected="at least 1 second"))]
            )
        return value

    @property
    def interval_ms(self) -> int:
        """``statistics.interval.ms``: whole milliseconds."""
        return max(1, math.ceil(self.interval / timedelta(milliseconds=1)))


class Health(K2KModel):
    """What ``/readyz`` on the metrics server answers (docs/operations.md#health-endpoints)."""

    unready_after: Duration = Field(
        timedelta(seconds=30),
        description="`/readyz` answers 503 once a cluster has been unreachable this long, or "
        "records are behind and the committed progress has not moved this long. " + _TELEMETRY,
    )


class PipelineMetrics(K2KModel):
    """Metric name prefixes and the metrics topic of the replicator."""

    prefix: ReplicatorPrefixes = Field(
        default_factory=ReplicatorPrefixes, description="Metric name prefixes."
    )
    kafka: MetricsKafka = Field(default_factory=MetricsKafka, description="The metrics topic.")
    health: Health = Field(default_factory=Health, description="Health endpoints.")
    client_statistics: ClientStatistics = Field(
        default_factory=ClientStatistics,
        description="librdkafka's statistics of the runners' clients (opt-in).",
    )


_NO_CLIENT_METRICS = Inert("the app exports no Kafka client metrics")


class AppMetricPrefixes(K2KModel):
    """Name prefixes of the Offset Mapping app's metrics."""

    target_consumer: Annotated[str, _NO_CLIENT_METRICS] = Field(
        "k2k.offsetmapping.consumer.control.",
        description="Prefix of the target consumer's Kafka client metrics. Accepted for K2K "
        "compatibility; librdkafka's client statistics are not exported.",
    )
    target_producer: Annotated[str, _NO_CLIENT_METRICS] = Field(
        "k2k.offsetmapping.producer.",
        description="Prefix of the target producer's Kafka client metrics. Accepted for K2K "
        "compatibility; librdkafka's client statistics are not exported.",
    )
    offset_mapping_app: str = Field(
        "k2k.offsetmapping.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$|^$",
        description="Prefix of the app's own metrics (passes, groups translated, commits). "
        + _TELEMETRY,
    )


class AppMetrics(K2KModel):
    """Metric name prefixes and the metrics topic of the Offset Mapping app."""

    prefix: AppMetricPrefixes = Field(
        default_factory=AppMetricPrefixes, description="Metric name prefixes."
    )
    kafka: MetricsKafka = Field(default_factory=MetricsKafka, description="The metrics topic.")
