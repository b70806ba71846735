"""The MeterProvider of one k2k process and the exporters ``OTEL_*`` variables choose.

Runs on: driver (``k2k start -t``) or the Offset Mapping app (``k2k offset-mapping start
-t``). ``OTEL_METRICS_EXPORTER`` is a comma list of ``prometheus`` (k2k's default: a
``/metrics`` endpoint on ``OTEL_EXPORTER_PROMETHEUS_HOST``:``OTEL_EXPORTER_PROMETHEUS_PORT``,
default 127.0.0.1:9464, served by :class:`~k2k.observability.http.server.StatusServer` with
``/healthz``, ``/readyz`` and the status page beside it), ``otlp`` (the SDK's OTLP exporter reads the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console``, ``kafka`` (the metrics topic) and ``none``.
Push exporters run every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (SDK default 60000).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from k2k.errors import ConfigError, K2KError
from k2k.observability.http.server import StatusServer, always_ready
from k2k.observability.readiness import Health

__all__ = ["EXPORTERS", "Telemetry", "check_environment", "exporter_names"]

log = logging.getLogger("k2k.metrics")

EXPORTERS = ("prometheus", "otlp", "console", "kafka", "none")
_DEFAULT_EXPORTER = "prometheus"
_DEFAULT_PROMETHEUS = ("127.0.0.1", 9464)


def exporter_names(env: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_METRICS_EXPORTER`` names (``none`` alone: none).

    >>> exporter_names({"OTEL_METRICS_EXPORTER": "prometheus, kafka"})
    ['prometheus', 'kafka']
    >>> exporter_names({})
    ['prometheus']
    >>> exporter_names({"OTEL_METRICS_EXPORTER": "prom"})
    Traceback (most recent call last):
    ...
    k2k.errors.ConfigError: OTEL_METRICS_EXPORTER: unknown exporter 'prom'; expected a comma \
list of prometheus, otlp, console, kafka, none
    """
    raw = env.get("OTEL_METRICS_EXPORTER", "").strip() or _DEFAULT_EXPORTER
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    for name in names:
        if name not in EXPORTERS:
            raise ConfigError(
                f"OTEL_METRICS_EXPORTER: unknown exporter {name!r}; expected a comma list of "
                + ", ".join(EXPORTERS)
            )
    return list(dict.fromkeys(n for n in names if n != "none"))


def prometheus_address(env: Mapping[str, str]) -> tuple[str, int]:
    """Where ``/metrics`` listens.

    >>> prometheus_address({"OTEL_EXPORTER_PROMETHEUS_PORT": "9091"})
    ('127.0.0.1', 9091)
    >>> prometheus_address({"OTEL_EXPORTER_PROMETHEUS_PORT": "x"})
    Traceback (most recent call last):
    ...
    k2k.errors.ConfigError: OTEL_EXPORTER_PROMETHEUS_PORT: not a port, got 'x'; expected 0 to 65535
    """
    host = env.get("OTEL_EXPORTER_PROMETHEUS_HOST", "").strip() or _DEFAULT_PROMETHEUS[0]
    raw = env.get("OTEL_EXPORTER_PROMETHEUS_PORT", "").strip() or str(_DEFAULT_PROMETHEUS[1])
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigError(
            f"OTEL_EXPORTER_PROMETHEUS_PORT: not a port, got {raw!r}; expected 0 to 65535"
        )
    return host, int(raw)


def check_environment(env: Mapping[str, str]) -> None:
    """Refuse bad ``OTEL_*`` values before anything connects (one-line errors, exit 2)."""
    names = exporter_names(env)
    if "prometheus" in names:
        prometheus_address(env)
    if "otlp" in names:
        _otlp_protocol(env)


@dataclass(frozen=True)
class HistogramBounds:
    """Explicit bucket bounds of one histogram instrument (matched by its full name)."""

    name: str
    bounds: Sequence[float]


