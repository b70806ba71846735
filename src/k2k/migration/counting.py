"""The records on each side of a cut: per source partition, the committed records from its
oldest mapping to the cut, against those in the target range they were copied to.

A target partition that several source partitions feed (routing many topics into one) is
left out: its records cannot be told apart by source without reading the tracing headers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from k2k.config import PipelineConfig
from k2k.formats.cutover import CutoverRecord, PartitionCount
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.counting import count_records
from k2k.offsetmapping.index import PartitionIndex

__all__ = ["replicated_counts"]


def replicated_counts(
    cfg: PipelineConfig,
    rec: CutoverRecord,
    targets: Mapping[TP, TP],
    index: Callable[[TP], PartitionIndex | None],
) -> list[PartitionCount]:
    """One count per source partition of the cut with one target partition of its own."""
    feeds = Counter(targets.values())
    source = ClusterView.of(cfg.source)
    earliest = source.offsets([tp for tp in rec.cut if tp in targets], "earliest")
    ranges: dict[TP, tuple[int, int]] = {}
    target_ranges: dict[TP, tuple[int, int]] = {}
    for tp, cut in sorted(rec.cut.items()):
        target, idx = targets.get(tp), index(tp)
        if target is None or idx is None or feeds[target] > 1 or not idx.spans:
            continue
        start = max(idx.spans[0].first, earliest.get(tp, 0))
        found = idx.translate(start) if start < cut else None
        end = rec.target_ends.get(target)
        if found is None or end is None:
            continue
        ranges[tp] = (start, cut)
        target_ranges[target] = (found.offset, end)
    stall_s = max(cfg.source.connect_timeout, cfg.target.connect_timeout).total_seconds()
    group = f"k2k.{cfg.name}"
    on_source = count_records(cfg.source_client("consumer"), group, ranges, stall_s)
    on_target = count_records(cfg.target_client("consumer"), group, target_ranges, stall_s)
    return [
        PartitionCount(
            tp[0],
            tp[1],
            start,
            cut,
            targets[tp][0],
            targets[tp][1],
            *target_ranges[targets[tp]],
            on_source[tp],
            on_target[targets[tp]],
        )
        for tp, (start, cut) in sorted(ranges.items())
    ]
