"""Pipeline statistics: what ``k2k start`` shows while it runs and prints when it ends.

Runs on: driver. :class:`PipelineStats` is a plain value the planner updates and hands to
the display; :class:`LiveStats` refreshes it between lease results, on every planner tick:
the source's latest offsets (for the lag shown live) and the progress records runners
commit (for the throughput). Nothing here imports the pipeline: the planner feeds it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from k2k.errors import K2KError

if TYPE_CHECKING:
    from k2k.coordination.progress import ProgressStore
    from k2k.kafka import TP
    from k2k.kafka.admin import ClusterView

__all__ = ["LiveStats", "PipelineStats"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")

#: How often the source's latest offsets are re-read for the live lag (continuous mode).
_LAG_REFRESH_S = 2.0


@dataclass
class PipelineStats:
    """Runs on: driver. What the display shows: progress and lag per partition, and running
    totals.

    ``committed`` is the committed progress per source partition, ``latest`` the source's
    latest offsets of the partitions in the current lease, and ``ends`` the end offsets
    captured at start with ``--until-caught-up`` (None otherwise).

    >>> s = PipelineStats(committed={("t", 0): 5}, latest={("t", 0): 8, ("t", 1): 2})
    >>> s.lag, s.replicated_offsets
    (5, 5)
    """

    started: float = field(default_factory=time.monotonic)
    committed: dict[TP, int] = field(default_factory=dict)
    latest: dict[TP, int] = field(default_factory=dict)
    ends: dict[TP, int] | None = None
    records: int = 0
    bytes: int = 0
    #: Bidirectional replication: records of the other direction not copied back.
    skipped: int = 0
    #: Schema mapping: schemas the runners had the target registry resolve.
    schemas_registered: int = 0
    leases: int = 0
    topics: int = 0

    @property
    def lag(self) -> int:
        """Records left, summed over the partitions (:meth:`lag_by_partition`)."""
        return sum(self.lag_by_partition().values())

    def lag_by_partition(self) -> dict[TP, int]:
        """Records left per partition: (``ends``, else ``latest``) minus committed progress,
        never below 0. Reads copies: the metrics exporter asks from its own thread while the
        planner updates the dicts.

        >>> s = PipelineStats(committed={("t", 0): 9}, latest={("t", 0): 8, ("t", 1): 2})
        >>> s.lag_by_partition()
        {('t', 0): 0, ('t', 1): 2}
        """
        ends = dict(self.ends) if self.ends is not None else dict(self.latest)
        committed = dict(self.committed)
        return {tp: max(0, end - committed.get(tp, 0)) for tp, end in ends.items()}

    @property
    def replicated_offsets(self) -> int:
        """The sum of committed offsets: grows by the records durably on the target."""
        return sum(self.committed.values())


class LiveStats:
    """Runs on: driver, once per planner tick (about twice a second). Keeps ``stats`` fresh
    and passes it to ``on_tick`` (the display)."""

    def __init__(
        self,
        stats: PipelineStats,
        source: ClusterView,
        progress: ProgressStore,
        on_tick: Callable[[PipelineStats], None] | None,
    ) -> None:
        self.stats = stats
        self.source = source
        self.progress = progress
        self.on_tick = on_tick
        self._next_latest_refresh = 0.0

    def tick(self) -> None:
        """Refresh latest offsets (at most every 2 s), read new progress, call ``on_tick``.

        Raises :class:`~k2k.errors.K2KError` when the commit topic cannot be read."""
        stats = self.stats
        now = time.monotonic()
        # Not while the source does not answer the probes: the request would block the
        # driver's watch for the source's connectTimeout (stop and maxOutage checks too).
        answering = self.source.answering
        if stats.ends is None and now >= self._next_latest_refresh and stats.latest and answering:
            # Continuous mode: refresh the source's end offsets for the lag shown live.
            self._next_latest_refresh = now + _LAG_REFRESH_S
            try:
                stats.latest = self.source.offsets(list(stats.latest), "latest")
            except K2KError as exc:
                # The lag shown keeps its last value. Every 2 s during an outage: the outage
                # itself is reported once, by k2k.observability.reachability.
                log.debug("could not refresh source end offsets: %s", exc)
        for rec in self.progress.poll():
            tp = (rec.topic, rec.partition)
            stats.committed[tp] = max(stats.committed.get(tp, 0), rec.offset)
        if self.on_tick is not None:
            self.on_tick(stats)
