"""Offset mappings from the data path: each acknowledged run becomes one mapping record.

Runs on: executor. :class:`MappingPublisher` is the lease's observer factory
(``LeaseSpec.observer``) when ``features.offsetMapping`` is enabled; each runner builds one
:class:`RunPublisher` with its commit strategy, which puts every mapping where the strategy
says (exactly-once: in the transaction of the records it describes; at-least-once: at once,
before the progress that covers them). The record format is
:class:`k2k.formats.offset_mapping.OffsetMappingRecord`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from k2k.errors import ReplicationError
from k2k.formats.codec import dumps_canonical
from k2k.formats.offset_mapping import RunEncoder
from k2k.kafka.murmur2 import murmur2_partition
from k2k.pipeline.task.commit import CommitStrategy
from k2k.pipeline.task.observe import ProducedRun, RunObserver

__all__ = ["MappingPublisher", "RunPublisher", "mapping_partition"]


def mapping_partition(pipeline: str, topic: str, partition: int, partitions: int) -> int:
    """The mapping-topic partition of every run of one source partition of one pipeline, so
    that their order there is the order they were written (docs/formats.md).

    >>> mapping_partition("dr", "orders", 3, 6)
    5
    """
    key = dumps_canonical({"pipeline": pipeline, "topic": topic, "partition": partition})
    return murmur2_partition(key, partitions)


@dataclass(frozen=True, slots=True)
class MappingPublisher:
    """Picklable: crosses to the executors in the lease spec."""

    pipeline: str
    topic: str
    partitions: int

    def __call__(self, strategy: CommitStrategy) -> RunObserver:
        return RunPublisher(self, strategy)


class RunPublisher:
    """Runs on: executor, in the runner's thread. One mapping record per acknowledged run."""

    __slots__ = ("_per_partition", "publisher", "strategy")

    def __init__(self, publisher: MappingPublisher, strategy: CommitStrategy) -> None:
        self.publisher = publisher
        self.strategy = strategy
        #: Per source partition: its mapping-topic partition and its record encoder.
        self._per_partition: dict[tuple[str, int], tuple[int, RunEncoder]] = {}

    def on_run(self, run: ProducedRun) -> None:
        _check(run)
        tp = (run.source_topic, run.source_partition)
        known = self._per_partition.get(tp)
        if known is None:
            p = self.publisher
            known = self._per_partition[tp] = (
                mapping_partition(p.pipeline, *tp, p.partitions),
                RunEncoder(p.pipeline, *tp),
            )
        partition, encoder = known
        key, value = encoder.encode(
            run.source_from,
            run.source_first,
            run.count,
            run.target_topic,
            run.target_partition,
            run.target_first,
            run.target_last,
            int(time.time() * 1000),
        )
        self.strategy.add((self.publisher.topic, partition, key, value))


def _check(run: ProducedRun) -> None:
    """The copier's promises about a run; a mapping that broke them could make a failed-over
    consumer skip records, so a broken one fails the lease instead (nothing is committed)."""
    if not (
        run.count >= 1
        and run.source_last - run.source_first == run.count - 1
        and 0 <= run.source_from <= run.source_first
        and run.target_last >= run.target_first + run.count - 1 >= 0
    ):
        raise ReplicationError(f"internal error: an inconsistent run would be mapped: {run!r}")
