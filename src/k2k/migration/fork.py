"""The fork point: where the target's history parted from the source's.

Runs on: the operator's machine (``k2k start --reverse``, ``k2k status``-like reads: writes
nothing). Once applications write to the target (after ``k2k cutover``, later after a
failover), each target partition has two parts: below the fork offset, what k2k replicated;
from it on, what was written there since. A reverse pipeline copies only the second part
back, so it starts every partition at its fork offset (:mod:`k2k.migration.reverse`).

Where a fork comes from: the pipeline's finished **cut-over record**
(:mod:`k2k.formats.cutover`), written by ``k2k cutover`` (``mode`` ``cutover``) or by
``k2k failover`` (``mode`` ``failover``, the same record): its ``targetEnds``, the target end
offsets once every member had stopped and the command held every claim. Compaction keeps one
record per commit group, the newest, so the newest finished one is the fork. Another kind of
record would only need a ``ForkPoint.of_...`` and a place in :func:`fork_point` (the newer by
:attr:`ForkPoint.at_ms`): a fork is a map of target partitions to offsets, wherever it came
from.

>>> from k2k.formats.cutover import CutoverRecord
>>> rec = CutoverRecord("dr", "dr", ("cut", "drain", "stop", "groups"), {("orders", 0): 9},
...                     {("eu.orders", 0): 12}, (), (), 1700000000000, 1700000005000, "host-a")
>>> fork = ForkPoint.of_record(rec)
>>> fork
ForkPoint(cutover of dr at 1700000005000 on host-a: 1 partitions)
>>> fork.offsets, fork.topics()
({('eu.orders', 0): 12}, {'eu.orders'})
"""

from __future__ import annotations

from dataclasses import dataclass

from k2k.admin.reader import PipelineReader
from k2k.config import PipelineConfig
from k2k.errors import K2KError
from k2k.formats.cutover import CutoverRecord
from k2k.kafka import TP

__all__ = ["ForkPoint", "NoForkPoint", "fork_point"]


class NoForkPoint(K2KError):
    """Raised when a reverse run finds no finished cut-over or failover of the forward
    pipeline: it would not know which target records are new, so it copies nothing."""


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """A fork: per target partition of the forward pipeline, the first offset written
    after the fork (records below it came from the source)."""

    #: Forward target partition -> its end offset at the fork.
    offsets: dict[TP, int]
    #: When the fork was recorded (milliseconds since the epoch, the recording host's clock).
    at_ms: int
    #: Which command recorded it: ``cutover`` or ``failover``.
    by: str
    #: The forward pipeline's commit group the record belongs to.
    group: str
    host: str

    @classmethod
    def of_record(cls, rec: CutoverRecord) -> ForkPoint:
        """The fork of a finished cut-over or failover: its target end offsets. ``at_ms`` is
        when the record was finished (the offsets were read at its ``stop`` step, before)."""
        return cls(dict(rec.target_ends), rec.updated_at_ms, rec.mode, rec.group, rec.host)

    def topics(self) -> set[str]:
        """The forward target topics the fork names."""
        return {t for t, _ in self.offsets}

    def __repr__(self) -> str:
        return (
            f"ForkPoint({self.by} of {self.group} at {self.at_ms} on {self.host}: "
            f"{len(self.offsets)} partitions)"
        )


def fork_point(cfg: PipelineConfig) -> ForkPoint | None:
    """The fork of the forward pipeline ``cfg``: read from its assignment topic on its
    target; None when no cut-over or failover finished there (one still under way is no
    fork: members may still write to the target)."""
    rec = PipelineReader(cfg).assignment().view.cutover
    if rec is None or not rec.done:
        return None
    return ForkPoint.of_record(rec)
