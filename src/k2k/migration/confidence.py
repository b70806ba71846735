"""The offset-confidence report: how sure each group's position on the target would be.

Pure over what was read: the groups' committed source offsets, the pipeline's mappings
(:class:`~k2k.offsetmapping.store.MappingStore` indexes) and, to make a lower bound exact
where the target can tell, the run reader. The classes (:data:`k2k.formats.cutover.CONFIDENCE`):

* ``exact``: the target offset is where the group's next source record went (or, past
  everything replicated, just after the last replicated record);
* ``lower-bound``: other records sit between ours on the target; at most ``reread`` of them
  are read again, none of ours skipped (None: the bound is not known);
* ``before-oldest-mapping``: the position is before the first mapping of the partition;
* ``no-position``: the group has offsets on the topic but none on this partition, or the
  partition's records went to several target partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from k2k.formats.cutover import GroupPosition
from k2k.kafka import TP
from k2k.offsetmapping.index import PartitionIndex, Translation

__all__ = ["classify_groups"]

Resolve = Callable[[Translation, int], Translation]


def classify_groups(
    positions: Mapping[str, Mapping[TP, int]],
    replicated: Iterable[TP],
    index: Callable[[TP], PartitionIndex | None],
    resolve: Resolve | None = None,
) -> list[GroupPosition]:
    """One row per group and replicated partition of every topic the group has a position
    on, sorted by group, topic, partition.

    >>> from k2k.formats.offset_mapping import OffsetMappingRecord
    >>> idx = PartitionIndex()
    >>> idx.add(OffsetMappingRecord("p", "s", 0, 0, 0, 10, "t", 0, 100, 109, 0), (0, 0))
    >>> rows = classify_groups({"g": {("s", 0): 4}}, [("s", 0), ("s", 1)],
    ...                        lambda tp: idx if tp == ("s", 0) else None)
    >>> [(r.partition, r.target, r.confidence) for r in rows]
    [(0, 104, 'exact'), (1, None, 'no-position')]
    """
    replicated = sorted(set(replicated))
    rows: list[GroupPosition] = []
    for group, committed in sorted(positions.items()):
        topics = {t for t, _ in committed}
        for tp in replicated:
            if tp[0] not in topics:
                continue
            position = committed.get(tp)
            rows.append(_row(group, tp, position, index(tp), resolve))
    return rows


def _row(
    group: str,
    tp: TP,
    position: int | None,
    index: PartitionIndex | None,
    resolve: Resolve | None,
) -> GroupPosition:
    if position is None or index is None or len(index.targets) > 1:
        return GroupPosition(group, tp[0], tp[1], position, None, None, None, "no-position")
    found = index.translate(position)
    if found is None:
        return GroupPosition(
            group, tp[0], tp[1], position, None, None, None, "before-oldest-mapping"
        )
    if not found.exact and resolve is not None:
        found = resolve(found, position)
    target_topic, target_partition = found.target
    if found.exact:
        confidence, reread = "exact", None
    else:
        confidence, reread = "lower-bound", _reread_bound(index, found, position)
    return GroupPosition(
        group,
        tp[0],
        tp[1],
        position,
        target_topic,
        target_partition,
        found.offset,
        confidence,
        reread,
    )


def _reread_bound(index: PartitionIndex, found: Translation, position: int) -> int | None:
    """At most how many target records a lower bound reads again: the other writers'
    offsets inside the run, or the target offsets of the hole up to the next run."""
    span = found.span
    if position < span.end:
        return (span.t_last - span.t_first + 1) - span.count
    later = [s for s in index.spans if s.start >= span.end]
    if not later:
        return None
    return max(0, later[0].t_first - found.offset)
