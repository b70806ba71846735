"""Foreign writes: records on a replicated target partition that the pipeline did not write.

Runs on: executor, one :class:`ForeignWatch` per runner, as one more run observer
(:mod:`k2k.pipeline.task.observe`). It compares the offsets the target gave the runner's
own records (delivery reports, once per run), does nothing per record, and reads the target
only to check a suspected foreign write exactly-once (below).

**Watched partitions** (:func:`watched_targets`): with ``partition: source``, of target
topics that exactly one source topic is routed to, without bidirectional replication.
There one source partition, owned by one runner at a time, is the only writer k2k has on
a target partition. With ``partition: hash`` or ``producer`` several runners write every
target partition by design, and in active-active the other side's applications do, so
nothing is watched there.

**The rule**, per watched target partition, over the *window* from the first record this
runner wrote there to its newest one::

    gap offsets   G = (newest - first + 1) - records the runner wrote in the window
    foreign       F = G - M      (M: the runner's own transaction markers in the window)

* at-least-once: the idempotent producer's records on one partition take consecutive
  offsets and leave no markers, so M = 0 and F is exact at every run;
* exactly-once: every transaction that wrote the partition puts one marker there, after
  its records. Batches n and n + 2 share a producer (the transaction pair takes turns),
  and a producer cannot add a partition to its next transaction before the coordinator has
  written the markers of its previous one: batch n's marker lands before any record of
  batch n + 2. With c the newest batch that wrote the partition, the markers of its
  batches up to c - 2 are in the window, c's is not (it follows c's records), and
  c - 1's only if there are gap offsets after c - 1's last record. M counts c - 1's
  marker whenever it may be there, so F never counts a marker of the runner's own (no
  false positive); F may trail by one while such a gap is open, and is exact again at the
  next run after a gap-free one. Markers of *another* transactional producer, and its
  aborted records, are foreign offsets like its committed records.

A transaction coordinator that moves while it completes a commit (its broker restarted or
died) may write that transaction's marker twice, one more offset than the rule expects.
So exactly-once, before F grows, the watch reads the data records of the unsettled range
(``read_uncommitted``, aborted ones included: :func:`k2k.kafka.counting.count_records`): when
they are exactly the runner's own, the new offsets are markers and are not counted. That is
the only read, at most :data:`CHECK_LIMIT` offsets; a wider range, or one that cannot be
read, is counted as the rule says.

The count shown is the largest F seen. Limits: records written while no runner copies the
partition (between leases, or before the first record of a lease) are not seen, since the
window starts afresh with each runner; exactly-once assumes a predecessor's markers landed
before this runner's first record (its commit returned before it released the partition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from k2k.kafka import TP
from k2k.pipeline.task.commit.ledger import ProgressLedger
from k2k.pipeline.task.faults import RunnerFaults
from k2k.pipeline.task.observe import ProducedRun
from k2k.stages.topicplan import TopicPlan

__all__ = ["CHECK_LIMIT", "DataRecords", "ForeignCounter", "ForeignWatch", "watched_targets"]

log = logging.getLogger("k2k.runner")

#: No batch: a target partition's first writing batch has none before it.
_NONE = -2

#: The widest range of target offsets a suspected foreign write is checked over by reading.
CHECK_LIMIT = 200_000

#: The data records of a target partition's offsets ``[first, last]``, every one including
#: aborted ones; None when they could not be read.
DataRecords = Callable[[TP, int, int], int | None]


class ForeignCounter(Protocol):
    """Told each watched target partition's count (the runner's tally, for metrics)."""

    def foreign(self, topic: str, partition: int, records: int) -> None: ...


def watched_targets(plans: Mapping[str, TopicPlan]) -> frozenset[str]:
    """The target topics whose partitions only this pipeline's runners, one at a time, write
    (see the module doc); empty when any plan spreads records over target partitions.

    Returns an empty set when nothing can be watched, and the runner then adds no observer.
    """
    if any(p.partitioning.spreads for p in plans.values()):
        return frozenset()
    fed: dict[str, int] = {}
    for plan in plans.values():
        fed[plan.target] = fed.get(plan.target, 0) + 1
    return frozenset(p.target for p in plans.values() if p.marker is None and fed[p.target] == 1)


@dataclass(slots=True)
class _Window:
    """One watched target partition, since this runner's first record there."""

    source: TP
    #: The count read with the source partition's progress (earlier runners').
    base: int
    first: int
    last: int
    ours: int
    #: Batches that wrote here; the newest, the one before it and where that one ended.
    batches: int = 1
    batch: int = 0
    before: int = _NONE
    before_last: int = -1
    ours_before: int = 0
    found: int = 0
    #: Every foreign record at or below this offset is counted; ``ours`` at that point.
    exact_to: int = -1
    ours_exact: int = 0
    #: Offsets found by reading to be transaction markers beyond the rule's (written again).
    markers_again: int = 0
    told: bool = False


