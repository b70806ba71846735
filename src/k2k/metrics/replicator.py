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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from k2k.config import PipelineConfig
from k2k.kafka.admin import ClusterView
from k2k.metrics.frames import (
    COMMIT_BOUNDS_S,
    LATENCY_BOUNDS_S,
    FrameDelta,
    FrameDeltas,
    RunnerFrame,
)
from k2k.metrics.kafka_exporter import kafka_exporter_factory
from k2k.metrics.lag import OldestUnreplicated
from k2k.metrics.telemetry import HistogramBounds, Telemetry

if TYPE_CHECKING:
    from k2k.observability.stats import PipelineStats
    from k2k.pipeline.plan import RunnerSummary

__all__ = ["ReplicatorMetrics", "replicator_histograms", "replicator_metrics"]


def replicator_histograms(prefix: str) -> list[HistogramBounds]:
    """The histogram bucket bounds, which must equal the runners' (k2k.metrics.frames)."""
    return [
        HistogramBounds(prefix + "replication.latency", LATENCY_BOUNDS_S),
        HistogramBounds(prefix + "commit.duration", COMMIT_BOUNDS_S),
    ]


class ReplicatorMetrics:
    """Runs on: driver. The instruments of one pipeline on ``telemetry``'s provider."""

    def __init__(
        self,
        telemetry: Telemetry,
        *,
        prefix: str,
        pipeline: str,
        mode: str,
        stats: PipelineStats,
        ages: OldestUnreplicated | None,
        identical: bool = False,
    ) -> None:
        self.telemetry = telemetry
        self.identical = identical
        self.pipeline = pipeline
        self.mode = mode
        self.stats = stats
        self.ages = ages
        self._lock = threading.Lock()
        self._deltas = FrameDeltas()
        meter = telemetry.meter("k2k.replicator")
        self._copy_instruments(meter, prefix)
        self._event_counters(meter, prefix)
        self._gauges(meter, prefix)

    def _copy_instruments(self, m: Meter, p: str) -> None:
        """What the runners' frames move: records, bytes, latency and commits."""
        self.records = m.create_counter(
            p + "replication.records", "{record}", "Records replicated (acknowledged by the target)"
        )
        self.bytes = m.create_counter(
            p + "replication.bytes", "By", "Key and value bytes of the records replicated"
        )
        self.latency = m.create_histogram(
            p + "replication.latency",
            "s",
            "Source record timestamp to target acknowledgement, one observation per run",
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

    def _gauges(self, m: Meter, p: str) -> None:
        """What an exporter reads from the planner's view when it collects."""
        m.create_observable_gauge(
            p + "replication.lag.records",
            [self._lag_records],
            "{record}",
            "Records on the source not yet replicated, per owned partition",
        )
        m.create_observable_gauge(
            p + "replication.lag.seconds",
            [self._lag_seconds],
            "s",
            "Age of the oldest record not yet replicated (0 when caught up)",
        )
        m.create_observable_gauge(
            p + "replication.committed.offset",
            [self._committed],
            "{offset}",
            "Committed source offset (the next to replicate), per owned partition",
        )
        m.create_observable_gauge(
            p + "partitions.owned", [self._owned], "{partition}", "Partitions this instance copies"
        )
        if self.identical:
            m.create_observable_gauge(
                p + "partitions.not_identical",
                [self._not_identical],
                "{partition}",
                "offsets: identical: partitions whose identity ended (onOffsetGap: map)",
            )
            m.create_observable_gauge(
                p + "replication.identity.ended.offset",
                [self._identity_ended],
                "{offset}",
                "offsets: identical: the source offset where a partition's identity ended",
            )

    # -- from runners --------------------------------------------------------------------

    def on_frame(self, raw: bytes) -> None:
        """A runner's frame from the lease channel (a server thread)."""
        try:
            frame = RunnerFrame.decode(raw)
        except (ValueError, KeyError, TypeError):
            return  # a malformed frame loses metrics, never replication
        if frame is not None:
            with self._lock:
                delta = self._deltas.delta(frame)
            if delta is not None:
                self._apply(delta)

    def lease_ended(self, lease: int, summaries: Iterable[RunnerSummary], fencings: int) -> None:
        """The lease's summaries: their last frames, faults and stand-downs."""
        for s in summaries:
            if s.metrics:
                self.on_frame(s.metrics)
            for o in s.partitions:
                if o.lost:
                    self.lost(o.topic, o.partition, o.lost, "retention")
            if s.fenced:
                self.fencings_suffered.add(1, self._base)
            if s.error:
                self.errors.add(1, {**self._base, "class": s.error_class or "Unknown"})
            if s.skipped:
                self.skipped.add(s.skipped, self._base)
            if s.filtered:
                self.transformed.add(s.filtered, {**self._base, "outcome": "filtered"})
            if s.transform_failed:
                self.transformed.add(s.transform_failed, {**self._base, "outcome": "failed"})
            if s.schemas_registered:
                self.schemas_registered.add(s.schemas_registered, self._base)
        with self._lock:
            self._deltas.lease_ended(lease)
        if fencings:
            self.fencings_done.add(fencings, self._base)

    def lost(self, topic: str, partition: int, records: int, reason: str) -> None:
        """Records of ``topic[partition]`` jumped over: deleted by ``retention``, or with
        their ``deleted-topic``."""
        self.records_lost.add(records, {**self._tp(topic, partition), "reason": reason})

    def lease_started(self) -> None:
        self.leases.add(1, self._base)

    def failed(self, exc: BaseException) -> None:
        """The pipeline itself failed (counted before the last export)."""
        self.errors.add(1, {**self._base, "class": type(exc).__name__})

    def close(self) -> None:
        """Export once more (push exporters) and stop the exporters."""
        if self.ages is not None:
            self.ages.close()
        self.telemetry.close()

    @property
    def _base(self) -> dict[str, str]:
        return {"pipeline": self.pipeline}

    def _apply(self, delta: FrameDelta) -> None:
        for (topic, partition), (records, size, latency) in delta.partitions.items():
            attrs: dict[str, Any] = {
                "pipeline": self.pipeline,
                "topic": topic,
                "partition": partition,
            }
            if records:
                self.records.add(records, attrs)
            if size:
                self.bytes.add(size, attrs)
            _replay(self.latency, latency, attrs)
        for (topic, partition), found in delta.foreign.items():
            self.foreign.add(found, self._tp(topic, partition))
        mode = {"pipeline": self.pipeline, "mode": self.mode}
        _replay(self.commit_duration, delta.commits, mode)
        if delta.commit_failures:
            self.commit_failures.add(delta.commit_failures, mode)

    # -- gauges --------------------------------------------------------------------------

    def _lag_records(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (topic, partition), lag in self.stats.lag_by_partition().items():
            yield Observation(lag, self._tp(topic, partition))

    def _lag_seconds(self, _options: CallbackOptions) -> Iterable[Observation]:
        lags = self.stats.lag_by_partition()
        oldest = self.ages.oldest(dict(self.stats.committed), lags) if self.ages else {}
        now = time.time()
        for (topic, partition), lag in lags.items():
            ts = oldest.get((topic, partition))
            if lag == 0:
                yield Observation(0.0, self._tp(topic, partition))
            elif ts is not None:
                yield Observation(max(0.0, now - ts / 1000), self._tp(topic, partition))

    def _committed(self, _options: CallbackOptions) -> Iterable[Observation]:
        owned = self.stats.lag_by_partition()
        committed = dict(self.stats.committed)
        for topic, partition in owned:
            if (topic, partition) in committed:
                yield Observation(committed[(topic, partition)], self._tp(topic, partition))

    def _not_identical(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.stats.planning.mapped_from), self._base)

    def _identity_ended(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (topic, partition), offset in dict(self.stats.planning.mapped_from).items():
            yield Observation(offset, self._tp(topic, partition))

    def _owned(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.stats.lag_by_partition()), self._base)

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
    target: ClusterView,
    *,
    status_snapshot: Callable[[], dict[str, Any]] | None = None,
) -> ReplicatorMetrics:
    """Runs on: driver, once per ``k2k start -t``. The provider with the exporters
    ``OTEL_METRICS_EXPORTER`` names, and the pipeline's instruments on it; the status page
    reads ``status_snapshot`` while it is viewed."""
    from k2k.observability.http.feed import StatusFeed

    prefix = cfg.metrics.prefix.replicator
    feed = None
    if status_snapshot is not None:
        feed = StatusFeed(status_snapshot, source="live", pipeline=cfg.name)

    telemetry = Telemetry(
        instance=member,
        attributes={"k2k.pipeline": cfg.name},
        histograms=replicator_histograms(prefix),
        kafka_exporter=kafka_exporter_factory(cfg, target, member),
        status=feed,
    )
    ages = OldestUnreplicated(
        cfg.source_client("consumer"), f"k2k.{cfg.name}", cfg.source.connect_timeout.total_seconds()
    )
    return ReplicatorMetrics(
        telemetry,
        prefix=prefix,
        pipeline=cfg.name,
        mode="exactly-once" if cfg.features.exactly_once else "at-least-once",
        stats=stats,
        ages=ages,
        identical=cfg.replication.sink.offsets.identical,
    )
