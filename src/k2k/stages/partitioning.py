"""Partition mapping: which target partition a replicated record goes to.

One class per rule of ``replication[].sink.partition``, each deciding per *run* (consecutive
records of one source partition), never per record. ``hash`` and ``producer`` both let the
producer place records (no partition passed to ``produce``); they differ in who picks the
partitioner: k2k (always librdkafka's ``murmur2_random``, the Java client's placement) or the
target producer's settings (:func:`k2k.kafka.factory.producer_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

__all__ = [
    "KeyHash",
    "PartitionRule",
    "ProducerPartitioner",
    "SourcePartition",
    "partition_rule",
]

#: librdkafka's "let the partitioner choose" partition number.
PRODUCER_CHOOSES = -1


class PartitionRule(Protocol):
    #: True when the records of one run may land in different target partitions.
    spreads: ClassVar[bool]

    def target_partition(self, source_partition: int) -> int: ...


@dataclass(frozen=True)
class SourcePartition:
    """``partition: source``: a record keeps its partition number, so a run stays together
    in one target partition, in order. Never returns -1.

    >>> SourcePartition().target_partition(3)
    3
    """

    spreads: ClassVar[bool] = False

    def target_partition(self, source_partition: int) -> int:
        return source_partition


@dataclass(frozen=True)
class KeyHash:
    """``partition: hash``: the producer places each record by its key with librdkafka's
    ``murmur2_random`` partitioner, the Java client's placement (:mod:`k2k.kafka.murmur2`);
    null keys go to a random partition. Always returns -1 ("the producer chooses").

    >>> KeyHash().target_partition(3)
    -1
    """

    spreads: ClassVar[bool] = True

    def target_partition(self, source_partition: int) -> int:
        return PRODUCER_CHOOSES


@dataclass(frozen=True)
class ProducerPartitioner:
    """``partition: producer`` (K2K's producer-defined partitioning): no partition is passed to
    ``produce``; the target producer's partitioner places each record, the librdkafka property
    ``partitioner`` of ``target.kafka.producer``, by default ``murmur2_random`` (the Java
    producer's default placement, as in K2K). Null keys go to a partition chosen at random
    and kept for ``sticky.partitioning.linger.ms`` (librdkafka's sticky partitioning, like the
    Java producer's), so null-keyed records of one source partition spread over target
    partitions. Always returns -1 ("the producer chooses").

    >>> ProducerPartitioner().target_partition(3)
    -1
    """

    spreads: ClassVar[bool] = True

    def target_partition(self, source_partition: int) -> int:
        return PRODUCER_CHOOSES


_RULES: dict[str, PartitionRule] = {
    "source": SourcePartition(),
    "hash": KeyHash(),
    "producer": ProducerPartitioner(),
}


def partition_rule(name: str) -> PartitionRule:
    """The rule for a ``replication[].sink.partition`` value (``source``, ``hash`` or
    ``producer``)."""
    return _RULES[name]
