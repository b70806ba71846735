"""Metrics through OpenTelemetry (``-t/--telemetry``; docs/metrics.md).

Runners count on the executors (:mod:`k2k.metrics.tally`) and send their running totals to
the driver over the lease channel (:mod:`k2k.metrics.frames`), never per record. The driver
owns the MeterProvider, its instruments (:mod:`k2k.metrics.replicator`) and the exporters
chosen by ``OTEL_METRICS_EXPORTER`` (:mod:`k2k.metrics.telemetry`).
"""
