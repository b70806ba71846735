"""The gauges read from the planner's view when an exporter collects: lag, positions, how
close lag is to loss and when it will be gone, readiness and members (docs/metrics.md).

Runs on: driver, in the exporters' threads (a scrape, a push), while the planner updates
what they read: every read takes copies, and one snapshot of lag, ages and retention serves
every gauge of one collection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from k2k.kafka import TP
from k2k.metrics.lag import OldestUnreplicated
from k2k.metrics.progress import CatchUp, Retention, lag_share_of_retention, recovery_point
from k2k.metrics.retention import TopicRetention
from k2k.observability.readiness import PipelineReadiness

if TYPE_CHECKING:
    from k2k.observability.stats import PipelineStats

__all__ = ["PipelineGauges"]


class PipelineGauges:
    """Runs on: driver. ``volume`` is fed by the replicator's frames: records and bytes
    replicated per partition, which estimate the lag's size."""

    def __init__(
        self,
        pipeline: str,
        stats: PipelineStats,
        *,
        ages: OldestUnreplicated | None,
        retention: TopicRetention | None = None,
        readiness: PipelineReadiness | None = None,
        members_alive: Callable[[], int] | None = None,
        identical: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.stats = stats
        self.ages = ages
        self.retention = retention
        self.readiness = readiness
        self.members_alive = members_alive
        self.identical = identical
        self.volume: dict[TP, list[int]] = {}
        self._lock = threading.Lock()
        self._catch_up = CatchUp()
        self._seen = _Snapshot(0.0, {}, {}, {})

    def count(self, tp: TP, records: int, size: int) -> None:
        """Records and key+value bytes replicated from ``tp`` (the frames' thread)."""
        volume = self.volume.setdefault(tp, [0, 0])
        volume[0] += records
        volume[1] += size

    def close(self) -> None:
        if self.ages is not None:
            self.ages.close()
        if self.retention is not None:
            self.retention.close()

    def register(self, m: Meter, p: str) -> None:
        """The gauges on ``m``, their names prefixed with ``p``."""
        self._lag_gauges(m, p)
        self._health_gauges(m, p)

    def _lag_gauges(self, m: Meter, p: str) -> None:
        """Lag and positions per owned partition."""
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

    def _health_gauges(self, m: Meter, p: str) -> None:
        """How close lag is to loss, when it will be gone, and whether all is well."""
        m.create_observable_gauge(
            p + "replication.lag.retention.ratio",
            [self._retention_share],
            "1",
            "Lag as a share of the source's retention, per partition: the larger of its age "
            "over retention.ms and its size over retention.bytes (1: due for deletion)",
        )
        m.create_observable_gauge(
            p + "replication.catchup.time",
            [self._catch_up_time],
            "s",
            "Time to close the lag at the rate it shrank over the last minute (absent when "
            "not catching up)",
        )
        m.create_observable_gauge(
            p + "replication.recovery.point",
            [self._recovery_point],
            "s",
            "Seconds of source data not yet committed on the target (0 when caught up)",
        )
        if self.readiness is not None:
            m.create_observable_gauge(
                p + "ready", [self._ready], "1", "1 while /readyz answers ready, else 0"
            )
        m.create_observable_gauge(
            p + "members.alive",
            [self._members],
            "{member}",
            "Members of the commit group alive, as this instance sees them",
        )

    def _snapshot(self) -> _Snapshot:
        """Lag, ages and retention of the owned partitions, computed once per collection
        (every gauge of one scrape reads the same snapshot)."""
        now = time.time()
        with self._lock:
            seen = self._seen
            if now - seen.at < _SNAPSHOT_TTL_S:
                return seen
        lags = self.stats.lag_by_partition()
        ages = self.ages.oldest(dict(self.stats.committed), lags) if self.ages else {}
        topics = {t for t, _p in lags}
        limits = self.retention.of(topics) if self.retention is not None else {}
        seen = _Snapshot(now, lags, ages, limits)
        with self._lock:
            self._seen = seen
        return seen

    def _lag_records(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (topic, partition), lag in self._snapshot().lags.items():
            yield Observation(lag, self._tp(topic, partition))

    def _lag_seconds(self, _options: CallbackOptions) -> Iterable[Observation]:
        snap = self._snapshot()
        for (topic, partition), lag in snap.lags.items():
            age = snap.ages.get((topic, partition))
            if lag == 0:
                yield Observation(0.0, self._tp(topic, partition))
            elif age is not None:
                yield Observation(age, self._tp(topic, partition))

    def _retention_share(self, _options: CallbackOptions) -> Iterable[Observation]:
        snap = self._snapshot()
        for (topic, partition), lag in snap.lags.items():
            limit = snap.limits.get(topic)
            if limit is None:
                continue
            age = snap.ages.get((topic, partition)) if lag else 0.0
            if age is None:
                continue  # not read yet, or deleted already: 0 would read as safe
            size = self._mean_record_bytes(topic, partition)
            share = lag_share_of_retention(age, lag * size if size is not None else None, limit)
            yield Observation(share, self._tp(topic, partition))

    def _catch_up_time(self, _options: CallbackOptions) -> Iterable[Observation]:
        snap = self._snapshot()
        with self._lock:
            eta = self._catch_up.observe(snap.at, sum(snap.lags.values()))
        if eta is not None:
            yield Observation(eta, self._base)

    def _recovery_point(self, _options: CallbackOptions) -> Iterable[Observation]:
        snap = self._snapshot()
        point = recovery_point(snap.ages, snap.lags)
        if point is not None:
            yield Observation(point, self._base)

    def _ready(self, _options: CallbackOptions) -> Iterable[Observation]:
        if self.readiness is not None:
            yield Observation(1 if self.readiness.check().ready else 0, self._base)

    def _members(self, _options: CallbackOptions) -> Iterable[Observation]:
        if self.members_alive is not None:
            try:
                alive = self.members_alive()
            except RuntimeError:  # the planner's thread changed the view meanwhile
                return
            yield Observation(alive, self._base)

    def _mean_record_bytes(self, topic: str, partition: int) -> float | None:
        """Key and value bytes per record replicated from the partition so far (None
        before the first): the lag's size is estimated with it."""
        totals = self.volume.get((topic, partition))
        if not totals or not totals[0]:
            return None
        return totals[1] / totals[0]

    def _committed(self, _options: CallbackOptions) -> Iterable[Observation]:
        owned = self._snapshot().lags
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
        yield Observation(len(self._snapshot().lags), self._base)

    @property
    def _base(self) -> dict[str, str]:
        return {"pipeline": self.pipeline}

    def _tp(self, topic: str, partition: int) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "topic": topic, "partition": partition}


#: How long one collection's snapshot serves the gauges.
_SNAPSHOT_TTL_S = 1.0


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """One collection's view: when, lag per partition, ages (s) of the lagging ones, and
    the retention of their topics."""

    at: float
    lags: dict[TP, int]
    ages: dict[TP, float]
    limits: dict[str, Retention]
