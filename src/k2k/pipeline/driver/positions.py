"""Where each source partition's replication starts: the driver's view of committed progress.

Runs on: driver. The planner loads the progress records of its commit group once at start,
resolves a start offset for partitions without progress (see
:meth:`k2k.pipeline.driver.discovery.Discovery.discover`), turns positions into one offset range per
partition for each lease, and folds the runners' summaries back in after the lease.

Invariants:

* a partition's start offset never moves backwards (folding keeps the larger offset), except
  through :meth:`StartPositions.restart`: a topic deleted and created again under the same
  name (a new topic id) is a new topic, replicated from its start;
* ``has_progress`` only grows, except through ``restart``: a partition is in it once a
  progress record exists for it, either read at start or written by a runner.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from k2k.kafka import TP
from k2k.kafka.admin import TopicInfo
from k2k.observability.stats import PipelineStats
from k2k.pipeline.plan import PartitionOutcome, PartitionRange, RunnerSummary

__all__ = ["StartPositions", "starts_at"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")


class StartPositions:
    """Runs on: driver. The start offset of every known source partition, and which of them
    have committed progress.

    >>> pos = StartPositions()
    >>> pos.load({("t", 0): 7})
    >>> pos.add_initial({("t", 1): 3})
    >>> [(r.partition, r.start, r.has_progress) for r in pos.ranges({"t": TopicInfo("t", 2)}, None)]
    [(0, 7, True), (1, 3, False)]
    >>> pos.caught_up({("t", 0): 7}), pos.caught_up({("t", 1): 3})
    (True, False)
    """

    def __init__(self) -> None:
        self.starts: dict[TP, int] = {}
        self.has_progress: set[TP] = set()
        #: The source topic id each position belongs to, where known (progress records
        #: carry it; discovery sets it for every selected partition).
        self.topic_ids: dict[TP, str] = {}

    def load(self, committed: Mapping[TP, int], topic_ids: Mapping[TP, str] | None = None) -> None:
        """Take the committed progress (next offset to read) read from the commit topic,
        and the source topic id each record was written for ("" or absent: unknown)."""
        for tp, offset in committed.items():
            self.starts[tp] = offset
            self.has_progress.add(tp)
        self.topic_ids.update({tp: i for tp, i in (topic_ids or {}).items() if i})

    def restart(self, offsets: Mapping[TP, int]) -> None:
        """Partitions of a re-created topic start over at ``offsets``: the progress of the
        deleted topic does not apply to them (their next progress record replaces it)."""
        for tp, offset in offsets.items():
            self.starts[tp] = offset
            self.has_progress.discard(tp)

    def missing(self, partitions: Iterable[TP]) -> list[TP]:
        """The partitions among ``partitions`` that have no start offset yet."""
        return [tp for tp in partitions if tp not in self.starts]

    def add_initial(self, offsets: Mapping[TP, int]) -> None:
        """Start offsets resolved for partitions without progress (``auto.offset.reset``)."""
        self.starts.update(offsets)

    def caught_up(self, ends: Mapping[TP, int]) -> bool:
        """True when every partition of ``ends`` has committed progress at or past its end."""
        return all(
            tp in self.has_progress and self.starts.get(tp, 0) >= end for tp, end in ends.items()
        )

    def ranges(
        self, topics: Mapping[str, TopicInfo], ends: Mapping[TP, int] | None
    ) -> list[PartitionRange]:
        """One range per partition of ``topics`` still to copy.

        With ``ends`` (``--until-caught-up``) only the partitions captured at start count,
        and those already committed up to their end are left out."""
        out = []
        for t, info in topics.items():
            for p in range(info.partitions):
                if ends is not None and (t, p) not in ends:
                    continue  # a partition added after the start (--until-caught-up)
                end = ends.get((t, p)) if ends is not None else None
                start = self.starts[(t, p)]
                if end is not None and start >= end and (t, p) in self.has_progress:
                    continue
                out.append(PartitionRange(t, p, start, end, (t, p) in self.has_progress))
        return out

    def fold(
        self,
        lease_id: int,
        summaries: Iterable[RunnerSummary],
        stats: PipelineStats,
        committed: dict[TP, int],
    ) -> list[str]:
        """Take the runners' committed offsets into the positions and ``committed`` (the
        planner's view of every member's progress), their totals into ``stats``; logs one
        line per runner and returns the runners' errors (first one first)."""
        errors = []
        for s in summaries:
            log.info(
                "lease %d runner %d: %d partitions, %d records in %.1f s%s",
                lease_id,
                s.group,
                len(s.partitions),
                s.records,
                s.seconds,
                f", error: {s.error}" if s.error else "",
            )
            self.take(s.partitions, committed)
            stats.records += s.records
            stats.bytes += s.bytes
            stats.skipped += s.skipped
            stats.filtered += s.filtered
            stats.transform_failed += s.transform_failed
            stats.schemas_registered += s.schemas_registered
            if s.error:
                errors.append(s.error)
        return errors

    def take(self, outcomes: Iterable[PartitionOutcome], committed: dict[TP, int]) -> None:
        """Take runners' committed offsets into the positions and ``committed``."""
        for o in outcomes:
            tp = (o.topic, o.partition)
            if o.progress_written:
                self.starts[tp] = max(self.starts.get(tp, 0), o.committed)
                self.has_progress.add(tp)
            committed[tp] = self.starts[tp]


def starts_at(
    given: Mapping[TP, int],
    partitions: Iterable[TP],
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
) -> tuple[dict[TP, int], dict[TP, tuple[int, int]]]:
    """Start offsets of partitions without progress when the run was given them (the
    reverse run's fork point, :mod:`k2k.migration.fork`), and the ranges lost meanwhile.

    A partition in ``given`` starts at its offset. One not in it starts at its earliest
    offset: the fork records every partition there was, so this one was added since and
    all of it is new. One whose end (``latest``, uncommitted included) is below its offset
    was created again since the fork: all of it is new too. One whose earliest offset is
    past its offset lost ``(offset, earliest)`` to retention and starts at the earliest.

    >>> starts_at({("t", 0): 5, ("t", 1): 9, ("t", 2): 1}, [("t", 0), ("t", 1), ("t", 2), ("t", 3)],
    ...           {("t", 0): 0, ("t", 1): 0, ("t", 2): 4, ("t", 3): 0},
    ...           {("t", 0): 8, ("t", 1): 3, ("t", 2): 6, ("t", 3): 2})
    ({('t', 0): 5, ('t', 1): 0, ('t', 2): 4, ('t', 3): 0}, {('t', 2): (1, 4)})
    """
    starts: dict[TP, int] = {}
    lost: dict[TP, tuple[int, int]] = {}
    for tp in partitions:
        at = given.get(tp)
        if at is None or at > latest[tp]:
            starts[tp] = earliest[tp]
        else:
            starts[tp] = max(at, earliest[tp])
            if at < earliest[tp]:
                lost[tp] = (at, earliest[tp])
    return starts, lost
