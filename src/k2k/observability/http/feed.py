"""The ``/api/status`` document: a pipeline's status plus the last minutes of its history.

Runs on: the process that serves the page (driver, or ``k2k status --serve``). Reading a
pipeline's status costs reads of the control topics and the source, so the feed samples only
while someone looks: a request starts a daemon thread that samples every ``interval``
seconds and stops once no request came for :data:`VIEWED_S`. The first request after a
pause samples at once.

Invariants:

* history times increase, and no sample is older than :data:`HISTORY_S` before the newest;
* ``recordsPerSecond`` is None for a sample with no predecessor within three intervals
  (after a pause, an average over the pause would pass for a rate).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from k2k.observability.readiness import Health

__all__ = ["HISTORY_S", "MAX_ERRORS", "STALL_S", "VIEWED_S", "StatusFeed", "error_entry"]

log = logging.getLogger("k2k.metrics")

#: How much history the page's charts get.
HISTORY_S = 600.0
#: A page counts as viewed this long after its last request.
VIEWED_S = 30.0
#: At most this many errors are shown, newest last.
MAX_ERRORS = 20
#: Records behind growing this long without a commit makes a pipeline not ready.
STALL_S = 60.0
#: How long a request waits for the first sample before answering without one.
FIRST_SAMPLE_WAIT_S = 20.0

Doc = dict[str, Any]


def error_entry(exc: BaseException, at: float | None = None) -> dict[str, Any]:
    """One entry of ``errors``: when, the error's class and its one-line message."""
    return {
        "at": time.time() if at is None else at,
        "class": type(exc).__name__,
        "message": str(exc).splitlines()[0] if str(exc) else "",
    }


@dataclass(frozen=True, slots=True)
class _Sample:
    t: float
    committed: dict[tuple[str, int], int]
    rate: float | None
    behind: int | None
    recovery_s: float | None
    alive: int | None

    @property
    def committed_sum(self) -> int:
        return sum(self.committed.values())


