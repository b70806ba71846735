"""Counting the records of offset ranges, several partitions at once: what ``k2k cutover``
compares on each side of a replicated range (committed records), and what tells a foreign
write from a transaction marker on the target (every data record, aborted ones included)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, TopicPartition

from k2k.errors import ClusterError
from k2k.kafka import TP
from k2k.kafka.factory import build_consumer
from k2k.kafka.peek import reader_settings

__all__ = ["count_records"]


def count_records(
    consumer_conf: Mapping[str, str],
    group_id: str,
    ranges: Mapping[TP, tuple[int, int]],
    stall_s: float,
    committed_only: bool = True,
) -> dict[TP, int]:
    """Records per partition in ``[start, end)``: committed ones, or with ``committed_only``
    False every data record (``read_uncommitted``); raises :class:`ClusterError` when
    nothing arrives for ``stall_s`` while a range is unfinished.

    A range ends at its end offset, or at the partition's end: markers (and, reading
    committed records, aborted records) occupy offsets that are never delivered."""
    pending = {tp: r for tp, r in ranges.items() if r[0] < r[1]}
    counts = dict.fromkeys(ranges, 0)
    if not pending:
        return counts
    isolation = "read_committed" if committed_only else "read_uncommitted"
    consumer = build_consumer(
        {
            **reader_settings(consumer_conf, group_id),
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([TopicPartition(t, p, s) for (t, p), (s, _) in pending.items()])
        last_seen = time.monotonic()
        while pending:
            batch = consumer.consume(10_000, 0.2)
            if batch:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > stall_s:
                named = ", ".join(f"{t}[{p}]" for t, p in sorted(pending)[:8])
                raise ClusterError(f"counting records: nothing read for {stall_s:g} s from {named}")
            for m in batch:
                tp = (m.topic() or "", m.partition() or 0)
                if tp not in pending:
                    continue
                err, offset = m.error(), m.offset() or 0
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise ClusterError(f"counting records of {tp[0]}[{tp[1]}]: {err.str()}")
                end = pending[tp][1]
                if err is None and offset < end:
                    counts[tp] += 1
                if err is not None or offset >= end - 1:
                    del pending[tp]
                    consumer.pause([TopicPartition(*tp)])
        return counts
    finally:
        consumer.close()
