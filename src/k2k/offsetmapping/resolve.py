"""Exact offsets inside runs whose target offsets are not contiguous.

Exactly-once, a runner commits one batch while it writes the next (two transactional
producers in turn), so the commit marker of the previous transaction can land inside a run
of the next one: the run then spans one more target offset than it has records, and the
mapping alone only gives a lower bound for a position inside it. The target itself knows:
reading the run's target offsets back, a consumer sees exactly ``count`` records (markers
are never delivered), and the k-th is where the k-th source record went. When another
writer's records are in the range too (more than ``count`` records), the lower bound stays.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping

from confluent_kafka import KafkaError, TopicPartition

from k2k.kafka.factory import build_consumer
from k2k.offsetmapping.index import Span, Translation

__all__ = ["RunReader"]

#: Runs whose record offsets are kept (a pass asks again for the same runs).
_CACHED_RUNS = 1024


class RunReader:
    """Reads the target offsets of interleaved runs (``read_committed``), caching them."""

    def __init__(self, consumer_conf: Mapping[str, str], timeout_s: float) -> None:
        conf = {
            **consumer_conf,
            "group.id": "k2k-offset-mapping-runs",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
        }
        self._consumer = build_consumer(conf)
        self._timeout_s = timeout_s
        self._offsets: OrderedDict[Span, list[int] | None] = OrderedDict()

    def resolve(self, found: Translation, position: int) -> Translation:
        """``found`` made exact when the target shows where record ``position`` went."""
        span = found.span
        k = position - span.first
        if found.exact or not 0 < k < span.count:
            return found
        offsets = self._record_offsets(span)
        if offsets is None:
            return found
        return Translation(found.target, offsets[k], True, span)

    def close(self) -> None:
        self._consumer.close()

    def _record_offsets(self, span: Span) -> list[int] | None:
        if span in self._offsets:
            self._offsets.move_to_end(span)
            return self._offsets[span]
        offsets = self._read(span)
        self._offsets[span] = offsets
        if len(self._offsets) > _CACHED_RUNS:
            self._offsets.popitem(last=False)
        return offsets

    def _read(self, span: Span) -> list[int] | None:
        """The offsets of the records in the run's target range, if exactly ``count``."""
        topic, partition = span.target
        self._consumer.assign([TopicPartition(topic, partition, span.t_first)])
        offsets: list[int] = []
        deadline = time.monotonic() + self._timeout_s
        try:
            while time.monotonic() < deadline:
                for m in self._consumer.consume(10_000, 0.2):
                    err, offset = m.error(), m.offset()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return _exact(offsets, span)
                        return None
                    if offset is None or offset > span.t_last:
                        return _exact(offsets, span)
                    offsets.append(offset)
                    if offset == span.t_last:
                        return _exact(offsets, span)
            return None
        finally:
            self._consumer.unassign()


def _exact(offsets: list[int], span: Span) -> list[int] | None:
    return offsets if len(offsets) == span.count else None
