"""Steady-state end-to-end latency: a paced writer on the source, a probe on the target.

Every measured record carries its send time (microseconds since the epoch, 8 bytes,
big-endian) after a 4-byte marker at the start of its value; the record's create timestamp
is the same instant. The probe is a separate process (so that the writer's pacing and the
probe's reading do not share one interpreter lock) reading the target with
``read_committed``: latency = time the probe sees the record - send time. Both run on the
same host, so they share one clock.

Warm-up records carry a different marker: the harness writes them until the first one shows
up on the target (the contender is ready), then starts the probe and keeps writing them until
the probe has read one (it touches ``<out>.ready``); then the writer sends the window's rate
for a while with the warm-up marker (JIT, caches, client buffers settle: steady state); the
probe ignores all of those. Only then does the measured window start.

    python -m bench.latency --target HOST:PORT --topic T --partitions 8 --expect N --out F

Many topics (W3): the writer goes round-robin over every partition of every topic, and the
probe reads the topics named in ``--topics FILE`` (one a line) instead of ``--topic``.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from k2k.kafka.produce import produce_when_room

MEASURED = b"LAT1"
#: Beyond this many partitions (W3) the probe batches its fetches (see :func:`probe`).
MANY_PARTITIONS = 64
WARMUP = b"WRM1"


def value(marker: bytes, size: int, sent_us: int) -> bytes:
    head = marker + sent_us.to_bytes(8, "big")
    return head + b"x" * max(0, size - len(head))


class PacedWriter:
    """Writes ``rate`` records/s in 10 ms ticks, round-robin over the partitions (of every
    topic, when ``topic`` is several: record i goes to partition i mod P of topic
    (i div P) mod T, so consecutive records land on different partitions)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str | Sequence[str],
        partitions: int,
        size: int,
        linger_ms: int = 1,
    ) -> None:
        self.topics = [topic] if isinstance(topic, str) else list(topic)
        self.topic = self.topics[0]
        self.partitions = partitions
        self.size = size
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": linger_ms,
                "acks": "all",
                "enable.idempotence": True,
            }
        )

    def warmup(self) -> None:
        """One unmeasured record into every partition (of every topic)."""
        now = int(time.time() * 1e6)
        for topic in self.topics:
            for p in range(self.partitions):
                produce_when_room(self.producer, topic, value(WARMUP, self.size, now), None, p)
        self.producer.flush(30)

    def where(self, i: int) -> tuple[str, int]:
        """The (topic, partition) of the ``i``-th record of a run.

        >>> w = PacedWriter.__new__(PacedWriter)
        >>> w.topics, w.partitions = ["a", "b"], 2
        >>> [w.where(i) for i in range(5)]
        [('a', 0), ('a', 1), ('b', 0), ('b', 1), ('a', 0)]
        """
        j = i % (len(self.topics) * self.partitions)
        return self.topics[j // self.partitions], j % self.partitions

    def run(self, rate: int, seconds: float, marker: bytes = MEASURED) -> int:
        """Sends ``rate * seconds`` records at an even pace; returns how many it sent.

        ``marker=WARMUP`` sends the same load unmeasured (the probe skips those records).
        """
        total = int(rate * seconds)
        sent = 0
        tick = 0.01
        start = time.monotonic()
        produce = self.producer.produce
        one = len(self.topics) == 1
        while sent < total:
            due = min(total, int((time.monotonic() - start) * rate) + 1)
            while sent < due:
                now_us = int(time.time() * 1e6)
                topic, partition = (self.topic, sent % self.partitions) if one else self.where(sent)
                try:
                    produce(
                        topic,
                        value(marker, self.size, now_us),
                        sent.to_bytes(8, "big"),
                        partition,
                        timestamp=now_us // 1000,
                    )
                except BufferError:
                    # The source broker fell behind and the local queue is full: serve
                    # delivery reports until there is room, then send with a fresh time
                    # (the wait is the writer's, not the contender's).
                    self.producer.poll(0.05)
                    continue
                sent += 1
            self.producer.poll(0)
            next_tick = start + (sent / rate)
            pause = next_tick - time.monotonic()
            time.sleep(max(0.0, min(tick, pause)))
        self.producer.flush(30)
        return total


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def figures(lat_ms: list[float], by_second: dict[int, list[float]]) -> dict[str, Any]:
    """The figures of a window: percentiles of ``lat_ms`` and, by the second each record was
    sent, the largest latency per second and per 10 seconds (a None for a stretch in which
    nothing was sent, so that position i is always seconds 10 i to 10 i + 9 of the window).

    >>> f = figures([5.0, 1.0, 3.0], {100: [1.0, 5.0], 112: [3.0]})
    >>> f["p50_ms"], f["max_ms"], f["per_second_max_ms"], f["per_10s_max_ms"]
    (3.0, 5.0, [5, 3], [5, 3])
    >>> figures([], {100: [1.0], 125: [2.0]})["per_10s_max_ms"]
    [1, None, 2]
    """
    lat_ms = sorted(lat_ms)
    first = min(by_second) if by_second else None
    per_10s: list[float | None] = []
    if first is not None:
        per_10s = [None] * ((max(by_second) - first) // 10 + 1)
        for second, values in by_second.items():
            i = (second - first) // 10
            per_10s[i] = max(per_10s[i] or 0.0, max(values))
    return {
        "received": len(lat_ms),
        "p50_ms": percentile(lat_ms, 0.50),
        "p99_ms": percentile(lat_ms, 0.99),
        "p999_ms": percentile(lat_ms, 0.999),
        "max_ms": lat_ms[-1] if lat_ms else float("nan"),
        "first_second": first,
        "per_second_max_ms": [round(max(v)) for _, v in sorted(by_second.items())],
        "per_10s_max_ms": [None if v is None else round(v) for v in per_10s],
    }


def probe(
    target: str,
    topics: list[str],
    partitions: int,
    expect: int,
    out: Path,
    limit_s: float,
    fetch_wait_ms: int = 10,
) -> None:
    """Reads ``topics`` on the target until ``expect`` measured records arrived (or SIGTERM
    or ``limit_s``), then writes the latency figures as JSON to ``out``."""
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    settings = {
        "bootstrap.servers": target,
        "group.id": "bench-latency",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": fetch_wait_ms,
        "fetch.queue.backoff.ms": 1,
        "topic.metadata.refresh.interval.ms": 500,
    }
    if len(topics) * partitions > MANY_PARTITIONS:
        # Every fetch waits its 10 ms (up to 10 ms more latency, the same for every
        # contender): with fetch.min.bytes 1 nearly every record that arrives would end a
        # fetch over thousands of partitions, up to a thousand fetches a second to the
        # target broker the contender writes to.
        settings["fetch.min.bytes"] = 4 * 1024 * 1024
    c = Consumer(settings)
    c.assign([TopicPartition(topic, p, 0) for topic in topics for p in range(partitions)])
    lat_ms: list[float] = []
    by_second: dict[int, list[float]] = {}  # send second -> latencies: where spikes are
    ready = out.with_suffix(".ready")
    seen: set[bytes] = set()
    duplicates = 0
    deadline = time.monotonic() + limit_s
    while not stop and len(seen) < expect and time.monotonic() < deadline:
        # What is queued now, else the first record to arrive: consume(n, t) would hold a
        # record back until n arrived or t passed, which would count as latency.
        for m in c.consume(10_000, 0) or c.consume(1, 0.1):
            now_us = time.time() * 1e6
            if m.error() is not None:  # partition EOF and transient errors
                continue
            v = m.value() or b""
            if v[:4] != MEASURED:
                if not ready.exists():  # connected and reading: the harness may start
                    ready.touch()
                continue
            k = m.key() or b""
            if k in seen:
                duplicates += 1
                continue
            seen.add(k)
            sent_us = int.from_bytes(v[4:12], "big")
            lat_ms.append((now_us - sent_us) / 1000)
            by_second.setdefault(sent_us // 1_000_000, []).append(lat_ms[-1])
    c.close()
    out.write_text(json.dumps({**figures(lat_ms, by_second), "duplicates": duplicates}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", required=True)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--topics", type=Path, help="a file of topic names, one a line")
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=float, default=600)
    ap.add_argument("--fetch-wait-ms", type=int, default=10)
    a = ap.parse_args()
    topics = [a.topic] if a.topic else a.topics.read_text().split()
    probe(a.target, topics, a.partitions, a.expect, a.out, a.limit, a.fetch_wait_ms)


if __name__ == "__main__":
    main()
