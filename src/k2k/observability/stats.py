"""Pipeline statistics: what ``k2k start`` shows while it runs and prints when it ends.

Runs on: driver. :class:`PipelineStats` is a plain value the planner updates and hands to
the display: running totals, and the offsets the planner plans by, which it reads (through
:class:`PlanningView`) but does not own. Nothing here imports the pipeline: the planner
feeds it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from k2k.formats.cutover import CutoverRecord
    from k2k.kafka import TP

__all__ = ["PipelineStats", "PlanningView"]


class PlanningView(Protocol):
    """The offsets the planner plans by, read-only here
    (:class:`k2k.pipeline.driver.planning.PlanningState`)."""

    @property
    def committed(self) -> Mapping[TP, int]: ...
    @property
    def latest(self) -> Mapping[TP, int]: ...
    @property
    def ends(self) -> Mapping[TP, int] | None: ...
    @property
    def mapped_from(self) -> Mapping[TP, int]: ...


class _NotPlanned:
    """A run that never planned (stopped before it began): nothing committed, nothing seen."""

    committed: Mapping[TP, int] = MappingProxyType({})
    latest: Mapping[TP, int] = MappingProxyType({})
    ends: Mapping[TP, int] | None = None
    mapped_from: Mapping[TP, int] = MappingProxyType({})


@dataclass
class PipelineStats:
    """Runs on: driver. What the display shows: progress and lag per partition, and running
    totals.

    ``planning`` is the planner's view: ``committed`` is the committed progress per source
    partition, ``latest`` the source's latest offsets of the partitions in the current
    lease, and ``ends`` the end offsets captured at start with ``--until-caught-up`` (None
    otherwise).

    >>> from types import SimpleNamespace as View
    >>> view = View(committed={("t", 0): 5}, latest={("t", 0): 8, ("t", 1): 2}, ends=None)
    >>> s = PipelineStats(planning=view)
    >>> s.lag, s.replicated_offsets
    (5, 5)
    """

    planning: PlanningView = field(default_factory=_NotPlanned)
    started: float = field(default_factory=time.monotonic)
    records: int = 0
    bytes: int = 0
    #: Bidirectional replication: records of the other direction not copied back.
    skipped: int = 0
    #: Transforms: records a filter dropped, and records a failing step left out.
    filtered: int = 0
    transform_failed: int = 0
    #: Schema mapping: schemas the runners had the target registry resolve.
    schemas_registered: int = 0
    leases: int = 0
    topics: int = 0
    #: Set when the run ended because ``k2k cutover`` cut the pipeline over to the target
    #: (its record: ``steps``, ``started_at_ms``, ``host``, ...); None otherwise.
    cutover: CutoverRecord | None = None

    @property
    def committed(self) -> Mapping[TP, int]:
        return self.planning.committed

    @property
    def latest(self) -> Mapping[TP, int]:
        return self.planning.latest

    @property
    def ends(self) -> Mapping[TP, int] | None:
        return self.planning.ends

    @property
    def lag(self) -> int:
        """Records left, summed over the partitions (:meth:`lag_by_partition`)."""
        return sum(self.lag_by_partition().values())

    def lag_by_partition(self) -> dict[TP, int]:
        """Records left per partition: (``ends``, else ``latest``) minus committed progress,
        never below 0. Reads copies: the metrics exporter asks from its own thread while the
        planner updates the dicts.

        >>> from types import SimpleNamespace as View
        >>> view = View(committed={("t", 0): 9}, latest={("t", 0): 8, ("t", 1): 2}, ends=None)
        >>> PipelineStats(planning=view).lag_by_partition()
        {('t', 0): 0, ('t', 1): 2}
        """
        ends = dict(self.ends) if self.ends is not None else dict(self.latest)
        committed = dict(self.committed)
        return {tp: max(0, end - committed.get(tp, 0)) for tp, end in ends.items()}

    @property
    def replicated_offsets(self) -> int:
        """The sum of committed offsets: grows by the records durably on the target."""
        return sum(self.committed.values())
