"""The Offset Mapping app's instruments (docs/metrics.md), fed once per pass.

Runs on: the app's process (``k2k offset-mapping start -t``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, Observation

from k2k.kafka.admin import ClusterView
from k2k.metrics.kafka_exporter import kafka_exporter_factory
from k2k.metrics.telemetry import HistogramBounds, Telemetry
from k2k.observability.readiness import AppReadiness

if TYPE_CHECKING:
    from k2k.config.offset_mapping import OffsetMappingAppConfig
    from k2k.offsetmapping.app import PassReport

__all__ = ["AppMetrics", "app_metrics"]

_PASS_BOUNDS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class AppMetrics:
    """Runs on: the app's process. Counters of what passes did."""

    def __init__(
        self, telemetry: Telemetry, prefix: str, app: str, readiness: AppReadiness | None = None
    ) -> None:
        self.telemetry = telemetry
        self.readiness = readiness
        self.attrs = {"app": app}
        self._last_pass: float | None = None
        m = telemetry.meter("k2k.offsetmapping")
        p = prefix
        self.passes = m.create_counter(p + "passes", "{pass}", "Passes completed")
        self.latency = m.create_histogram(
            p + "checkpoint.latency",
            "s",
            "From the first pass that saw a source group at a position to the commit of its "
            "translation on the target",
        )
        m.create_observable_gauge(
            p + "last.pass.timestamp",
            [self._last_pass_at],
            "s",
            "When the last pass ended (seconds since the epoch)",
        )
        self.pass_failures = m.create_counter(
            p + "pass.failures", "{pass}", "Passes that failed on an unreachable cluster"
        )
        self.duration = m.create_histogram(p + "pass.duration", "s", "Duration of a pass")
        self.counts = {
            "groups": m.create_counter(p + "groups", "{group}", "Groups read, summed per pass"),
            "translated": m.create_counter(
                p + "partitions.translated", "{partition}", "Group partitions translated"
            ),
            "committed": m.create_counter(
                p + "commits", "{partition}", "Translated positions committed on the target"
            ),
            "kept_by_guard": m.create_counter(
                p + "kept.by.guard", "{partition}", "Commits the guard kept (target moved on)"
            ),
            "inexact": m.create_counter(
                p + "lower.bounds", "{partition}", "Translations that are lower bounds"
            ),
            "untranslated": m.create_counter(
                p + "untranslated",
                "{partition}",
                "Group positions before the oldest mapping",
            ),
            "failures": m.create_counter(
                p + "group.failures", "{failure}", "Groups a pass could not translate"
            ),
        }

    def on_pass(self, report: PassReport) -> None:
        self.passes.add(1, self.attrs)
        self.duration.record(report.seconds, self.attrs)
        self._last_pass = time.time()
        for seconds in report.latencies:
            self.latency.record(seconds, self.attrs)
        if self.readiness is not None:
            self.readiness.passed()
        for name, counter in self.counts.items():
            value = getattr(report, name)
            n = len(value) if isinstance(value, list) else value
            if n:
                counter.add(n, self.attrs)

    def pass_failed(self) -> None:
        self.pass_failures.add(1, self.attrs)
        if self.readiness is not None:
            self.readiness.pass_failed("the last pass failed on an unreachable cluster")

    def _last_pass_at(self, _options: CallbackOptions) -> Iterable[Observation]:
        if self._last_pass is not None:
            yield Observation(self._last_pass, self.attrs)

    def close(self) -> None:
        self.telemetry.close()


def app_metrics(cfg: OffsetMappingAppConfig, target: ClusterView, *, instance: str) -> AppMetrics:
    """The provider with the exporters ``OTEL_METRICS_EXPORTER`` names, and the app's
    instruments on it; ``/readyz`` is ready while the last pass is at most three intervals
    old."""
    prefix = cfg.metrics.prefix.offset_mapping_app
    readiness = AppReadiness(3 * cfg.groups.poll_interval.total_seconds() + 30)

    telemetry = Telemetry(
        instance=instance,
        attributes={"k2k.app": cfg.name},
        histograms=[
            HistogramBounds(prefix + "pass.duration", _PASS_BOUNDS_S),
            HistogramBounds(prefix + "checkpoint.latency", _PASS_BOUNDS_S),
        ],
        kafka_exporter=kafka_exporter_factory(cfg, target, instance),
        health=readiness.check,
    )
    return AppMetrics(telemetry, prefix, cfg.name, readiness)
