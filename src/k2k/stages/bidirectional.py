"""Bidirectional replication's loop breaker: a marker header on every replicated record.

Two pipelines replicate between clusters A and B in both directions (A -> B and B -> A,
typically with ``topic: source``). Without a loop breaker a record written on A would be
copied to B, then back to A, forever. Each pipeline therefore *stamps* every record it writes
with the marker header, and *skips* every source record whose marker says the other
direction wrote it there:

===========  ==========================  =====================================================
mode         stamp (value written)       skip (a source record carrying this value)
===========  ==========================  =====================================================
``pipeline`` the pipeline ``name``       the pipeline ``name`` (both directions share it)
``cluster``  the source cluster's id     the target cluster's id (the other direction's
                                         source)
===========  ==========================  =====================================================

The stamp is added after the record's own headers and never replaces an existing marker, so
a record that travelled several hops (A -> B -> C) carries one marker per hop and no hop
sends it back to a cluster it came from (in ``cluster`` mode).

Skipped records are not produced, but their offsets count as replicated: the committed
progress moves past them like past any other record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from k2k.stages.headers import Header

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = ["LoopMarker", "loop_marker"]


@dataclass(frozen=True, slots=True)
class LoopMarker:
    """The marker header ``header``: every replicated record gets ``(header, stamp)``; a
    source record carrying ``(header, skip)`` is not replicated.

    >>> m = LoopMarker("__k2k_bidirectional", b"A", b"B")
    >>> m.stamp_header
    ('__k2k_bidirectional', b'A')
    """

    header: str
    stamp: bytes
    skip: bytes

    @property
    def stamp_header(self) -> Header:
        return (self.header, self.stamp)

    def unmarked(self, msgs: Sequence[Any]) -> list[Any]:
        """``msgs`` (consumed messages, in order) without the records the other direction
        wrote; consumer events (which carry no headers) are kept. One header lookup per
        record: ``confluent_kafka``'s ``headers()`` list, searched for one (name, value)
        pair."""
        mark = (self.header, self.skip)
        return [m for m in msgs if (h := m.headers()) is None or mark not in h]


def loop_marker(cfg: PipelineConfig, source_id: str, target_id: str) -> LoopMarker | None:
    """The pipeline's marker; None without ``features.bidirectionalReplication``.

    ``source_id`` / ``target_id``: the clusters' ids (used in ``cluster`` mode).
    """
    if not cfg.features.bidirectional_replication:
        return None
    header = cfg.bidirectional.headers.bidirectional
    if cfg.bidirectional.mode == "pipeline":
        name = cfg.name.encode()
        return LoopMarker(header, name, name)
    return LoopMarker(header, source_id.encode(), target_id.encode())
