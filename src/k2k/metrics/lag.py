"""Lag in seconds: the age of the oldest record not yet replicated, per partition.

Runs on: driver, in a thread of its own, only with telemetry. The oldest unreplicated record
of a partition is the first readable one at its committed offset; its timestamp is read from
the source (``read_committed``) at most every :data:`REFRESH_S`, for partitions with lag only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from k2k.kafka import TP
from k2k.kafka.factory import build_consumer
from k2k.kafka.peek import first_records, peek_settings

__all__ = ["REFRESH_S", "OldestUnreplicated"]

log = logging.getLogger("k2k.metrics")

#: How often the timestamps are read again.
REFRESH_S = 5.0


class OldestUnreplicated:
    """Runs on: driver. ``oldest()`` answers from what was read last (never blocks) and
    asks for a fresh read of the partitions that lag."""

    def __init__(self, consumer_conf: Mapping[str, str], group_id: str, timeout_s: float) -> None:
        self._conf = peek_settings(consumer_conf, group_id)
        self._timeout_s = timeout_s
        self._wanted: dict[TP, int] = {}
        #: Per partition: the offset read, its record's timestamp (ms), when it was read.
        self._found: dict[TP, tuple[int, int, float]] = {}
        #: Per partition: when ``oldest()`` last saw it caught up (a read before that is
        #: about records long replicated).
        self._caught_up_at: dict[TP, float] = {}
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def oldest(self, committed: Mapping[TP, int], lags: Mapping[TP, int]) -> dict[TP, float]:
        """Per lagging partition, the age in seconds of its oldest unreplicated record, when
        known. If the committed offset moved since the read, the age at read time (a bound
        that the next read, within REFRESH_S, replaces); a read from before the partition was
        last seen caught up is not used."""
        self._wanted = {tp: committed.get(tp, 0) for tp, lag in lags.items() if lag > 0}
        self._start()
        now = time.time()
        for tp, lag in lags.items():
            if lag == 0:
                self._caught_up_at[tp] = now
        ages: dict[TP, float] = {}
        for tp, offset in self._wanted.items():
            found = self._found.get(tp)
            if found is None or found[0] > offset or found[2] < self._caught_up_at.get(tp, 0):
                continue
            at = now if found[0] == offset else found[2]
            ages[tp] = max(0.0, at - found[1] / 1000)
        return ages

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="k2k-lag-age", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        consumer = build_consumer(self._conf)
        try:
            while not self._closed.is_set():
                wanted = dict(self._wanted)
                if wanted:
                    self._read(consumer, wanted)
                self._closed.wait(REFRESH_S)
        finally:
            consumer.close()

    def _read(self, consumer: Consumer, wanted: dict[TP, int]) -> None:
        read_at = time.time()
        try:
            tps = [TopicPartition(t, p, o) for (t, p), o in wanted.items()]
            consumer.assign(tps)
            consumer.resume(tps)  # the previous read paused the partitions it answered for
            stamps = first_records(consumer, set(wanted), self._timeout_s)
        except KafkaException as exc:
            log.debug("lag age: could not read the source: %s", exc)
            return
        # A partition read at its end holds nothing older than the read: its age counts from
        # then, and an older answer (from an outage, say) must not stand in for it.
        at_end = int(read_at * 1000)
        found = {
            tp: (wanted[tp], at_end if ts is None else ts, read_at) for tp, ts in stamps.items()
        }
        self._found = {**{tp: f for tp, f in self._found.items() if tp in wanted}, **found}
