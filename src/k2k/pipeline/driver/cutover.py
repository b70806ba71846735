"""The member side of ``k2k cutover``: a running or starting member stops once the pipeline
is drained.

Runs on: driver. ``k2k cutover`` talks to the members only through the assignment topic:
it writes a :class:`~k2k.formats.cutover.CutoverRecord` per commit group and rewrites it
after every step. Members read it like their other assignment records
(:attr:`~k2k.coordination.assignment.AssignmentView.cutover`) and act on it once it says
*drained* (step ``drain`` done: committed progress reached the cut everywhere):

* a member that reads it while a lease runs, or while it waits idle or as a standby
  (:meth:`~k2k.pipeline.driver.membership.Membership.changed`), ends the lease as on a
  stop: the runners commit what they copied and return, the planner releases their
  partitions, the member leaves (its ``left`` record) and the run returns normally with
  :attr:`~k2k.observability.stats.PipelineStats.cutover` set;
* a member that reads it when it joins (a start after the cut-over, e.g. a supervisor's
  restart) raises :class:`CutOver` before it claims, reads progress or starts Spark; the
  planner catches it and returns the same way, having copied nothing.

Before ``drain`` (step ``cut`` only) the record changes nothing: the members keep copying
up to the cut, which is what the command waits for.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from k2k.errors import K2KError

if TYPE_CHECKING:
    from k2k.coordination.assignment import AssignmentView
    from k2k.formats.cutover import CutoverRecord

__all__ = ["CutOver", "describe", "drained"]


class CutOver(K2KError):
    """Internal: the pipeline was cut over before this member claimed anything; the planner
    catches it and ends the run cleanly (:attr:`record` says when and by whom)."""

    def __init__(self, record: CutoverRecord) -> None:
        super().__init__(describe(record))
        self.record = record


def drained(view: AssignmentView) -> CutoverRecord | None:
    """The commit group's cut-over record when it says the members must stop, else None."""
    record = view.cutover
    return record if record is not None and record.drained else None


def describe(record: CutoverRecord) -> str:
    """What happened, for the log and ``k2k start``'s last line.

    >>> from k2k.formats.cutover import CutoverRecord
    >>> rec = CutoverRecord("g", "p", ("cut", "drain"), {}, {}, (), (), 1700000000000,
    ...                     1700000002000, "host-a")
    >>> describe(rec)
    'the pipeline was cut over to the target by k2k cutover (cut at 2023-11-14T22:13:20Z, host host-a)'
    """
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.started_at_ms / 1000))
    host = record.host or "unknown"
    if record.mode == "failover":
        return f"the pipeline was failed over to the target by k2k failover (at {at}, host {host})"
    return f"the pipeline was cut over to the target by k2k cutover (cut at {at}, host {host})"
