"""The planner's view of the offsets it plans by, and the tick that keeps it fresh.

Runs on: driver. :class:`PlanningState` is what the planner decides leases from: this
member's start positions, every member's committed progress, the source's latest offsets
and, with ``--until-caught-up``, the ends captured at start. The display and the metrics read it through
:class:`~k2k.observability.stats.PipelineStats` and never write it. :class:`LiveProgress`
refreshes it between lease results, on every planner tick, and hands the statistics to the
display.

Invariants: a partition's committed offset never moves backwards; ``ends`` only loses
partitions (of deleted topics) or takes a re-created topic's new end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from k2k.errors import K2KError
from k2k.pipeline.driver.positions import StartPositions
from k2k.pipeline.plan import ProgressSnapshot

if TYPE_CHECKING:
    from k2k.coordination.progress import ProgressStore
    from k2k.formats import ProgressRecord
    from k2k.kafka.admin import ClusterView
    from k2k.observability.stats import PipelineStats
    from k2k.pipeline.driver.discovery import Discovery
    from k2k.pipeline.plan import PartitionOutcome, PartitionRange, RunnerSummary

__all__ = ["LiveProgress", "PlanningState"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")

TP = tuple[str, int]

#: How often the source's latest offsets are re-read for the live lag (continuous mode), and
#: how much longer per partition: a whole cluster's end offsets are one large request.
_LAG_REFRESH_S = 2.0
_LAG_REFRESH_PER_PARTITION_S = 0.001


@dataclass
class PlanningState:
    """Runs on: driver. ``positions``: the start offset of every known source partition;
    ``committed``: the committed progress per source partition (this member's and, from
    the commit topic's tail, every other member's); ``latest``: the source's latest offsets
    of the partitions in the current lease; ``ends``: the end offsets captured at start
    with ``--until-caught-up`` (None otherwise); ``mapped_from``: ``offsets: identical``,
    where each partition whose identity ended stopped being identical (its progress's
    ``mappedFrom``).

    >>> from k2k.formats import ProgressRecord
    >>> from k2k.pipeline.plan import PartitionRange
    >>> s = PlanningState(committed={("t", 0): 5})
    >>> s.take_progress(ProgressRecord("g", "t", p, o, "p", 0) for p, o in [(0, 4), (1, 2)])
    >>> s.committed
    {('t', 0): 5, ('t', 1): 2}
    >>> [r.partition for r in s.left_to_others([PartitionRange("t", 0, 0, 5, True),
    ...                                         PartitionRange("t", 1, 0, 9, True)])]
    [1]
    """

    positions: StartPositions = field(default_factory=StartPositions)
    committed: dict[TP, int] = field(default_factory=dict)
    latest: dict[TP, int] = field(default_factory=dict)
    ends: dict[TP, int] | None = None
    mapped_from: dict[TP, int] = field(default_factory=dict)

    def discover(self, discovery: Discovery) -> int:
        """One pass of topic discovery by this state; returns how many source topics are
        selected. ``--until-caught-up``: a deleted topic has no end to reach; a re-created
        one's is the new topic's."""
        topics = discovery.discover(self.positions, self.ends, self.latest, self.committed)
        if self.ends is not None:
            kept = {tp: end for tp, end in self.ends.items() if tp[0] in topics}
            again = [tp for tp in kept if tp[0] in discovery.recreated]
            kept.update(discovery.source.offsets(again, "latest"))
            self.ends = kept
        return len(topics)

    def caught_up(self) -> bool:
        """``--until-caught-up``: every partition captured at start is committed to its end."""
        return self.positions.caught_up(self.ends or {})

    def fold(self, lease_id: int, summaries: list[RunnerSummary], stats: PipelineStats) -> None:
        """Take a lease's summaries into the positions, the committed progress and ``stats``."""
        self.positions.fold(lease_id, summaries, stats, self.committed)

    def let_go(self, outcomes: Iterable[PartitionOutcome]) -> None:
        """Take what runners achieved for partitions they let go during a continuous lease
        into the positions and the committed progress."""
        self.positions.take(outcomes, self.committed)

    def take_progress(self, records: Iterable[ProgressRecord]) -> None:
        """Take progress records read from the commit topic's tail; a record older than one
        already seen changes nothing."""
        for rec in records:
            tp = (rec.topic, rec.partition)
            if rec.offset >= self.committed.get(tp, 0):
                self.take_identity(tp, rec)
            self.committed[tp] = max(self.committed.get(tp, 0), rec.offset)

    def take_identity(self, tp: TP, rec: ProgressRecord) -> None:
        """Whether ``tp``'s newest progress says its identical offsets ended (a reset
        partition copied afresh is identical again)."""
        if rec.mapped_from is None:
            self.mapped_from.pop(tp, None)
        else:
            self.mapped_from[tp] = rec.mapped_from

    def left_to_others(self, ranges: Iterable[PartitionRange]) -> list[PartitionRange]:
        """``--until-caught-up``: of ``ranges`` (none of them this member's), those whose
        end no member has committed yet, as the commit topic's tail says."""
        committed = self.committed
        return [
            r
            for r in ranges
            if r.end is not None and committed.get((r.topic, r.partition), r.start) < r.end
        ]


class LiveProgress:
    """Runs on: driver, once per planner tick (about twice a second). Keeps ``planning``
    fresh and passes ``stats`` to ``on_tick`` (the display)."""

    def __init__(
        self,
        planning: PlanningState,
        stats: PipelineStats,
        source: ClusterView,
        progress: ProgressStore,
        on_tick: Callable[[PipelineStats], None] | None,
    ) -> None:
        self.planning = planning
        self.stats = stats
        self.source = source
        self.progress = progress
        self.on_tick = on_tick
        self._next_latest_refresh = 0.0

    def tick(self) -> None:
        """Refresh latest offsets (at most every 2 s), read new progress, call ``on_tick``.

        Raises :class:`~k2k.errors.K2KError` when the commit topic cannot be read."""
        planning = self.planning
        now = time.monotonic()
        # Not while the source does not answer the probes: the request would block the
        # driver's watch for the source's connectTimeout (stop and maxOutage checks too).
        answering = self.source.answering
        due = now >= self._next_latest_refresh
        if planning.ends is None and due and planning.latest and answering:
            # Continuous mode: refresh the source's end offsets for the lag shown live.
            every = max(_LAG_REFRESH_S, len(planning.latest) * _LAG_REFRESH_PER_PARTITION_S)
            self._next_latest_refresh = now + every
            try:
                # Asked once: a partition without a leader must not hold the tick.
                latest = self.source.offsets(list(planning.latest), "latest", retry=False)
                planning.latest = latest
            except K2KError as exc:
                # The lag shown keeps its last value. Every 2 s during an outage: the outage
                # itself is reported once, by k2k.observability.reachability.
                log.debug("could not refresh source end offsets: %s", exc)
        planning.take_progress(self.progress.poll())
        if self.on_tick is not None:
            self.on_tick(self.stats)

    def snapshot(self, tps: Iterable[TP]) -> ProgressSnapshot | None:
        """What the commit topic's tail says of ``tps`` so far, for runners taking them on;
        None after a failed read (they read the whole topic themselves)."""
        read_to = self.progress.read_to()  # first: the records below it are in ``latest``
        if read_to is None:
            return None
        latest = self.progress.latest
        return ProgressSnapshot(read_to, {tp: latest.get(tp) for tp in tps})
