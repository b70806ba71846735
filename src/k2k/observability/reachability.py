"""Whether the source and target clusters answer, said in a few lines instead of thousands.

Runs on: driver. During an outage every Kafka client reports a connection failure several
times a second; those lines go to DEBUG (:mod:`k2k.kafka.clientlog`, and the runners'
error callbacks). Instead, :class:`ClusterWatch` asks each cluster for its brokers
(``ClusterView.probe``: a metadata request without topics) every
:data:`PROBE_INTERVAL_S` seconds, and :class:`Reachability` turns the answers into at most
three kinds of line per cluster and outage:

* ``WARNING target cluster unreachable at HOST:PORT: <cause>`` — a probe got no answer
  within the cluster's ``connectTimeout``;
* ``WARNING target cluster still unreachable at HOST:PORT after 45 s: <cause>`` —
  every :data:`REMIND_EVERY_S` seconds while no probe is answered;
* ``INFO target cluster reachable again at HOST:PORT after 2 min 10 s`` — the first answered
  probe.

"Unreachable" thus means: *this driver* got no metadata answer within ``connectTimeout``;
"back" means: it got one. The outage is timed from when the first unanswered probe was
sent. Runners are not asked (each would report the same outage once per process); an
executor that cannot reach a cluster the driver can reach shows as a lease that makes no
progress and, for the target, ends with the delivery timeout error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from k2k.observability.units import duration_text

if TYPE_CHECKING:
    from k2k.kafka.admin import ClusterView

__all__ = ["ClusterWatch", "Reachability"]

log = logging.getLogger("k2k.reachability")

#: Seconds between a probe's answer (or failure) and the next probe of that cluster.
PROBE_INTERVAL_S = 5.0
#: Seconds between two "still unreachable" lines for one cluster.
REMIND_EVERY_S = 30.0
#: How often the watch thread looks at its probes; bounds how late a line can be.
_TICK_S = 0.5


@dataclass
class _Outage:
    where: str
    since: float
    said_at: float
    cause: str


class Reachability:
    """The log lines about clusters that do not answer: one when a cluster becomes
    unreachable, one every ``remind_every_s`` while it stays so, one when it is back.

    Pure logic on an injected clock, written by one thread (the watch's); the planner reads
    :meth:`down_since` and :meth:`describe` from its own."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        remind_every_s: float = REMIND_EVERY_S,
        logger: logging.Logger = log,
    ) -> None:
        self.clock = clock
        self.remind_every_s = remind_every_s
        self.log = logger
        self._outages: dict[str, _Outage] = {}

    def unreachable(self, cluster: str) -> bool:
        return cluster in self._outages

    def down_since(self) -> float | None:
        """When the oldest current outage began (this clock), None while all answer."""
        return min((o.since for o in list(self._outages.values())), default=None)

    def describe(self) -> str | None:
        """The oldest current outage in words (``target cluster unreachable at HOST:PORT:
        <cause>``), None while all answer."""
        outages = sorted(list(self._outages.items()), key=lambda item: item[1].since)
        if not outages:
            return None
        cluster, outage = outages[0]
        return f"{cluster} cluster unreachable at {outage.where}: {outage.cause}"

    def failed(self, cluster: str, where: str, cause: str, since: float) -> None:
        """A probe of ``cluster`` sent at ``since`` got no answer, because of ``cause``."""
        outage = self._outages.get(cluster)
        if outage is not None:
            outage.cause = cause  # the next reminder quotes the newest cause
            return
        now = self.clock()
        self._outages[cluster] = _Outage(where, since, now, cause)
        self.log.warning("%s cluster unreachable at %s: %s", cluster, where, cause)

    def answered(self, cluster: str) -> None:
        """A probe of ``cluster`` was answered."""
        outage = self._outages.pop(cluster, None)
        if outage is not None:
            took = duration_text(self.clock() - outage.since)
            self.log.info("%s cluster reachable again at %s after %s", cluster, outage.where, took)

    def remind(self) -> None:
        """Say again which clusters are still unreachable, each at most every
        ``remind_every_s`` seconds."""
        now = self.clock()
        for cluster, outage in self._outages.items():
            if now - outage.said_at >= self.remind_every_s:
                outage.said_at = now
                self.log.warning(
                    "%s cluster still unreachable at %s after %s: %s",
                    cluster,
                    outage.where,
                    duration_text(now - outage.since),
                    outage.cause,
                )


@dataclass
class _Probe:
    view: ClusterView
    future: Future[Any] | None = None
    sent_at: float = 0.0
    next_at: float = 0.0


class ClusterWatch:
    """Runs on: driver, one daemon thread from :meth:`start` to :meth:`close`. Probes each
    cluster in ``views`` (``{"source": view, "target": view}``) and reports through
    :class:`Reachability`. Probes are asynchronous, so a cluster that does not answer never
    delays the lines about the other one, nor the reminders."""

    def __init__(
        self,
        views: Mapping[str, ClusterView],
        reachability: Reachability | None = None,
        interval_s: float = PROBE_INTERVAL_S,
    ) -> None:
        self.reachability = reachability or Reachability()
        self.interval_s = interval_s
        self._probes = {name: _Probe(view) for name, view in views.items()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="k2k-cluster-watch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop probing (idempotent); a probe still in flight is left to time out."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(_TICK_S):
            self.step()

    def step(self) -> None:
        """One look at every probe: judge the finished ones, send the due ones, remind."""
        clock = self.reachability.clock
        for name, probe in self._probes.items():
            if probe.future is not None and probe.future.done():
                self._judge(name, probe)
                probe.future, probe.next_at = None, clock() + self.interval_s
            if probe.future is None and clock() >= probe.next_at:
                probe.sent_at = clock()
                probe.future = probe.view.probe()
        self.reachability.remind()

    def _judge(self, name: str, probe: _Probe) -> None:
        assert probe.future is not None
        cause = probe.view.probe_failure(probe.future)
        if cause is None:
            self.reachability.answered(name)
        else:
            self.reachability.failed(name, probe.view.bootstrap, cause, since=probe.sent_at)
