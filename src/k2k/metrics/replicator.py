"""The replicator's instruments (docs/metrics.md), fed by runner frames and the planner.

Runs on: driver. Counters and histograms move by the increments of runner frames
(:class:`~k2k.metrics.frames.FrameDeltas`), which arrive from the lease channel's threads
and, last, with the runners' summaries; gauges (lag, committed offset, owned partitions)
are read from the planner's :class:`~k2k.observability.stats.PipelineStats` when an exporter
collects.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import Meter

from k2k.config import PipelineConfig
from k2k.kafka.admin import ClusterView
from k2k.metrics.clientstats import CONSUMER, PRODUCER, ClientMeters, Role
from k2k.metrics.frames import (
    AGE_BOUNDS_S,
    COMMIT_BOUNDS_S,
    LATENCY_BOUNDS_S,
    FrameDelta,
    FrameDeltas,
    RunnerFrame,
)
from k2k.metrics.health import PipelineGauges
from k2k.metrics.kafka_exporter import kafka_exporter_factory
from k2k.metrics.lag import OldestUnreplicated
from k2k.metrics.retention import TopicRetention
from k2k.metrics.telemetry import HistogramBounds, Telemetry
from k2k.observability.http.feed import StatusFeed
from k2k.observability.readiness import PipelineReadiness

if TYPE_CHECKING:
    from k2k.observability.stats import PipelineStats
    from k2k.pipeline.plan import RunnerSummary

__all__ = ["ReplicatorMetrics", "replicator_histograms", "replicator_metrics"]


def replicator_histograms(prefix: str) -> list[HistogramBounds]:
    """The histogram bucket bounds, which must equal the runners' (k2k.metrics.frames)."""
    return [
        HistogramBounds(prefix + "replication.latency", LATENCY_BOUNDS_S),
        HistogramBounds(prefix + "replication.record.age", AGE_BOUNDS_S),
        HistogramBounds(prefix + "commit.duration", COMMIT_BOUNDS_S),
    ]


