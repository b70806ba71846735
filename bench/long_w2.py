"""The long W2 (issue 47): a steady window long enough to span k2k's lease boundaries, with a
new topic created in the middle of it.

At-least-once, 11 minutes at 2,000 records/s: the two largest per-10-s latency maxima were
the two lease boundaries (``spark.leaseDuration``, 5 minutes), where every runner stopped and
a new Spark job started. The long W2 makes that visible for each contender:

* the window lasts :func:`window_s` (17 minutes at the default 5-minute lease: with the
  contender's ~1 minute of start-up and warm-up before it, three scheduled lease boundaries
  and the discovery fall inside it);
* at :func:`new_topic_at_s` (twice the lease, 10 minutes) a topic next to the measured one is
  created on the source and :data:`NEW_TOPIC_RECORDS` records are written to it
  (:class:`NewTopic`); the contenders select every topic that starts with the measured
  topic's name, so k2k finds it at its next discovery (``discoveryInterval``, 30 s by default;
  a change ends the lease early) and MirrorMaker 2 at its next topic refresh (set to the same
  interval for this run: its default, 10 minutes, could miss the window);
* the probe reports p50/p99/p99.9/max and the largest latency per 10 seconds of the window
  (:func:`per_10s_lines`), so the boundaries show as spikes at known places.

For a smoke run, ``--lease-duration "20 seconds" --discovery-interval "5 seconds"`` shortens
all of it (a 68 s window, the topic created at 40 s).
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.contender import create_topic
from k2k.config.replication import SourceStage
from k2k.config.spark import Spark
from k2k.kafka.produce import produce_when_room

__all__ = [
    "DEFAULT_DISCOVERY",
    "DEFAULT_LEASE",
    "NEW_TOPIC_RECORDS",
    "NewTopic",
    "new_topic_at_s",
    "per_10s_lines",
    "window_s",
]

#: k2k's defaults, read from its config model (never repeated here).
DEFAULT_LEASE: timedelta = Spark.model_fields["lease_duration"].default
DEFAULT_DISCOVERY: timedelta = SourceStage.model_fields["discovery_interval"].default

#: Records written to the topic created mid-run (its copy is checked, not its latency).
NEW_TOPIC_RECORDS = 1000


def window_s(lease: timedelta) -> float:
    """The measured window: 3.4 leases (17 minutes at 5-minute leases), so three scheduled
    lease boundaries and the early one the discovery causes fall inside it.

    >>> window_s(timedelta(minutes=5)) / 60, window_s(timedelta(seconds=20))
    (17.0, 68.0)
    """
    return round(3.4 * lease.total_seconds(), 1)


def new_topic_at_s(lease: timedelta) -> float:
    """When, from the window's start, the new topic is created: after two leases, so the
    discovery's lease change falls between the scheduled ones.

    >>> new_topic_at_s(timedelta(minutes=5))
    600.0
    """
    return 2 * lease.total_seconds()


class NewTopic(threading.Thread):
    """Creates ``topic`` (``partitions`` partitions) on the source ``at_s`` seconds after
    :meth:`start`, writes :data:`NEW_TOPIC_RECORDS` records to it, then reads ``dest`` on the
    target (``read_committed``) until all of them are there or :meth:`finish` is called.

    ``created_s`` and ``copied_s`` are seconds from :meth:`start` (None if not reached).
    """

    def __init__(
        self, source: str, target: str, topic: str, dest: str, partitions: int, at_s: float
    ) -> None:
        super().__init__(name="bench-new-topic", daemon=True)
        self.source, self.target = source, target
        self.topic, self.dest, self.partitions, self.at_s = topic, dest, partitions, at_s
        self.created_s: float | None = None
        self.copied_s: float | None = None
        self.seen = 0
        self.error = ""
        self._stop_event = threading.Event()
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        super().start()

    def run(self) -> None:
        if self._stop_event.wait(self.at_s):
            return
        try:
            create_topic(self.source, self.topic, self.partitions)
            self.created_s = time.monotonic() - self._t0
            producer = Producer({"bootstrap.servers": self.source, "enable.idempotence": True})
            for i in range(NEW_TOPIC_RECORDS):
                produce_when_room(
                    producer, self.topic, b"new", i.to_bytes(8, "big"), i % self.partitions
                )
            producer.flush(30)
            self._await_copy()
        except Exception as exc:  # reported in the run's note, never fatal to the window
            self.error = f"{type(exc).__name__}: {exc}"

    def _await_copy(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.target,
                "group.id": f"bench-new-topic-{uuid.uuid4().hex[:6]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            assigned = False
            while not self._stop_event.is_set() and self.seen < NEW_TOPIC_RECORDS:
                if not assigned:
                    md = c.list_topics(self.dest, timeout=5).topics.get(self.dest)
                    if md is None or md.error is not None or not md.partitions:
                        self._stop_event.wait(0.5)  # not created on the target yet
                        continue
                    c.assign([TopicPartition(self.dest, p, 0) for p in md.partitions])
                    assigned = True
                self.seen += sum(m.error() is None for m in c.consume(1000, 0.5))
            if self.seen >= NEW_TOPIC_RECORDS:
                self.copied_s = time.monotonic() - self._t0
        finally:
            c.close()

    def finish(self, grace_s: float) -> str:
        """Give the copy ``grace_s`` more seconds, stop, and say what happened."""
        self.join(grace_s)
        self._stop_event.set()
        self.join()
        if self.error:
            return f"new topic: {self.error}"
        if self.created_s is None:
            return "new topic: never created (the window ended first)"
        if self.copied_s is None:
            return (
                f"new topic {self.topic} created at +{self.created_s:.0f} s: "
                f"{self.seen:,} of {NEW_TOPIC_RECORDS:,} records copied"
            )
        return (
            f"new topic created at +{self.created_s:.0f} s, all copied "
            f"{self.copied_s - self.created_s:.1f} s later"
        )


def per_10s_lines(per_10s_max_ms: list[int | None], top: int = 5) -> list[str]:
    """The per-10-s maxima of a window, and the ``top`` largest with their place in it.

    >>> for line in per_10s_lines([40, 41, 898, None, 677, 39], top=2):
    ...     print(line)
    per-10-s maxima, ms, from the window's start: 40 41 898 - 677 39
    largest: 898 ms at +20-30 s, 677 ms at +40-50 s
    """
    if not per_10s_max_ms:
        return []
    cells = " ".join("-" if v is None else str(v) for v in per_10s_max_ms)
    ranked = sorted(
        ((v, i) for i, v in enumerate(per_10s_max_ms) if v is not None), key=lambda x: -x[0]
    )
    largest = ", ".join(f"{v} ms at +{10 * i}-{10 * i + 10} s" for v, i in ranked[:top])
    return [f"per-10-s maxima, ms, from the window's start: {cells}", f"largest: {largest}"]
