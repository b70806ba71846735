"""Partition mapping: which target partition a replicated record goes to.

One class per rule of ``replication[].sink.partition``, each deciding per *run* (consecutive
records of one source partition), never per record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

__all__ = ["KeyHash", "PartitionRule", "SourcePartition", "partition_rule"]

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


def partition_rule(name: str) -> PartitionRule:
    """The rule for a ``replication[].sink.partition`` value (``source`` or ``hash``)."""
    return KeyHash() if name == "hash" else SourcePartition()
