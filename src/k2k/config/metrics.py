"""The ``metrics:`` block: metric-name prefixes and the metrics topic (docs/metrics.md).

Shared by the replicator and the Offset Mapping app; which exporters run is not here but in
the standard ``OTEL_*`` environment variables, read when ``-t/--telemetry`` is given.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import Field

from k2k.config.base import K2KModel
from k2k.config.fields import Duration, TopicName
from k2k.config.inert import Inert

__all__ = [
    "AppMetricPrefixes",
    "AppMetrics",
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
