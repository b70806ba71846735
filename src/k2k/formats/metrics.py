"""Metrics records of the metrics topic (``metrics.kafka.topic``, default ``__k2k-metrics``).

Written by the ``kafka`` exporter (``OTEL_METRICS_EXPORTER=kafka``): one record per metric
per export, keyed by the process and the metric so that one metric's records of one process
stay in order on one partition. The topic is not compacted; retention trims it.

>>> rec = MetricsRecord(service="k2k", instance="h-1", pipeline="dr",
...     metric="k2k.replication.records", unit="{record}", kind="sum",
...     points=({"attributes": {"topic": "t", "partition": 0}, "value": 5},), time_ms=1)
>>> key, value = rec.encode()
>>> key
b'{"instance":"h-1","k":1,"metric":"k2k.replication.records","pipeline":"dr","service":"k2k"}'
>>> MetricsRecord.decode(key, value, "__k2k-metrics", 0, 3) == rec
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k2k.formats.codec import check_version, dumps_canonical, load_object, locator

__all__ = ["MetricsRecord"]

_ADVICE = "the record was written by a newer k2k; upgrade this reader"


@dataclass(frozen=True)
class MetricsRecord:
    """One metric's data points at one export.

    ``kind`` is ``sum`` (monotonic counter), ``gauge`` or ``histogram``. A sum or gauge point
    is ``{"attributes", "value"}``; a histogram point is ``{"attributes", "count", "sum",
    "bounds", "counts"}`` (``counts`` has one more entry than ``bounds``: the last is +Inf).
    Sums and histograms are cumulative since ``start_ms`` (the process start).
    """

    KEY_VERSION = 1
    VERSION = 1

    service: str
    instance: str
    pipeline: str
    metric: str
    unit: str
    kind: str
    points: tuple[dict[str, Any], ...]
    time_ms: int
    start_ms: int = 0
    description: str = ""

    def encode(self) -> tuple[bytes, bytes]:
        key = {
            "k": self.KEY_VERSION,
            "service": self.service,
            "instance": self.instance,
            "pipeline": self.pipeline,
            "metric": self.metric,
        }
        value = {
            "v": self.VERSION,
            "unit": self.unit,
            "kind": self.kind,
            "description": self.description,
            "time": self.time_ms,
            "start": self.start_ms,
            "points": list(self.points),
        }
        return dumps_canonical(key), dumps_canonical(value)

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> MetricsRecord:
        where = locator(topic, partition, offset)
        k = load_object(key, "key", where)
        v = load_object(value, "value", where)
        check_version(k.get("k"), cls.KEY_VERSION, "metrics key", where, _ADVICE)
        check_version(v.get("v"), cls.VERSION, "metrics value", where, _ADVICE)
        return cls(
            service=k["service"],
            instance=k["instance"],
            pipeline=k["pipeline"],
            metric=k["metric"],
            unit=v["unit"],
            kind=v["kind"],
            points=tuple(v["points"]),
            time_ms=v["time"],
            start_ms=v["start"],
            description=v["description"],
        )
