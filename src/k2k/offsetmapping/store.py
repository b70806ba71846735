"""Every mapping the app knows: the mapping topic read into one index per source partition.

The topic is read ``read_committed`` (exactly-once mappings count only once their
transaction has committed, with the records they describe), from its beginning at start and
incrementally afterwards.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping

from confluent_kafka import Message

from k2k.errors import ControlRecordError
from k2k.formats.offset_mapping import OffsetMappingRecord
from k2k.kafka import TP
from k2k.kafka.tail import TopicTail
from k2k.offsetmapping.index import PartitionIndex

__all__ = ["MappingStore"]

log = logging.getLogger(__name__)


class MappingStore:
    def __init__(self, consumer_conf: Mapping[str, str], topic: str, timeout_s: float) -> None:
        self.topic = topic
        self._tail = TopicTail(
            consumer_conf, topic, None, group_id="k2k-offset-mapping", timeout_s=timeout_s
        )
        #: source (topic, partition) -> pipeline -> its index.
        self.by_source: dict[TP, dict[str, PartitionIndex]] = defaultdict(dict)
        #: mapping-topic partition -> the indexes fed from it.
        self.by_partition: dict[int, list[PartitionIndex]] = defaultdict(list)
        self.records = 0
        self.unreadable = 0

    def catch_up(self, timeout_s: float | None = None) -> None:
        """Read every mapping committed until now."""
        self._tail.catch_up(self._take, timeout_s)

    def indexes(self, tp: TP) -> Mapping[str, PartitionIndex]:
        return self.by_source.get(tp, {})

    def prune(self, partition: int, keep_from: int) -> None:
        """Records of ``partition`` below ``keep_from`` were deleted: forget them."""
        for index in self.by_partition.get(partition, []):
            index.prune(keep_from)

    def close(self) -> None:
        self._tail.close()

    def _take(self, m: Message) -> None:
        part, offset = m.partition() or 0, m.offset() or 0
        try:
            rec = OffsetMappingRecord.decode(m.key(), m.value(), self.topic, part, offset)
        except ControlRecordError as exc:
            # A record skipped leaves a hole, which translates to a lower bound: records may
            # be read again on the target, never skipped.
            self.unreadable += 1
            log.warning("skipping an unreadable offset mapping: %s", exc)
            return
        pipelines = self.by_source[(rec.topic, rec.partition)]
        index = pipelines.get(rec.pipeline)
        if index is None:
            index = pipelines[rec.pipeline] = PartitionIndex()
            self.by_partition[part].append(index)
        index.add(rec, (part, offset))
        self.records += 1
