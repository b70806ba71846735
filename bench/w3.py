"""W3, many partitions: the pieces that do not depend on the harness's run bookkeeping.

A disaster-recovery pipeline replicates a whole cluster: hundreds of topics, thousands of
partitions, most of them quiet (issue 47). W3 is 1,000 topics x 8 partitions by default
(``--w3-topics``, ``--w3-partitions`` make it smaller for a smoke run):

* **catch-up**: a short backlog in every partition (50 records by default), copied by each
  contender; the figures are the time from process start to the first record on the target,
  the catch-up throughput (records / (last record visible - first record visible)) and the
  time from process start to all copied.
* **steady**: a paced writer at a total rate spread round-robin over every partition of every
  topic, the latency probe reading every target partition.

Here: the shape (:class:`ManyTopics`), loading the backlog (:func:`load`), reading many
topics with per-partition counts and ordered hashes (:class:`ManyReader`, :func:`digest_many`)
and waiting until a deleted topic's files are gone (:func:`wait_files_gone`). Topics are
created and deleted in batches (:mod:`bench.topics`).

Self-check of the harness's side alone, no contender (starts its own 2 GiB brokers; at full
size 5.5 minutes on the 2-core benchmark host while other work ran): create, load, read
back, delete::

    .venv/bin/python -m bench.w3 --selfcheck [--topics 1000] [--partitions 8] [--backlog 50]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.topics import ADMIN_BATCH, bulk_producer, create_topics, delete_topics, end_offsets_many
from k2k.kafka.factory import CONSUMER_DEFAULTS
from k2k.kafka.produce import produce_when_room
from k2k.local import free_port, start_pair

__all__ = ["ManyReader", "ManyTopics", "digest_many", "load", "wait_files_gone"]

#: The reader's ``fetch.min.bytes``: larger than anything a 10 ms fetch brings in W3, so the
#: broker answers every fetch after ``fetch.wait.max.ms`` (the latency probe does the same
#: for many partitions, :data:`bench.latency.MANY_PARTITIONS`).
MANY_FETCH_MIN_BYTES = 4 * 1024 * 1024

#: (record count, ordered hash) per (topic index, partition): comparable across clusters,
#: whose topic names differ.
Digests = dict[tuple[int, int], tuple[int, str]]


@dataclass(frozen=True)
class ManyTopics:
    """W3's shape. The defaults are the issue's: 1,000 topics x 8 partitions, 50 records of
    100 B per partition to catch up, then 1,000 records/s over all 8,000 partitions (one
    record per partition every 8 s: most partitions of a replicated cluster are quiet) for a
    60 s window after 15 s at the same rate unmeasured."""

    topics: int = 1000
    partitions: int = 8
    per_partition: int = 50
    value_size: int = 100
    rate: int = 1000
    seconds: float = 60.0
    warmup_s: float = 15.0

    @property
    def records(self) -> int:
        """Records of the catch-up backlog."""
        return self.topics * self.partitions * self.per_partition

    @property
    def size(self) -> str:
        return f"{self.topics}x{self.partitions}"

    @property
    def catch_up_name(self) -> str:
        return f"W3-catch-up-{self.size}"

    @property
    def steady_name(self) -> str:
        return f"W3-steady-{self.size}-{self.rate:,}/s"

    def names(self, prefix: str) -> list[str]:
        """The topic names under ``prefix``, numbered with equal widths (sorted = numbered).

        >>> ManyTopics(topics=12).names("w3-x-")[:2], ManyTopics(topics=12).names("w3-x-")[-1]
        (['w3-x-00', 'w3-x-01'], 'w3-x-11')
        """
        width = len(str(self.topics - 1))
        return [f"{prefix}{i:0{width}d}" for i in range(self.topics)]


def load(
    bootstrap: str, topics: Sequence[str], partitions: int, per_partition: int, size: int
) -> float:
    """Write ``per_partition`` records into every partition of ``topics`` (keys, random
    values, recent timestamps, a header on every tenth record: W1's record shape); returns
    the seconds it took.

    A partition's records are written one after the other, so that they travel in one batch
    (round-robin over the partitions made batches of one or two records), and the producer
    reads the cluster's metadata first, so that no record waits for its topic's metadata. On
    a busy 2-core host (load average near 50), 40,000 records over 800 partitions took 98 s
    round-robin without the metadata read, 47 s with it, 26 s partition by partition."""
    rng = random.Random(per_partition)
    values = [rng.randbytes(size) for _ in range(997)]
    producer = bulk_producer(bootstrap)
    t0 = time.monotonic()
    producer.list_topics(timeout=60)
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: old stamps fall to retention
    headers = [("bench", b"k2k")]
    i = 0
    for topic in topics:
        for p in range(partitions):
            for n in range(per_partition):
                produce_when_room(
                    producer,
                    topic,
                    values[i % 997],
                    i.to_bytes(8, "big"),
                    p,
                    None,
                    None,
                    base_ts + n,
                    headers if i % 10 == 0 else None,
                )
                i += 1
    producer.flush(600)
    return time.monotonic() - t0


class ManyReader:
    """Reads ``topics`` with ``read_committed`` from their start, counting and hashing (key,
    value, headers and, with ``with_ts``, the timestamp) per partition in order; the
    monotonic times of the first record read and of the last.

    Every partition is assigned at once, also those of topics that do not exist yet (a
    contender may create its target topics while it copies): the consumer looks for them
    every :data:`METADATA_REFRESH_MS` and starts reading each as soon as it exists, so the
    first record's time is not held back by a metadata poll of the reader's own.

    :meth:`poll` reads what arrived (waiting up to its timeout for the first record);
    :meth:`reached` says whether every partition holds at least a count.
    """

    METADATA_REFRESH_MS = 200

    def __init__(
        self, bootstrap: str, topics: Sequence[str], partitions: int, with_ts: bool, group: str
    ) -> None:
        self.consumer = Consumer(
            {
                **CONSUMER_DEFAULTS,
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # A fetch every 10 ms: the times measured here are late by at most that,
                # and the target broker (which the contender needs) does not answer a fetch
                # over thousands of partitions for nearly every record that arrives, as it
                # would with fetch.min.bytes 1.
                "fetch.min.bytes": MANY_FETCH_MIN_BYTES,
                "fetch.wait.max.ms": 10,
                "topic.metadata.refresh.interval.ms": self.METADATA_REFRESH_MS,
            }
        )
        self.index = {t: i for i, t in enumerate(topics)}
        keys = [(i, p) for i in range(len(topics)) for p in range(partitions)]
        self.counts: dict[tuple[int, int], int] = dict.fromkeys(keys, 0)
        self.hashes = {k: hashlib.blake2b(digest_size=16) for k in keys}
        self.at_eof: dict[tuple[int, int], int] = {}  # the offset of each partition's last EOF
        self.with_ts = with_ts
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])

    def poll(self, timeout: float) -> int:
        """Read what is queued, or wait up to ``timeout`` for a record; returns the records
        read."""
        n = 0
        for m in self.consumer.consume(10_000, 0) or self.consumer.consume(1, timeout):
            if m.error() is not None:  # an EOF event, or a transient error
                if m.error().code() == KafkaError._PARTITION_EOF:
                    self.at_eof[(self.index[m.topic()], m.partition())] = m.offset()
                continue
            key = (self.index[m.topic()], m.partition())
            h = self.hashes[key]
            h.update(m.key() or b"\0")
            h.update(m.value() or b"\0")
            headers = m.headers()
            if headers:
                h.update(repr(headers).encode())
            if self.with_ts:
                h.update(m.timestamp()[1].to_bytes(8, "big"))
            self.counts[key] += 1
            n += 1
        if n:
            self.last_at = time.monotonic()
            self.first_at = self.first_at or self.last_at
        return n

    def reached(self, want: dict[tuple[int, int], int]) -> bool:
        """Every partition of ``want`` holds at least its count."""
        return all(self.counts.get(k, 0) >= n for k, n in want.items())

    def digests(self) -> Digests:
        return {k: (n, self.hashes[k].hexdigest()) for k, n in self.counts.items()}

    def close(self) -> None:
        self.consumer.close()


def digest_many(
    bootstrap: str, topics: Sequence[str], partitions: int, with_ts: bool, limit_s: float = 600
) -> Digests:
    """Every partition of ``topics`` read to the end offsets at the time of the call
    (``read_committed``): count and ordered hash, keyed by (topic index, partition)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ends = end_offsets_many(admin, topics, partitions)
    index = {t: i for i, t in enumerate(topics)}
    ends_by_index = {(index[t], p): end for (t, p), end in ends.items()}
    reader = ManyReader(bootstrap, topics, partitions, with_ts, "bench-digest")
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            reader.poll(0.5)
            if all(end == 0 or reader.at_eof.get(k, -1) >= end for k, end in ends_by_index.items()):
                break
        return reader.digests()
    finally:
        reader.close()


def wait_files_gone(data: Path, topics: Sequence[str], limit_s: float = 300) -> bool:
    """Wait until no partition directory of ``topics`` is left in the broker data directory
    ``data`` (live, ``<topic>-<p>``, or being deleted, ``<topic>-<p>.<id>-delete``): files
    deleted later would be written off during another contender's run. True if they went."""
    names = set(topics)
    deadline = time.monotonic() + limit_s
    while True:
        left = [d for d in data.glob("*/*") if _topic_of(d.name) in names]
        if not left or time.monotonic() > deadline:
            return not left
        time.sleep(0.2)  # the broker deletes them in the background: look again


def _topic_of(directory: str) -> str:
    """The topic of a partition directory's name.

    >>> _topic_of("w3-a-01-7"), _topic_of("w3-a-01-7.0a1b2c-delete")
    ('w3-a-01', 'w3-a-01')
    """
    if directory.endswith("-delete"):
        directory = directory.removesuffix("-delete").rpartition(".")[0]
    return directory.rpartition("-")[0]


def _selfcheck(shape: ManyTopics) -> int:
    """Create ``shape``'s topics on a fresh embedded pair, load the backlog, read it back
    (:func:`digest_many`) and delete the topics, timing each step; 0 when every partition
    held what was written and every topic's files went."""
    root = Path(tempfile.mkdtemp(prefix="k2k-w3-check-"))
    pair = start_pair(
        root / "clusters",
        free_port(),
        free_port(),
        heap="2g",
        jvm_options=(),
        owner_pid=os.getpid(),
        broker_overrides={"log.segment.delete.delay.ms": 0},
    )
    try:
        source = pair.source.bootstrap
        topics = shape.names(f"w3-{uuid.uuid4().hex[:6]}-")
        t0 = time.monotonic()
        create_topics(source, topics, shape.partitions)
        created = time.monotonic() - t0
        print(f"created {shape.size} in {created:.1f} s, {ADMIN_BATCH} topics per request")
        took = load(source, topics, shape.partitions, shape.per_partition, shape.value_size)
        print(f"loaded {shape.records:,} records in {took:.1f} s")
        t0 = time.monotonic()
        digests = digest_many(source, topics, shape.partitions, True)
        read = time.monotonic() - t0
        wrong = [k for k, (n, _) in digests.items() if n != shape.per_partition]
        print(f"read them back in {read:.1f} s: {len(wrong)} partitions hold another count")
        t0 = time.monotonic()
        problems = delete_topics(source, topics)
        gone = wait_files_gone(root / "clusters" / "source", topics)
        print(f"deleted in {time.monotonic() - t0:.1f} s, files gone: {gone}, {problems[:3]}")
        ok = not wrong and gone and not problems
        return 0 if ok and len(digests) == shape.topics * shape.partitions else 1
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Command line: ``--selfcheck`` runs :func:`_selfcheck`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selfcheck", action="store_true", help="create, load, read back, delete")
    ap.add_argument("--topics", type=int, default=ManyTopics.topics)
    ap.add_argument("--partitions", type=int, default=ManyTopics.partitions)
    ap.add_argument("--backlog", type=int, default=ManyTopics.per_partition)
    args = ap.parse_args()
    if not args.selfcheck:
        ap.print_help()
        return
    sys.exit(_selfcheck(ManyTopics(args.topics, args.partitions, args.backlog)))


if __name__ == "__main__":
    main()
