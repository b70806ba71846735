"""Helpers for the exactly-once tests: their pipeline, a mixed transactional workload and exact
comparison."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Producer

from k2k.config.loader import deep_merge
from k2k.formats import OwnerRecord, ProgressKey, ProgressRecord, decode_assignment
from tests.helpers.compare import assert_same_records
from tests.helpers.kafka import Rec, read_all
from tests.helpers.pipelines import BASE_TS, pipeline_dict


def mixed_workload(
    bootstrap: str,
    topic: str,
    total: int,
    partitions: int,
    *,
    seed: int = 7,
    txn_share: float = 0.3,
    chunk: int = 2_000,
    stop: threading.Event | None = None,
    rate: float | None = None,
) -> dict[str, int]:
    """Write ``total`` keyed records with headers over ``partitions``: about ``txn_share`` of
    them inside transactions, one transaction in three aborted; the rest plain idempotent.

    Returns the counts written: plain, committed (in transactions) and aborted.
    """
    rng = random.Random(seed)
    plain = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 10,
            "queue.buffering.max.messages": 200_000,
        }
    )
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"k2k-test-src-{uuid.uuid4().hex[:8]}",
            "linger.ms": 10,
            "queue.buffering.max.messages": 200_000,
        }
    )
    plain.list_topics(topic, timeout=30)
    txn.list_topics(topic, timeout=30)
    txn.init_transactions(30)
    counts = {"plain": 0, "committed": 0, "aborted": 0}
    started = time.monotonic()
    i = 0
    kinds = 0
    while i < total and not (stop is not None and stop.is_set()):
        n = min(chunk, total - i)
        in_txn = rng.random() < txn_share
        producer = txn if in_txn else plain
        abort = in_txn and kinds % 3 == 2
        if in_txn:
            kinds += 1
            txn.begin_transaction()
        for j in range(i, i + n):
            key = b"key-%d" % rng.randrange(10_000)
            value = b"value-%09d-" % j + bytes(rng.randrange(20, 120))
            headers = [("h-seq", str(j).encode()), ("h-kind", b"txn" if in_txn else b"plain")]
            while True:
                try:
                    producer.produce(
                        topic, value, key, j % partitions, headers=headers, timestamp=BASE_TS + j
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        if in_txn:
            # Every record delivered first: aborting with requests in flight is refused by
            # brokers using the version 2 transaction protocol (INVALID_TXN_STATE).
            assert txn.flush(60) == 0
            if abort:
                txn.abort_transaction(60)
                counts["aborted"] += n
            else:
                txn.commit_transaction(60)
                counts["committed"] += n
        else:
            counts["plain"] += n
        producer.poll(0)
        i += n
        if rate:
            ahead = started + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing the load generator, not synchronisation
    assert plain.flush(60) == 0
    return counts


@contextmanager
def background_load(
    bootstrap: str, topic: str, total: int, partitions: int, rate: float
) -> Iterator[dict[str, int]]:
    """:func:`mixed_workload` in a thread while the block runs, stopped at its end; the
    counts it wrote fill the yielded dict once it stopped."""
    counts: dict[str, int] = {}
    stop = threading.Event()
    writer = threading.Thread(
        target=lambda: counts.update(
            mixed_workload(bootstrap, topic, total, partitions, rate=rate, stop=stop)
        )
    )
    writer.start()
    try:
        yield counts
    finally:
        stop.set()
        writer.join()


def assert_exact(source: str, target: str, topic: str, target_topic: str | None = None) -> int:
    """Target (read_committed) equals source (read_committed), partition by partition, record
    for record: key, value, headers, timestamp. Returns the number of records compared."""
    return assert_same_records(read_all(source, topic), read_all(target, target_topic or topic))


def control_records(bootstrap: str, topic: str) -> dict[int, list[Rec]]:
    return read_all(bootstrap, topic)


def progress_history(
    bootstrap: str, commit_topic: str, group: str
) -> dict[tuple[str, int], list[ProgressRecord]]:
    """Every committed progress record of ``group`` in log order, per source partition."""
    out: dict[tuple[str, int], list[ProgressRecord]] = {}
    for p, recs in read_all(bootstrap, commit_topic).items():
        for r in recs:
            if r.value is None:
                continue
            where = f"{commit_topic}[{p}]@{r.offset}"
            key = ProgressKey.decode_shared(r.key, where)
            if key is None:  # an assignment record: the topic is shared
                continue
            rec = ProgressRecord.decode_value(key, r.value, where)
            if rec.group == group:
                out.setdefault((rec.topic, rec.partition), []).append(rec)
    return out


def owner_history(
    bootstrap: str, assignment_topic: str, group: str
) -> dict[tuple[str, int], list[OwnerRecord]]:
    """Every claim of ``group`` in log order, per source partition."""
    out: dict[tuple[str, int], list[OwnerRecord]] = {}
    for p, recs in read_all(bootstrap, assignment_topic).items():
        for r in recs:
            read = decode_assignment(r.key, r.value, f"{assignment_topic}[{p}]@{r.offset}")
            if read is None:  # a progress record: the topic is shared
                continue
            g, rec = read
            if g == group and isinstance(rec, OwnerRecord):
                out.setdefault((rec.topic, rec.partition), []).append(rec)
    return out


def assert_single_writer(history: dict[tuple[str, int], list[ProgressRecord]]) -> dict[str, Any]:
    """No partition ever had two writers: per partition, committed progress never goes
    backwards and the writing member only changes at a handover (never back and forth
    within one offset). Returns the writers seen per partition."""
    writers: dict[str, Any] = {}
    for tp, recs in history.items():
        offsets = [r.offset for r in recs]
        assert offsets == sorted(offsets), f"{tp}: progress went backwards: {offsets[:50]}"
        writers[f"{tp[0]}[{tp[1]}]"] = sorted({r.owner for r in recs})
    return writers


def eos_pipeline(clusters, name: str, topics, **sections):
    """An exactly-once pipeline for the test clusters with small commit batches and its own
    assignment topic; ``sections`` deep-update it."""
    doc = pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled"},
        coordination={
            # K2K's batchSize, not exactly-once's larger default: these tests kill, fail and
            # fence runners mid-copy, and want many committed transactions in a small copy.
            "commit": {
                "topic": f"__k2k_progress-{name}",
                "batchSize": 1000,
                "batchTimeout": "200 milliseconds",
            },
            "assignment": {"topic": f"__k2k_assignment-{name}", "graceWindow": "5 seconds"},
        },
    )
    return deep_merge(doc, sections)
