"""Readiness as ``/readyz`` answers it: replicating or caught up, not in a long outage, not
failed (docs/operations.md#health-endpoints).

Runs on: driver (``k2k start -t``) and the Offset Mapping app (``k2k offset-mapping start
-t``). Probes ask from the HTTP server's threads; the planner or the app only record events
here, so nothing in the copy path waits on a probe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from k2k.observability.units import duration_text

__all__ = ["AppReadiness", "Health", "PipelineReadiness"]


@dataclass(frozen=True, slots=True)
class Health:
    """One readiness answer: ``reason`` is one line, why (not) ready."""

    ready: bool
    reason: str


class _Fatal:
    """The error that ended the run, once there is one: never ready again."""

    def __init__(self) -> None:
        self.error: str | None = None

    def failed(self, exc: BaseException) -> None:
        self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


class PipelineReadiness(_Fatal):
    """Runs on: driver. Ready once a lease runs, while the pipeline is caught up or its
    committed progress moved within ``max_stall_s``, and while no cluster has been
    unreachable for longer than that.

    >>> clock = [0.0]
    >>> r = PipelineReadiness(lambda: (5, 100), lambda: None, lambda: None, 30, lambda: clock[0])
    >>> r.check().reason
    'starting: no lease yet'
    >>> r.lease_started(); r.check()
    Health(ready=True, reason='replicating, 5 records behind')
    >>> clock[0] = 31.0; r.check()
    Health(ready=False, reason='no progress for 31 s with 5 records behind')

    Idle and caught up for an hour (probes and scrapes keep asking), then records arrive:
    the stall counts from the last answer that found it caught up.

    >>> progress = [(0, 100)]
    >>> r = PipelineReadiness(lambda: progress[0], lambda: None, lambda: None, 30, lambda: clock[0])
    >>> r.lease_started(); clock[0] = 3590.0; r.check().reason
    'caught up'
    >>> clock[0] = 3600.0; progress[0] = (7, 100); r.check().ready
    True
    """

    def __init__(
        self,
        progress: Callable[[], tuple[int, int]],
        down_since: Callable[[], float | None],
        describe: Callable[[], str | None],
        max_stall_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``progress``: (records behind, sum of committed offsets) of this member's
        partitions; ``down_since`` and
        ``describe``: the cluster watch's outage, on ``clock``'s time."""
        super().__init__()
        self._progress = progress
        self._down_since = down_since
        self._describe = describe
        self.max_stall_s = max_stall_s
        self._clock = clock
        self._lock = threading.Lock()
        self._running = False
        self._committed: int | None = None
        self._moved_at = clock()

    def lease_started(self) -> None:
        self._running = True

    def check(self) -> Health:
        if self.error is not None:
            return Health(False, f"failed: {self.error}")
        if not self._running:
            return Health(False, "starting: no lease yet")
        now = self._clock()
        down = self._down_since()
        if down is not None and now - down > self.max_stall_s:
            outage = self._describe() or "a cluster is unreachable"
            return Health(False, f"{outage} for {duration_text(now - down)}")
        behind, committed = self._progress()
        with self._lock:
            # Caught up counts as moving: a burst after an idle hour is not an hour's stall.
            if committed != self._committed or behind == 0:
                self._committed, self._moved_at = committed, now
            stalled = now - self._moved_at
        if behind == 0:
            return Health(True, "caught up")
        if stalled > self.max_stall_s:
            return Health(
                False, f"no progress for {duration_text(stalled)} with {behind} records behind"
            )
        return Health(True, f"replicating, {behind} records behind")


class AppReadiness(_Fatal):
    """Runs on: the Offset Mapping app. Ready while its last pass succeeded and is not older
    than ``max_age_s`` (a few pass intervals).

    >>> clock = [0.0]
    >>> a = AppReadiness(60, lambda: clock[0])
    >>> a.check().ready
    False
    >>> a.passed(); clock[0] = 10.0; a.check()
    Health(ready=True, reason='last pass 10 s ago')
    """

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.max_age_s = max_age_s
        self._clock = clock
        self._passed_at: float | None = None
        self._last_failure: str | None = None

    def passed(self) -> None:
        self._passed_at, self._last_failure = self._clock(), None

    def pass_failed(self, why: str) -> None:
        self._last_failure = why

    def check(self) -> Health:
        if self.error is not None:
            return Health(False, f"failed: {self.error}")
        if self._passed_at is None:
            return Health(False, self._last_failure or "starting: no pass yet")
        age = self._clock() - self._passed_at
        if age > self.max_age_s:
            why = f": {self._last_failure}" if self._last_failure else ""
            return Health(False, f"no pass for {duration_text(age)}{why}")
        return Health(True, f"last pass {duration_text(age)} ago")
