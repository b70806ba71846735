"""Peeking at a partition: the timestamp of its first readable record at an offset.

Used for lag in seconds (the age of the oldest record not yet replicated) by ``k2k status``
and the metrics. The caller assigns its ``read_committed`` consumer (with
``enable.partition.eof``) at the offsets to look at.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from k2k.kafka import TP

__all__ = ["first_records", "peek_settings", "reader_settings", "records_at"]


def reader_settings(props: Mapping[str, str], group_id: str) -> dict[str, str]:
    """A consumer that only reads: assigned, never joins its group, never commits, reads
    committed records only and reports the end of each partition. ``group_id`` is never
    joined; it is set because some ACL setups require one for fetching."""
    return {
        **props,
        "group.id": group_id,
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "enable.partition.eof": "true",
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
    }


def peek_settings(consumer_conf: Mapping[str, str], group_id: str) -> dict[str, str]:
    """A reader (:func:`reader_settings`) that peeks: it returns as soon as one record is
    there. ``group_id``: the runners' (same ACLs)."""
    return {
        **reader_settings(consumer_conf, group_id),
        "queued.min.messages": "1",
        "fetch.wait.max.ms": "50",
    }


def first_records(consumer: Consumer, pending: set[TP], timeout_s: float) -> dict[TP, int | None]:
    """Consume until every partition of ``pending`` gave a record or its end; per partition
    the record's timestamp (ms), or None at the end (what is left are transaction markers or
    aborted records). Partitions not read within ``timeout_s`` are absent; each partition is
    paused once it has answered."""
    found: dict[TP, int | None] = {}
    deadline = time.monotonic() + timeout_s
    while pending and (left := deadline - time.monotonic()) > 0:
        for m in consumer.consume(len(pending) + 1, min(left, 0.2)):
            topic, part, err = m.topic(), m.partition(), m.error()
            if topic is None or part is None or (topic, part) not in pending:
                continue
            eof = err is not None and err.code() == KafkaError._PARTITION_EOF
            ts = m.timestamp()[1] if err is None else None
            if eof or (ts is not None and ts >= 0):
                found[(topic, part)] = ts  # else an error or no timestamp: left unknown
            pending.discard((topic, part))
            consumer.pause([TopicPartition(topic, part)])
    return found


def records_at(
    consumer_conf: Mapping[str, str], offsets: Mapping[TP, int], timeout_s: float
) -> dict[TP, Message | None]:
    """The record at exactly ``offsets[tp]`` of each partition (one consumer for all of
    them), or None where there is none there: a marker, an aborted record (the consumer
    reads ``read_committed``), or the partition's end. Partitions not answered within
    ``timeout_s`` are absent."""
    consumer = Consumer(peek_settings(consumer_conf, consumer_conf.get("group.id", "k2k.peek")))
    found: dict[TP, Message | None] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        pending = set(offsets)
        deadline = time.monotonic() + timeout_s
        while pending and (left := deadline - time.monotonic()) > 0:
            for m in consumer.consume(len(pending) + 1, min(left, 0.2)):
                tp, err = (m.topic() or "", m.partition() or 0), m.error()
                if tp not in pending or (
                    err is not None and err.code() != KafkaError._PARTITION_EOF
                ):
                    continue
                found[tp] = m if err is None and m.offset() == offsets[tp] else None
                pending.discard(tp)
                consumer.pause([TopicPartition(*tp)])
    finally:
        consumer.close()
    return found