class Telemetry:
    """Runs on: driver. The process's MeterProvider with the chosen readers; ``close()``
    exports once more (push exporters) and stops the ``/metrics`` endpoint.

    ``health`` and ``status`` feed ``/readyz`` and the status page of the ``prometheus``
    exporter's server (``server.attach(...)`` replaces them later); without them the process
    is always ready ("no readiness source") and has no ``/api/status``.
    """

    def __init__(
        self,
        *,
        instance: str,
        attributes: Mapping[str, str],
        histograms: Sequence[HistogramBounds] = (),
        kafka_exporter: Callable[[], MetricExporter] | None = None,
        env: Mapping[str, str] | None = None,
        health: Callable[[], Health] | None = None,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        names = exporter_names(env)
        self._health = health or always_ready
        self._status = status
        self.server: StatusServer | None = None
        self.prometheus: tuple[str, int] | None = None
        readers = [self._reader(name, env, kafka_exporter) for name in names]
        resource_attributes: dict[str, str] = {"service.instance.id": instance, **attributes}
        if not env.get("OTEL_SERVICE_NAME"):
            resource_attributes["service.name"] = "k2k"
        views = [
            View(instrument_name=h.name, aggregation=ExplicitBucketHistogramAggregation(h.bounds))
            for h in histograms
        ]
        self.provider = MeterProvider(
            metric_readers=readers, resource=Resource.create(resource_attributes), views=views
        )
        self.exporters = names

    def _reader(
        self,
        name: str,
        env: Mapping[str, str],
        kafka_exporter: Callable[[], MetricExporter] | None,
    ) -> MetricReader:
        if name == "prometheus":
            return self._prometheus(env)
        if name == "otlp":
            return PeriodicExportingMetricReader(_otlp_exporter(env))
        if name == "console":
            return PeriodicExportingMetricReader(ConsoleMetricExporter())
        if kafka_exporter is None:
            raise ConfigError("OTEL_METRICS_EXPORTER: kafka is not available in this command")
        return PeriodicExportingMetricReader(kafka_exporter())

    def _prometheus(self, env: Mapping[str, str]) -> MetricReader:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import make_wsgi_app

        host, port = prometheus_address(env)
        reader = PrometheusMetricReader()
        try:
            self.server = StatusServer(
                host, port, metrics_app=make_wsgi_app(), health=self._health, status=self._status
            )
        except OSError as exc:
            raise K2KError(
                f"metrics: cannot serve /metrics on {host}:{port}: {exc.strerror or exc}; set "
                "OTEL_EXPORTER_PROMETHEUS_HOST/OTEL_EXPORTER_PROMETHEUS_PORT to a free address"
            ) from None
        self.prometheus = self.server.address
        log.info("metrics: serving /metrics on http://%s:%d/metrics", host, self.prometheus[1])
        return reader

    def meter(self, name: str) -> Any:
        return self.provider.get_meter(name)

    def close(self) -> None:
        """Export what is left and stop the readers (best effort: never hides the error
        that ended the run)."""
        try:
            self.provider.shutdown(timeout_millis=10_000)
        except Exception as exc:  # the SDK raises assorted errors from exporters
            log.warning("metrics: shutdown: %s", exc)
        if self.server is not None:
            self.server.close()
            self.server = None


def _otlp_exporter(env: Mapping[str, str]) -> MetricExporter:
    """The OTLP exporter of ``OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL`` (http/protobuf)."""
    protocol = _otlp_protocol(env)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    try:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found]
            OTLPMetricExporter as GrpcExporter,
        )
    except ImportError:
        raise ConfigError(
            "OTEL_EXPORTER_OTLP_PROTOCOL: grpc needs the package "
            "opentelemetry-exporter-otlp-proto-grpc; expected http/protobuf, or install it"
        ) from None
    exporter: MetricExporter = GrpcExporter()
    return exporter


def _otlp_protocol(env: Mapping[str, str]) -> str:
    """``http/protobuf`` (the default) or ``grpc``.

    >>> _otlp_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    Traceback (most recent call last):
    ...
    k2k.errors.ConfigError: OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol 'http/json'; \
expected http/protobuf or grpc
    """
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol not in ("http/protobuf", "grpc"):
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol {protocol!r}; expected "
            "http/protobuf or grpc"
        )
    return protocol