class ReplicatorMetrics:
    """Runs on: driver. The instruments of one pipeline on ``telemetry``'s provider."""

    def __init__(
        self,
        telemetry: Telemetry,
        gauges: PipelineGauges,
        *,
        prefix: str,
        mode: str,
        recent_errors: deque[tuple[float, str, str]] | None = None,
        client_prefixes: Mapping[Role, str] | None = None,
        feed: StatusFeed | None = None,
    ) -> None:
        """``gauges``: what collections read from the planner's view; ``client_prefixes``:
        the client statistics' name prefixes, when they are on; ``feed``: the status page's,
        closed with the metrics."""
        self.telemetry = telemetry
        self.gauges = gauges
        self.pipeline = gauges.pipeline
        self.mode = mode
        self.readiness = gauges.readiness
        self.feed = feed
        #: The newest faults, for the status page: (epoch s, class, first line).
        self.recent_errors = deque(maxlen=20) if recent_errors is None else recent_errors
        self._lock = threading.Lock()
        self._deltas = FrameDeltas()
        meter = telemetry.meter("k2k.replicator")
        self._copy_instruments(meter, prefix)
        self._event_counters(meter, prefix)
        gauges.register(meter, prefix)
        self.clients = (
            ClientMeters(meter, client_prefixes, self.pipeline)
            if client_prefixes is not None
            else None
        )

    def _copy_instruments(self, m: Meter, p: str) -> None:
        """What the runners' frames move: records, bytes, latency and commits."""
        self.records = m.create_counter(
            p + "replication.records",
            "{record}",
            "Deprecated (removed in the next release): messaging.client.sent.messages. Records "
            "replicated (acknowledged by the target)",
        )
        self.bytes = m.create_counter(
            p + "replication.bytes",
            "By",
            "Bytes of the records replicated, by `part`: key or value (as read from the source)",
        )
        self.latency = m.create_histogram(
            p + "replication.latency",
            "s",
            "Source record timestamp to target acknowledgement, one observation per run",
        )
        self.record_age = m.create_histogram(
            p + "replication.record.age",
            "s",
            "Age of a record when the runner read it (source timestamp to read), one "
            "observation per run",
        )
        # The OpenTelemetry messaging conventions' names: no k2k prefix.
        self.sent = m.create_counter(
            "messaging.client.sent.messages",
            "{message}",
            "Records sent to (and acknowledged by) the target",
        )
        self.consumed = m.create_counter(
            "messaging.client.consumed.messages",
            "{message}",
            "Records read from the source and done with: replicated or left out",
        )
        self.commit_duration = m.create_histogram(
            p + "commit.duration",
            "s",
            "Commit point to committed progress (exactly-once: the transaction commit)",
        )
        self.commit_failures = m.create_counter(
            p + "commit.failures", "{failure}", "Commits that failed (the lease's batch is redone)"
        )

    def _event_counters(self, m: Meter, p: str) -> None:
        """What the planner counts per lease: leases, fencings, faults, records not copied."""
        self.leases = m.create_counter(p + "leases", "{lease}", "Leases started by this instance")
        self.fencings_done = m.create_counter(
            p + "fencings.done", "{fencing}", "Transactional ids of previous owners fenced"
        )
        self.fencings_suffered = m.create_counter(
            p + "fencings.suffered", "{fencing}", "Runners that stood down for another owner"
        )
        self.errors = m.create_counter(p + "errors", "{error}", "Runner and pipeline faults")
        self.skipped = m.create_counter(
            p + "bidirectional.skipped",
            "{record}",
            "Source records the other direction wrote, not replicated back (counted per lease)",
        )
        self.transformed = m.create_counter(
            p + "transform.records",
            "{record}",
            "Source records replication[].transforms left out: `outcome` filtered (a filter "
            "dropped them) or failed (a step failed, onError: skip); counted per lease",
        )
        self.schemas_registered = m.create_counter(
            p + "schemas.registered",
            "{schema}",
            "Schemas resolved on the target registry by schema mapping (counted per lease)",
        )
        self.foreign = m.create_counter(
            p + "foreign.records",
            "{record}",
            "Records on a replicated target partition that the pipeline did not write "
            "(errorHandling.onForeignWrites), per target topic and partition",
        )
        self.records_lost = m.create_counter(
            p + "source.records.lost",
            "{record}",
            "Source records deleted before they were replicated and jumped over "
            "(errorHandling.onSourceRecordsLost: continue)",
        )

    # -- from runners --------------------------------------------------------------------

    def on_frame(self, raw: bytes) -> None:
        """A runner's frame from the lease channel (a server thread)."""
        try:
            frame = RunnerFrame.decode(raw)
        except (ValueError, KeyError, TypeError):
            return  # a malformed frame loses metrics, never replication
        if frame is not None:
            if frame.clients and self.clients is not None:
                self.clients.on_frame(frame.runner, frame.lease, frame.seq, frame.clients)
            with self._lock:
                delta = self._deltas.delta(frame)
            if delta is not None:
                self._apply(delta)

    def lease_ended(self, lease: int, summaries: Iterable[RunnerSummary], fencings: int) -> None:
        """The lease's summaries: their last frames, faults and stand-downs."""
        for s in summaries:
            self._summary(s)
        with self._lock:
            self._deltas.lease_ended(lease)
        self._clients_ended(lease)
        if fencings:
            self.fencings_done.add(fencings, self._base)

    def _summary(self, s: RunnerSummary) -> None:
        """One runner's last frame, and what it counted only in its summary."""
        if s.metrics:
            self.on_frame(s.metrics)
        for o in s.partitions:
            if o.lost:
                self.lost(o.topic, o.partition, o.lost, "retention")
        if s.fenced:
            self.fencings_suffered.add(1, self._base)
        if s.error:
            self._error(s.error_class or "Unknown", s.error)
        if s.skipped:
            self.skipped.add(s.skipped, self._base)
        if s.filtered:
            self.transformed.add(s.filtered, {**self._base, "outcome": "filtered"})
        if s.transform_failed:
            self.transformed.add(s.transform_failed, {**self._base, "outcome": "failed"})
        if s.schemas_registered:
            self.schemas_registered.add(s.schemas_registered, self._base)
        left_out = s.skipped + s.filtered + s.transform_failed
        if left_out:
            self.consumed.add(left_out, self._messaging("receive"))

    def _clients_ended(self, lease: int) -> None:
        """The lease's clients are gone: their gauges go (client statistics only)."""
        if self.clients is not None:
            self.clients.lease_ended(lease)

    def lost(self, topic: str, partition: int, records: int, reason: str) -> None:
        """Records of ``topic[partition]`` jumped over: deleted by ``retention``, or with
        their ``deleted-topic``."""
        self.records_lost.add(records, {**self._tp(topic, partition), "reason": reason})

    def lease_started(self) -> None:
        self.leases.add(1, self._base)
        if self.readiness is not None:
            self.readiness.lease_started()

    def failed(self, exc: BaseException) -> None:
        """The pipeline itself failed (counted before the last export)."""
        self._error(type(exc).__name__, str(exc))
        if self.readiness is not None:
            self.readiness.failed(exc)

    def _error(self, cls: str, message: str) -> None:
        self.errors.add(1, {**self._base, "class": cls})
        first = message.splitlines()[0] if message else ""
        self.recent_errors.append((time.time(), cls, first))

    def close(self) -> None:
        """Export once more (push exporters) and stop the exporters and the page's feed."""
        if self.feed is not None:
            self.feed.close()
        self.gauges.close()
        self.telemetry.close()

    @property
    def _base(self) -> dict[str, str]:
        return {"pipeline": self.pipeline}

    def _messaging(self, operation: str, **attrs: Any) -> dict[str, Any]:
        return {
            "messaging.system": "kafka",
            "messaging.operation.name": operation,
            **attrs,
            "pipeline": self.pipeline,
        }

    def _apply(self, delta: FrameDelta) -> None:
        for (topic, partition), d in delta.partitions.items():
            attrs = self._tp(topic, partition)
            self.gauges.count((topic, partition), d.records, d.key_bytes + d.value_bytes)
            if d.records:
                self.records.add(d.records, attrs)
                self.consumed.add(
                    d.records,
                    self._messaging(
                        "receive",
                        **{
                            "messaging.destination.name": topic,
                            "messaging.destination.partition.id": str(partition),
                        },
                    ),
                )
                target = {"messaging.destination.name": d.target} if d.target else {}
                self.sent.add(d.records, self._messaging("send", **target))
            if d.key_bytes:
                self.bytes.add(d.key_bytes, {**attrs, "part": "key"})
            if d.value_bytes:
                self.bytes.add(d.value_bytes, {**attrs, "part": "value"})
            _replay(self.latency, d.latency, attrs)
            _replay(self.record_age, d.age, attrs)
        for (topic, partition), found in delta.foreign.items():
            self.foreign.add(found, self._tp(topic, partition))
        mode = {"pipeline": self.pipeline, "mode": self.mode}
        _replay(self.commit_duration, delta.commits, mode)
        if delta.commit_failures:
            self.commit_failures.add(delta.commit_failures, mode)

    def _tp(self, topic: str, partition: int) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "topic": topic, "partition": partition}


