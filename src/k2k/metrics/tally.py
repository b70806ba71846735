"""The runner's metrics: running totals fed by the run observer and the commit strategy.

Runs on: executor, one per runner task when ``-t/--telemetry`` is on. Its work per record is
none: it is called once per acknowledged run (:class:`~k2k.pipeline.task.observe.RunObserver`)
and once per commit. The lease channel's thread takes a frame of it at most once a second
(:meth:`RunTally.frame`), so its state is guarded by a lock.
"""

from __future__ import annotations

import bisect
import secrets
import threading
import time
from typing import TYPE_CHECKING

from k2k.metrics.frames import (
    AGE_BOUNDS_S,
    COMMIT_BOUNDS_S,
    LATENCY_BOUNDS_S,
    Buckets,
    PartitionTotals,
    RunnerFrame,
)

if TYPE_CHECKING:
    from k2k.metrics.clientstats import ClientStatistics
    from k2k.pipeline.task.observe import ProducedRun

__all__ = ["RunTally"]


def _add(buckets: Buckets, bounds: tuple[float, ...], value: float) -> None:
    i = bisect.bisect_left(bounds, value)
    buckets.counts[i] += 1
    buckets.sums[i] += value


class RunTally:
    """Runs on: executor. Records, bytes and latency per source partition, and commit
    durations, of one runner task.

    >>> from k2k.pipeline.task.observe import ProducedRun
    >>> t = RunTally(lease=1)
    >>> run = ProducedRun("t", 0, 10, 14, 5, "t2", byte_count=500, source_timestamp=0)
    >>> t.on_run(run); t.committed(0.02); t.commit_failed()
    >>> f = t.frame()
    >>> (f.partitions[("t", 0)].records, f.partitions[("t", 0)].bytes, f.commit_failures)
    (5, 500, 1)
    >>> t.frame().partitions  # nothing changed since
    {}
    """

    def __init__(self, lease: int) -> None:
        self.runner = secrets.token_hex(6)
        self.lease = lease
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], PartitionTotals] = {}
        self._changed: set[tuple[str, int]] = set()
        self._commits = Buckets.empty(COMMIT_BOUNDS_S)
        self._commit_failures = 0
        #: Foreign records counted per watched target partition (k2k.pipeline.task.foreign).
        self._foreign: dict[tuple[str, int], int] = {}
        self._seq = 0
        #: The runner's client statistics, when on (metrics.clientStatistics).
        self.client_statistics: ClientStatistics | None = None

    def on_run(self, run: ProducedRun) -> None:
        """Per acknowledged run: its records and bytes, and of its last record the latency
        (source timestamp to acknowledgement) and the age when it was read (both skipped
        when the record has no timestamp)."""
        tp = (run.source_topic, run.source_partition)
        with self._lock:
            totals = self._partitions.get(tp)
            if totals is None:
                totals = self._partitions[tp] = PartitionTotals(target=run.target_topic)
            totals.records += run.count
            totals.bytes += run.byte_count
            totals.key_bytes += run.key_bytes
            if run.source_timestamp > 0:
                stamp = run.source_timestamp / 1000
                _add(totals.latency, LATENCY_BOUNDS_S, max(0.0, time.time() - stamp))
                if run.read_at:
                    _add(totals.age, AGE_BOUNDS_S, max(0.0, run.read_at - stamp))
            self._changed.add(tp)

    def committed(self, seconds: float) -> None:
        """A commit took ``seconds`` (from its commit point until its progress is written)."""
        with self._lock:
            _add(self._commits, COMMIT_BOUNDS_S, seconds)

    def commit_failed(self) -> None:
        with self._lock:
            self._commit_failures += 1

    def foreign(self, topic: str, partition: int, records: int) -> None:
        """``records`` foreign records found so far on target ``topic[partition]``."""
        with self._lock:
            self._foreign[(topic, partition)] = records

    def frame(self, full: bool = False) -> RunnerFrame:
        """The totals of the partitions that changed since the last frame (``full``: of
        all, for the summary, so a frame lost on the way is made good), and the commits."""
        with self._lock:
            self._seq += 1
            changed, self._changed = self._changed, set()
            if full:
                changed = set(self._partitions)
            return RunnerFrame(
                self.runner,
                self.lease,
                {tp: x.copy() for tp, x in self._partitions.items() if tp in changed},
                self._seq,
                Buckets(list(self._commits.counts), list(self._commits.sums)),
                self._commit_failures,
                dict(self._foreign),
                clients=self.client_statistics.summaries() if self.client_statistics else {},
            )