class ForeignWatch:
    """Runs on: executor, in the runner's thread. Counts foreign records per watched target
    partition, writes the count into the ledger (and so into progress records), tells the
    tally, and warns once per partition or fails (``errorHandling.onForeignWrites``).

    ``batch`` returns the open transaction's number (exactly-once); None at-least-once.
    ``data_records`` reads a range of the target (exactly-once only: the check above).
    """

    __slots__ = (
        "_batch",
        "_data_records",
        "_windows",
        "counter",
        "faults",
        "ledger",
        "policy",
        "watched",
    )

    def __init__(
        self,
        watched: frozenset[str],
        ledger: ProgressLedger,
        faults: RunnerFaults,
        policy: str,
        batch: Callable[[], int] | None,
        counter: ForeignCounter | None = None,
        data_records: DataRecords | None = None,
    ) -> None:
        self.watched = watched
        self.ledger = ledger
        self.faults = faults
        self.policy = policy
        self.counter = counter
        self._batch = batch
        self._data_records = data_records
        self._windows: dict[TP, _Window] = {}

    def reassigned(self, watched: frozenset[str], gone: set[TP]) -> None:
        """The runner's partitions changed: the topics watched now, and the source
        partitions let go (their windows end: another runner may write there next)."""
        self.watched = watched
        for target in [t for t, w in self._windows.items() if w.source in gone]:
            del self._windows[target]

    def on_run(self, run: ProducedRun) -> None:
        if run.target_topic not in self.watched:
            return
        target = (run.target_topic, run.target_partition)
        batch = self._batch() if self._batch is not None else 0
        w = self._windows.get(target)
        if w is None or run.target_first <= w.last:  # a new window (or a recreated topic)
            source = (run.source_topic, run.source_partition)
            w = _Window(source, self.ledger.foreign.get(source, 0), run.target_first, 0, 0)
            w.batch, w.exact_to = batch, run.target_first - 1
            self._windows[target] = w
        elif batch != w.batch:
            w.before, w.before_last, w.ours_before = w.batch, w.last, w.ours
            w.batch = batch
            w.batches += 1
        w.last = run.target_last
        w.ours += run.count
        self._settle(target, w)

    def _settle(self, target: TP, w: _Window) -> None:
        """The rule of the module doc, once per run."""
        gaps = w.last - w.first + 1 - w.ours
        exact = True
        markers = 0
        if self._batch is not None:
            markers = w.batches - 1  # every batch's but the newest's
            if w.before == w.batch - 1:
                after = (w.last - w.before_last) - (w.ours - w.ours_before)
                if after == 0:
                    markers -= 1  # the previous batch's marker is past the window
                else:
                    exact = False
        found = gaps - markers - w.markers_again
        if found > w.found and self._only_markers(target, w):
            w.markers_again += found - w.found
            found = w.found
        if found > w.found:
            self._found(target, w, found - w.found)
            w.found = found
            self.ledger.foreign[w.source] = w.base + found
            if self.counter is not None:
                self.counter.foreign(target[0], target[1], found)
        if exact:
            w.exact_to, w.ours_exact = w.last, w.ours

    def _only_markers(self, target: TP, w: _Window) -> bool:
        """Whether the unsettled range holds no data record but the runner's own."""
        if self._data_records is None or w.last - w.exact_to > CHECK_LIMIT:
            return False
        data = self._data_records(target, w.exact_to + 1, w.last)
        if data != w.ours - w.ours_exact:
            return False
        log.info(
            "%s[%d]: offsets %d to %d hold a transaction marker written again (its "
            "coordinator moved), not a foreign write",
            target[0],
            target[1],
            w.exact_to + 1,
            w.last,
        )
        return True

    def _found(self, target: TP, w: _Window, new: int) -> None:
        where = (
            f"{new} record(s) on {target[0]}[{target[1]}] between target offsets "
            f"{w.exact_to + 1} and {w.last} were not written by this pipeline"
        )
        if self.policy == "fail":
            self.faults.fail(
                f"foreign writes on the target: {where} (errorHandling.onForeignWrites: fail); "
                "only k2k may write to a replicated topic: stop the other producer, or set "
                "errorHandling.onForeignWrites: warn"
            )
        elif not w.told:
            w.told = True
            log.warning(
                "foreign writes on the target: %s; another producer writes to a replicated "
                "topic (errorHandling.onForeignWrites: warn; counted in k2k status and "
                "k2k.foreign.records, not warned again for this partition)",
                where,
            )
