"""Riding out an outage: what the planner does when a lease fails because a cluster did
not answer in time (:class:`~k2k.errors.Unavailable`).

Runs on: driver. The failed lease has abandoned what it had not committed (exactly-once:
its open transactions aborted, or left to the fence of the next runner of the same
transactional id), so nothing is lost by trying again: the planner waits, with backoff,
until both clusters answer the reachability probes again, then plans a new lease, whose
runners read the committed progress afresh. ``errorHandling.maxOutage`` bounds the wait;
past it the pipeline stops with the last failure. What each outage looks like from the
outside is in docs/operations.md#outages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from k2k.errors import Unavailable
from k2k.kafka.admin import ClusterView
from k2k.observability.units import duration_text

__all__ = ["OutageRider"]

log = logging.getLogger("k2k.planner")

#: The first wait after a failed lease, doubled after each further failure up to the most.
FIRST_BACKOFF_S = 1.0
MOST_BACKOFF_S = 30.0
#: How often the wait looks at the clusters' reachability (probed by ClusterWatch).
_LOOK_S = 0.5


class OutageRider:
    """Runs on: driver. Waits out one outage at a time: from the first failed lease to
    the next lease that ends without an outage failure."""

    def __init__(
        self,
        views: Mapping[str, ClusterView],
        max_outage_s: float | None,
        stop: threading.Event,
        down_since: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        describe: Callable[[], str | None] = lambda: None,
        ended: Callable[[], bool] = lambda: False,
    ) -> None:
        """``down_since``: when the probes first found a cluster unreachable (``clock``'s
        time), so an outage counts from then, not from the lease failure it caused;
        ``describe``: that outage in words, for the error of a lease ended by the bound;
        ``ended``: True when the run must end anyway (``k2k failover`` drained the pipeline
        while its source is away), asked while waiting."""
        self.views = views
        self.down_since = down_since
        self.describe = describe
        self.max_outage_s = max_outage_s
        self.stop = stop
        self.ended = ended
        self.clock = clock
        self.since: float | None = None  # when the current outage began, None outside one
        self.backoff_s = FIRST_BACKOFF_S
        self.announced = False  # "replicating again" was said for the current outage
        #: Outages ridden out so far (each counted once, when it began).
        self.outages = 0
        #: The error :meth:`outlasted` last returned: the run ends with it, whatever the
        #: probes say afterwards.
        self.decided: Unavailable | None = None

    def resumed(self) -> None:
        """A lease started during an outage: say so once. The outage still counts (a
        cluster that answers probes may still fail writes) until :meth:`over`."""
        if self.since is not None and not self.announced:
            self.announced = True
            log.info("replicating again after %s", duration_text(self.clock() - self.since))

    def over(self) -> None:
        """A lease ended without an outage failure: the outage, if any, is over."""
        self.resumed()
        self.since, self.backoff_s, self.announced = None, FIRST_BACKOFF_S, False

    def outlasted(self) -> Unavailable | None:
        """The error to end the run with when a cluster has not answered the probes for
        longer than ``errorHandling.maxOutage`` (checked while a lease runs or a member
        idles, see LeaseJob), None otherwise or once a stop was requested. A snapshot: the
        planner ends the run with it even if the cluster answers meanwhile."""
        since = self.down_since()
        if self.max_outage_s is None or since is None or self.stop.is_set():
            return None
        lasted = self.clock() - since
        if lasted <= self.max_outage_s:
            return None
        self.decided = Unavailable(
            f"{self.describe() or 'a cluster did not answer'}; gave up after "
            f"{duration_text(lasted)} (errorHandling.maxOutage {duration_text(self.max_outage_s)})"
        )
        return self.decided

    def wait(self, failure: Unavailable) -> None:
        """After a lease failed with ``failure``: wait until both clusters answer (or a stop
        is requested). Raises ``failure``, extended, once the outage is longer than
        ``errorHandling.maxOutage``."""
        if failure is self.decided:
            raise failure  # decided already: the lease was ended for it
        if self.stop.is_set():
            return  # a requested stop ends the run cleanly, also past the bound
        if self.since is None:
            self.since = min(self.clock(), self.down_since() or float("inf"))
            self.outages += 1
            self._give_up_if_too_long(failure)  # no "paused" line for a wait that never starts
            bound = (
                "as long as it takes"
                if self.max_outage_s is None
                else (f"at most {duration_text(self.max_outage_s)}")
            )
            log.warning(
                "replication paused: %s; retrying when both clusters answer (%s, "
                "errorHandling.maxOutage)",
                failure,
                bound,
            )
        else:
            self.announced = False
            log.debug("lease failed again during the outage: %s", failure)
        self._give_up_if_too_long(failure)
        if self.stop.wait(self.backoff_s) or self.ended():
            return
        self.backoff_s = min(self.backoff_s * 2, MOST_BACKOFF_S)
        while not all(view.answering for view in self.views.values()):
            self._give_up_if_too_long(failure)
            if self.stop.wait(_LOOK_S) or self.ended():
                return

    def _give_up_if_too_long(self, failure: Unavailable) -> None:
        assert self.since is not None
        if self.max_outage_s is not None and self.clock() - self.since > self.max_outage_s:
            raise Unavailable(
                f"{failure}; gave up after {duration_text(self.clock() - self.since)} "
                f"(errorHandling.maxOutage {duration_text(self.max_outage_s)})"
            )