def _replay(histogram: Any, buckets: list[tuple[int, float]], attrs: dict[str, Any]) -> None:
    """Record each bucket's mean as often as it was observed: the bucket counts and the sum
    match the runners' exactly (see k2k.metrics.frames)."""
    for count, total in buckets:
        if count > 0:
            mean = total / count
            for _ in range(count):
                histogram.record(mean, attrs)


def replicator_metrics(
    cfg: PipelineConfig,
    member: str,
    stats: PipelineStats,
    clusters: tuple[ClusterView, ClusterView],
    health: tuple[PipelineReadiness, Callable[[], int]],
    *,
    status_snapshot: Callable[[], dict[str, Any]] | None = None,
) -> ReplicatorMetrics:
    """Runs on: driver, once per ``k2k start -t``. The provider with the exporters
    ``OTEL_METRICS_EXPORTER`` names, and the pipeline's instruments on it; ``clusters``:
    the (source, target) views; ``health``: what ``/readyz`` answers, and the members
    alive; the status page reads ``status_snapshot`` while it is viewed."""
    prefix = cfg.metrics.prefix.replicator
    source, target = clusters
    readiness, members_alive = health
    errors: deque[tuple[float, str, str]] = deque(maxlen=20)
    feed = _status_feed(cfg.name, status_snapshot, readiness, errors)
    telemetry = Telemetry(
        instance=member,
        attributes={"k2k.pipeline": cfg.name},
        histograms=replicator_histograms(prefix),
        kafka_exporter=kafka_exporter_factory(cfg, target, member),
        health=readiness.check,
        status=feed,
    )
    gauges = PipelineGauges(
        cfg.name,
        stats,
        ages=OldestUnreplicated(
            cfg.source_client("consumer"),
            f"k2k.{cfg.name}",
            cfg.source.connect_timeout.total_seconds(),
        ),
        retention=TopicRetention(lambda topics: source.configs(topics, retry=False)),
        readiness=readiness,
        members_alive=members_alive,
        identical=cfg.replication.sink.offsets.identical,
    )
    return ReplicatorMetrics(
        telemetry,
        gauges,
        prefix=prefix,
        mode="exactly-once" if cfg.features.exactly_once else "at-least-once",
        recent_errors=errors,
        client_prefixes=_client_prefixes(cfg),
        feed=feed,
    )


def _status_feed(
    pipeline: str,
    snapshot: Callable[[], dict[str, Any]] | None,
    readiness: PipelineReadiness,
    errors: deque[tuple[float, str, str]],
) -> StatusFeed | None:
    """The live status page's feed: the pipeline's state read every
    :data:`LIVE_STATUS_INTERVAL_S` while viewed, with the run's readiness and faults."""
    if snapshot is None:
        return None
    return StatusFeed(
        snapshot,
        source="live",
        interval=LIVE_STATUS_INTERVAL_S,
        pipeline=pipeline,
        ready=readiness.check,
        errors=lambda: [{"at": t, "class": c, "message": m} for t, c, m in list(errors)],
    )


#: How often an open status page has the driver read the pipeline's state from the control
#: topics (each read is a few consumers' worth of work beside the copy: docs/benchmarks.md).
LIVE_STATUS_INTERVAL_S = 5.0


def _client_prefixes(cfg: PipelineConfig) -> dict[Role, str] | None:
    """The client statistics' prefixes; None when they are off."""
    if not cfg.metrics.client_statistics.enabled:
        return None
    return {
        CONSUMER: cfg.metrics.prefix.source_consumer,
        PRODUCER: cfg.metrics.prefix.target_producer,
    }