class StatusFeed:
    """Callable as the server's ``status`` source; :meth:`health` as its ``health``.

    ``snapshot`` returns the ``k2k status --json`` document (``read_status(cfg).to_json()``).
    ``ready`` and ``errors`` come from the live driver when it has them; without ``ready``
    the feed judges from what it reads (:meth:`judge`), without ``errors`` it shows only its
    own failed reads. A failed read never raises: it becomes an error on the page.
    """

    def __init__(
        self,
        snapshot: Callable[[], Doc],
        *,
        source: str,
        interval: float = 2.0,
        ready: Callable[[], Health] | None = None,
        errors: Callable[[], list[dict[str, Any]]] | None = None,
        pipeline: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._snapshot = snapshot
        self._source = source
        self._interval = interval
        self._ready = ready
        self._errors = errors
        self._pipeline = pipeline
        self._clock = clock
        self._lock = threading.Lock()
        self._viewed_at = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._first = threading.Event()
        self._latest: Doc | None = None
        self._history: deque[_Sample] = deque()
        self._read_errors: deque[dict[str, Any]] = deque(maxlen=MAX_ERRORS)
        self._failing: str | None = None

    def __call__(self) -> Doc:
        """The ``/api/status`` document (fields: docs/operations.md#status-page)."""
        self._viewed()
        with self._lock:
            doc: Doc = dict(self._latest or self._empty())
            history = list(self._history)
        health = self.health_now()
        doc.update(
            v=1,
            source=self._source,
            ready={"ready": health.ready, "reason": health.reason},
            history={
                "t": [s.t for s in history],
                "recordsPerSecond": [s.rate for s in history],
                "recordsBehind": [s.behind for s in history],
                "recoveryPointSeconds": [s.recovery_s for s in history],
            },
            errors=self._all_errors(),
            rates={"recordsPerSecond": history[-1].rate if history else None},
        )
        return doc

    def health(self) -> Health:
        """Readiness for ``/readyz``; a probe counts as a viewer, so what it judges is fresh."""
        self._viewed()
        return self.health_now()

    def health_now(self) -> Health:
        """Readiness from what was read so far (no read, no waiting)."""
        if self._ready is not None:
            return self._ready()
        with self._lock:
            return self.judge(list(self._history), self._failing)

    def close(self) -> None:
        """Stop sampling (the thread is a daemon: not closing is harmless)."""
        self._stop.set()

    @staticmethod
    def judge(history: list[_Sample], failing: str | None) -> Health:
        """Readiness from the control topics alone: ready while a member is alive and
        records behind do not grow for :data:`STALL_S` without a commit."""
        if failing is not None:
            return Health(False, f"cannot read the pipeline's state: {failing}")
        if not history:
            return Health(False, "no status read yet")
        last = history[-1]
        if not last.alive:
            return Health(False, "no member of the commit group is alive")
        window = [s for s in history if s.t >= last.t - STALL_S]
        first = window[0]
        stalled = (
            last.t - first.t >= STALL_S * 0.9
            and last.committed_sum == first.committed_sum
            and (last.behind or 0) > (first.behind or 0)
        )
        if stalled:
            return Health(
                False,
                f"records behind grew from {first.behind} to {last.behind} in "
                f"{last.t - first.t:.0f} s without a commit",
            )
        return Health(True, f"{last.alive} members alive, {last.behind} records behind")

    def _viewed(self) -> None:
        """Note a viewer; start sampling if it stopped; wait for the first sample."""
        with self._lock:
            self._viewed_at = time.monotonic()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="k2k-status-feed", daemon=True
                )
                self._thread.start()
        self._first.wait(FIRST_SAMPLE_WAIT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            with self._lock:
                if time.monotonic() - self._viewed_at > VIEWED_S:
                    self._thread = None
                    return
            self._stop.wait(self._interval)

    def _sample(self) -> None:
        t = self._clock()
        try:
            doc = self._snapshot()
        except Exception as exc:  # the page's error boundary: shown there, never a crash
            log.debug("status page: read failed", exc_info=True)
            entry = error_entry(exc, t)
            with self._lock:
                self._read_errors.append(entry)
                self._failing = f"{entry['class']}: {entry['message']}"
            self._first.set()
            return
        with self._lock:
            self._latest = doc
            self._failing = None
            self._history.append(self._next(t, doc))
            while self._history and self._history[0].t < t - HISTORY_S:
                self._history.popleft()
        self._first.set()

    def _next(self, t: float, doc: Doc) -> _Sample:
        """The sample of ``doc`` read at ``t``, its rate from the previous sample."""
        committed = {
            (p["topic"], p["partition"]): p["committed"]
            for p in doc.get("partitions", [])
            if p.get("committed") is not None
        }
        prev = self._history[-1] if self._history else None
        rate = None
        if prev is not None and 0 < t - prev.t <= 3 * self._interval:
            moved = sum(max(0, c - prev.committed.get(k, c)) for k, c in committed.items())
            rate = round(moved / (t - prev.t), 3)
        totals = doc.get("totals") or {}
        return _Sample(
            t,
            committed,
            rate,
            totals.get("recordsBehind"),
            totals.get("maxLagSeconds"),
            totals.get("membersAlive"),
        )

    def _all_errors(self) -> list[dict[str, Any]]:
        """The driver's errors and the feed's failed reads, oldest first, the newest
        :data:`MAX_ERRORS`."""
        supplied: list[dict[str, Any]] = []
        if self._errors is not None:
            try:
                supplied = list(self._errors())
            except Exception as exc:  # as a failed read: shown, never a crash
                supplied = [error_entry(exc)]
        with self._lock:
            merged = supplied + list(self._read_errors)
        return sorted(merged, key=lambda e: e.get("at") or 0)[-MAX_ERRORS:]

    def _empty(self) -> Doc:
        """The document's status fields before any read succeeded."""
        return {
            "pipeline": self._pipeline,
            "members": [],
            "partitions": [],
            "totals": None,
        }
