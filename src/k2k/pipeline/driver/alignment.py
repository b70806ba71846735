"""Aligning target partitions for identical offsets before their first record is copied.

Runs on: driver, in topic discovery, for partitions of ``offsets: identical`` topics that
have no progress yet (a first start, a new topic, added partitions). A target partition
keeps its source partition's offsets only if its end offset is the first source offset
copied into it. An empty target partition whose end is below that offset (the source's log
start moved on, or the copy starts at the source's end) is aligned by writing filler records
up to it and deleting them (DeleteRecords): its start and end offsets then equal the
source's. A target partition that holds records and ends below the offset cannot be aligned
without losing them: the start fails. One that ends above it is the runner's to resume
(k2k.pipeline.task.identical): its records are taken as copied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, Message

from k2k.errors import TopicError, Unavailable
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import build_producer
from k2k.kafka.faults import describe
from k2k.kafka.peek import records_at
from k2k.kafka.produce import produce_when_room

__all__ = ["FILL_RATE", "align_targets"]

log = logging.getLogger("k2k.planner")

#: Filler records per second assumed when an error says how long a fill would take.
FILL_RATE = 200_000
#: How long the filler records of one alignment may take to be acknowledged.
_FLUSH_S = 300.0
#: Marks a filler record (deleted at once; a reader that sees one raced the deletion).
FILLER_HEADER = ("k2k.filler", b"1")
#: How long reading the last record of partitions a cut-short alignment left may take.
_PEEK_S = 30.0


def align_targets(
    target: ClusterView,
    producer_conf: Mapping[str, str],
    consumer_conf: Mapping[str, str],
    first_offsets: Mapping[TP, int],
    max_fill: int,
) -> None:
    """Make each target partition of ``first_offsets`` (target partition -> the first source
    offset to be copied into it) end there, or raise :class:`~k2k.errors.TopicError`. An
    alignment cut short (a crash between the fill and the deletion) is finished."""
    if not first_offsets:
        return
    ends = target.offsets(first_offsets, "latest", committed_only=False)
    starts = target.offsets(first_offsets, "earliest")
    held = {
        tp: ends[tp] - 1 for tp, first in first_offsets.items() if starts[tp] < ends[tp] <= first
    }
    last = records_at(consumer_conf, held, _PEEK_S) if held else {}
    fillers = {
        tp for tp, m in last.items() if m is not None and FILLER_HEADER in (m.headers() or [])
    }
    fills: dict[TP, tuple[int, int]] = {}
    for tp, first in sorted(first_offsets.items()):
        end = ends[tp]
        if end > first or (end == first and tp not in fillers):
            continue  # aligned, or the runner resumes at its end (if its records are ours)
        if starts[tp] < end and tp not in fillers:
            raise TopicError(
                f"offsets: identical: target partition {tp[0]}[{tp[1]}] holds records "
                f"{starts[tp]}..{end - 1} but the first source offset to copy into it is "
                f"{first}: it must be empty or end at {first}; empty it (kafka-delete-records "
                f"up to {end}) or delete the topic"
            )
        if first - end > max_fill:
            raise TopicError(
                f"offsets: identical: aligning target partition {tp[0]}[{tp[1]}] with source "
                f"offset {first} needs {first - end:,} filler records (about "
                f"{(first - end) / FILL_RATE:,.0f} s), more than "
                f"replication[].sink.offsets.maxFill ({max_fill:,}); raise maxFill"
            )
        fills[tp] = (end, first)
    if not fills:
        return
    count = _fill(producer_conf, {tp: span for tp, span in fills.items() if span[0] < span[1]})
    after = target.offsets(fills, "latest", committed_only=False)
    moved = {tp: after[tp] for tp, (_, first) in fills.items() if after[tp] != first}
    if moved:
        tp, end = next(iter(sorted(moved.items())))
        raise TopicError(
            f"offsets: identical: target partition {tp[0]}[{tp[1]}] ends at {end} after "
            f"aligning it with {fills[tp][1]}: another producer writes to it"
        )
    target.delete_records({tp: first for tp, (_, first) in fills.items()})
    log.info(
        "identical offsets: aligned %d target partition(s) with their source offsets "
        "(%d filler records written and deleted)",
        len(fills),
        count,
    )


def _fill(producer_conf: Mapping[str, str], fills: Mapping[TP, tuple[int, int]]) -> int:
    """Write ``first - end`` filler records into each partition; returns how many."""
    failures: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None and len(failures) < 1:
            failures.append(f"{msg.topic()}[{msg.partition()}]: {describe(err)}")

    producer = build_producer({**producer_conf, "linger.ms": "20"})
    count = 0
    headers = [FILLER_HEADER]
    for (topic, partition), (end, first) in fills.items():
        for _ in range(first - end):
            produce_when_room(producer, topic, None, None, partition, delivered, None, 0, headers)
        count += first - end
    left = producer.flush(_FLUSH_S)
    if left:
        raise Unavailable(
            f"offsets: identical: {left} filler records were not acknowledged within {_FLUSH_S:g} s"
        )
    if failures:
        raise TopicError(f"offsets: identical: a filler record was refused: {failures[0]}")
    return count
