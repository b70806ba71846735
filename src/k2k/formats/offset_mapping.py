"""Offset-mapping records: where a run of source records landed on the target.

One record per *run*: ``count`` consecutive replicated records of one source partition, at
source offsets ``offset`` to ``offset + count - 1`` with no gap, written to one target
partition from ``targetOffset``. ``from`` (at most ``offset``) is where the runner's read of
the partition stood before the run: the source offsets in ``[from, offset)`` hold nothing
that is replicated (transaction markers, aborted or compacted records), so a consumer
position among them translates to the run's first target offset. ``targetLast`` is the
target offset of the run's last record: ``targetOffset + count - 1`` unless another writer's
records landed in between, in which case the run is *interleaved* and offsets inside it
translate to a lower bound (re-read, never skipped).

Every run of one (pipeline, source topic, source partition) goes to the same partition of
the mapping topic (murmur2 of the canonical JSON ``{"partition":P,"pipeline":"NAME",
"topic":"T"}``, as Kafka's default partitioner), so their order there is the order they were
written: a later run that overlaps an earlier one (at-least-once, re-copied after a crash)
replaces it. ``docs/formats.md`` describes the same fields for other tools.

>>> run = OffsetMappingRecord("dr", "orders", 3, 40, 42, 10, "dr.orders", 3, 1007, 1016,
...                           1700000000000)
>>> run
OffsetMappingRecord(dr: orders[3]@42..51 (from 40) -> dr.orders[3]@1007..1016)
>>> run.encode()[0]
b'{"k":1,"offset":42,"partition":3,"pipeline":"dr","topic":"orders"}'
>>> run.encode()[1]
b'{"count":10,"from":40,"targetLast":1016,"targetOffset":1007,"targetPartition":3,\
"targetTopic":"dr.orders","v":1,"writtenAt":1700000000000}'
>>> OffsetMappingRecord.decode(*run.encode(), "__k2k_offset_mappings", 0, 5) == run
True
>>> run.exact, run.source_end
(True, 52)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

from k2k.errors import ControlRecordError
from k2k.formats.codec import check_version, dumps_canonical, load_object, locator

__all__ = ["OffsetMappingRecord", "RunEncoder"]


@dataclass(frozen=True, slots=True)
class OffsetMappingRecord:
    """One run of replicated records and where it landed; see the module doc."""

    VERSION: ClassVar[int] = 1

    pipeline: str
    topic: str
    partition: int
    source_from: int
    source_first: int
    count: int
    target_topic: str
    target_partition: int
    target_first: int
    target_last: int
    written_at_ms: int

    @property
    def source_end(self) -> int:
        """The source offset just past the run's last record."""
        return self.source_first + self.count

    @property
    def exact(self) -> bool:
        """True when the run's target offsets are contiguous (no other writer in between)."""
        return self.target_last - self.target_first + 1 == self.count

    def encode(self) -> tuple[bytes, bytes]:
        key = dumps_canonical(
            {
                "k": self.VERSION,
                "pipeline": self.pipeline,
                "topic": self.topic,
                "partition": self.partition,
                "offset": self.source_first,
            }
        )
        value = dumps_canonical(
            {
                "v": self.VERSION,
                "from": self.source_from,
                "count": self.count,
                "targetTopic": self.target_topic,
                "targetPartition": self.target_partition,
                "targetOffset": self.target_first,
                "targetLast": self.target_last,
                "writtenAt": self.written_at_ms,
            }
        )
        return key, value

    @classmethod
    def decode(
        cls, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int
    ) -> OffsetMappingRecord:
        """Decode one record read at ``topic[partition]@offset`` (the locator in errors)."""
        where = locator(topic, partition, offset)
        k = load_object(key, "key", where)
        check_version(k.get("k"), cls.VERSION, "offset-mapping key", where, "upgrade k2k")
        v = load_object(value, "value", where)
        check_version(v.get("v"), cls.VERSION, "offset-mapping value", where, "upgrade k2k")
        try:
            rec = cls(
                str(k["pipeline"]),
                str(k["topic"]),
                int(k["partition"]),
                int(v["from"]),
                int(k["offset"]),
                int(v["count"]),
                str(v["targetTopic"]),
                int(v["targetPartition"]),
                int(v["targetOffset"]),
                int(v["targetLast"]),
                int(v["writtenAt"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlRecordError(f"{where}: malformed offset mapping ({exc!r})") from None
        if not (
            0 <= rec.source_from <= rec.source_first
            and rec.count >= 1
            and rec.target_last >= rec.target_first + rec.count - 1
        ):
            raise ControlRecordError(f"{where}: inconsistent offset mapping {rec!r}")
        return rec

    def __repr__(self) -> str:
        return (
            f"OffsetMappingRecord({self.pipeline}: {self.topic}[{self.partition}]@"
            f"{self.source_first}..{self.source_end - 1} (from {self.source_from}) -> "
            f"{self.target_topic}[{self.target_partition}]@{self.target_first}.."
            f"{self.target_last})"
        )


class RunEncoder:
    """The bytes of :meth:`OffsetMappingRecord.encode` for the runs of one source partition
    of one pipeline, with the parts that never change encoded once: writers encode one
    record per run, in the replicator's copy loop.

    >>> enc = RunEncoder("dr", "orders", 3)
    >>> run = OffsetMappingRecord("dr", "orders", 3, 40, 42, 10, "dr.orders", 3, 1007, 1016, 17)
    >>> enc.encode(40, 42, 10, "dr.orders", 3, 1007, 1016, 17) == run.encode()
    True
    """

    __slots__ = ("_key_tail", "_targets")

    def __init__(self, pipeline: str, topic: str, partition: int) -> None:
        self._key_tail = b',"partition":%d,"pipeline":%s,"topic":%s}' % (
            partition,
            _json(pipeline),
            _json(topic),
        )
        self._targets: dict[tuple[str, int], bytes] = {}

    def encode(
        self,
        source_from: int,
        source_first: int,
        count: int,
        target_topic: str,
        target_partition: int,
        target_first: int,
        target_last: int,
        written_at_ms: int,
    ) -> tuple[bytes, bytes]:
        target = self._targets.get((target_topic, target_partition))
        if target is None:
            target = self._targets[(target_topic, target_partition)] = (
                b'"targetPartition":%d,"targetTopic":%s,' % (target_partition, _json(target_topic))
            )
        key = b'{"k":%d,"offset":%d%s' % (OffsetMappingRecord.VERSION, source_first, self._key_tail)
        value = (
            b'{"count":%d,"from":%d,"targetLast":%d,"targetOffset":%d,%s"v":%d,"writtenAt":%d}'
            % (
                count,
                source_from,
                target_last,
                target_first,
                target,
                OffsetMappingRecord.VERSION,
                written_at_ms,
            )
        )
        return key, value


def _json(text: str) -> bytes:
    """A JSON string as canonical JSON writes it (UTF-8, not ASCII-escaped)."""
    return json.dumps(text, ensure_ascii=False).encode()
