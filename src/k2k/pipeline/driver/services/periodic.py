"""Driver-side chores done every so often between the planner's discovery checks.

Runs on: driver. The topic config and ACL syncs (:mod:`k2k.pipeline.driver.services.configsync`,
:mod:`k2k.pipeline.driver.services.aclsync`) are asked at every discovery check whether they are due; a
failure of theirs is retried at the next interval and never stops replication.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from k2k.kafka.admin import ClusterView

__all__ = ["Interval", "answering", "failure_level"]


class Interval:
    """Runs on: driver. Due once every ``interval_s`` seconds; first due now, or only after
    one interval (``wait_first``)."""

    def __init__(
        self,
        interval_s: float,
        *,
        wait_first: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._due = clock() + (interval_s if wait_first else 0.0)

    def due(self) -> bool:
        """True when the interval has passed since the last time this said True (which
        starts the next one)."""
        now = self._clock()
        if now < self._due:
            return False
        self._due = now + self.interval_s
        return True


def answering(*clusters: ClusterView) -> bool:
    """True unless one of ``clusters`` did not answer its last probe: a chore waits for it
    rather than hold the planner's watch loop for a whole timeout."""
    return all(c.answering for c in clusters)


def failure_level(*clusters: ClusterView) -> int:
    """The level to log a failed chore at: WARNING, or DEBUG while one of ``clusters`` does
    not answer (k2k.observability.reachability reports that outage once)."""
    return logging.WARNING if answering(*clusters) else logging.DEBUG
