"""Which mapping records may go: ``offsetMapping.retention``.

A record may be deleted when it is beyond the newest ``count`` runs of its source partition
or older than ``time``, unless it is still needed: the run a selected group's current
position translates through, and each source partition's last run (where a position past
the replicated data translates to). Kafka deletes a prefix of a partition (DeleteRecords),
so a partition is cut below its oldest record that must stay; newer deletable records stay
until everything before them may go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from k2k.offsetmapping.index import PartitionIndex, Span

__all__ = ["cut_points"]


def keep_from(
    index: PartitionIndex, count: int, oldest_ms: int | None, needed: set[Span]
) -> int | None:
    """The lowest mapping-topic offset among the records of ``index`` that must stay."""
    spans = index.spans
    if not spans:
        return None
    newest = sorted(spans, key=lambda s: s.at[1])[-count:]
    kept = [s for s in newest if oldest_ms is None or s.written_at_ms >= oldest_ms]
    kept.append(spans[-1])
    kept.extend(s for s in spans if s in needed)
    return min(s.at[1] for s in kept)


def cut_points(
    by_partition: Mapping[int, Iterable[PartitionIndex]],
    count: int,
    oldest_ms: int | None,
    needed: set[Span],
) -> dict[int, int]:
    """Per mapping-topic partition, the offset below which every record may be deleted.

    >>> from k2k.formats.offset_mapping import OffsetMappingRecord as R
    >>> idx = PartitionIndex()
    >>> for i in range(5):
    ...     idx.add(R("p", "s", 0, 10 * i, 10 * i, 10, "t", 0, 10 * i, 10 * i + 9, i), (0, i))
    >>> cut_points({0: [idx]}, count=2, oldest_ms=None, needed=set())
    {0: 3}
    >>> cut_points({0: [idx]}, count=2, oldest_ms=None, needed={idx.spans[1]})
    {0: 1}
    >>> cut_points({0: [idx]}, count=5, oldest_ms=4, needed=set())
    {0: 4}
    """
    cuts: dict[int, int] = {}
    for partition, indexes in by_partition.items():
        keeps = [k for i in indexes if (k := keep_from(i, count, oldest_ms, needed)) is not None]
        if keeps:
            cuts[partition] = min(keeps)
    return cuts
