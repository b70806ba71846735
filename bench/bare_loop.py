"""The ceiling for k2k's design: a bare librdkafka consume -> produce loop.

Same client settings as a k2k runner, same partition assignment style, no stages, no
progress records, no Spark. Run one process per core, each with a share of the partitions.

``--commit-ms N`` writes through a transactional producer and commits every N ms, or every
``--commit-records`` records if that comes first: the shape of an exactly-once runner with
``batchTimeout: N milliseconds`` and its ``batchSize``. In W2 it is the latency ceiling of
exactly-once on the same brokers (and the harness's broker warm-up); in W1 it shows what
transactions of that size cost the brokers, with one producer that waits for each commit.

``--plan FILE`` copies many topics (W3) instead of ``--topic``/``--dest``/``--partitions``:
a JSON list of ``[source topic, target topic, partition, end offset or null]``. With many
partitions the range ends are read from the consumer's positions at most every 100 ms,
not after every batch (a positions read costs per assigned partition).
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from k2k.kafka.factory import build_producer, consumer_settings, producer_settings

#: Up to this many partitions, the range ends are checked after every batch, as a runner does
#: (W1, W2); beyond it, at most every :data:`POSITIONS_EVERY_S` (W3).
POSITIONS_EACH_BATCH = 64
POSITIONS_EVERY_S = 0.1


def read_plan(path: Path) -> list[tuple[str, str, int, int | None]]:
    """The ``--plan`` file: ``(source topic, target topic, partition, end offset or None)``."""
    return [
        (str(t), str(d), int(p), None if e is None else int(e))
        for t, d, p, e in json.loads(path.read_text())
    ]


def write_plan(path: Path, rows: list[tuple[str, str, int, int | None]]) -> None:
    """Write a ``--plan`` file (the harness's side of :func:`read_plan`)."""
    path.write_text(json.dumps([list(row) for row in rows]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--topic", help="the source topic (or --plan)")
    ap.add_argument("--dest", help="the target topic (or --plan)")
    ap.add_argument("--partitions", help="comma-separated partition numbers (or --plan)")
    ap.add_argument(
        "--ends", help="comma-separated end offsets, same order (none: run until SIGTERM)"
    )
    ap.add_argument("--plan", type=Path, help="many topics: a JSON file (see the docstring)")
    ap.add_argument("--commit-ms", type=int, help="a transaction per this many milliseconds")
    ap.add_argument(
        "--commit-records", type=int, help="with --commit-ms: at most this many records each"
    )
    args = ap.parse_args()
    if args.commit_records is not None and args.commit_ms is None:
        ap.error("--commit-records: only with --commit-ms")
    if args.plan is not None:
        rows = read_plan(args.plan)
        txn_name = args.plan.stem
    elif args.topic and args.dest and args.partitions:
        parts = [int(p) for p in args.partitions.split(",")]
        row_ends: list[int | None] = (
            [int(e) for e in args.ends.split(",")] if args.ends else [None] * len(parts)
        )
        rows = [(args.topic, args.dest, p, e) for p, e in zip(parts, row_ends, strict=True)]
        txn_name = f"{args.dest}-{args.partitions}"
    else:
        ap.error("--plan, or --topic, --dest and --partitions")
    copy(args, rows, txn_name)


def copy(
    args: argparse.Namespace, rows: list[tuple[str, str, int, int | None]], txn_name: str
) -> None:
    """Copy every ``(topic, dest, partition, end)`` of ``rows`` up to its end (every end
    None: until SIGTERM)."""
    steady = all(end is None for _, _, _, end in rows)
    ends = {(t, p): 2**62 if e is None else e for t, _, p, e in rows}
    dests = {t: d for t, d, _, _ in rows}
    # One target topic (W1, W2): no lookup per record, so the W1 ceiling stays what it was.
    single = next(iter(dests.values())) if len(dests) == 1 else None
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    consumer = Consumer(consumer_settings({"bootstrap.servers": args.source}, "bench-bare"))
    transactional = args.commit_ms is not None
    props = {"bootstrap.servers": args.target}
    if transactional:
        props["transactional.id"] = f"bench-bare-{txn_name}"
    producer = build_producer(producer_settings(props, False, exactly_once=transactional))
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    commit_s = (args.commit_ms or 0) / 1000
    commit_records = args.commit_records or 2**62
    sealed = time.monotonic()
    in_txn = 0
    consumer.assign([TopicPartition(t, p, 0) for t, _, p, _ in rows])
    produce = producer.produce
    remaining = {TopicPartition(t, p) for (t, p), end in ends.items() if end > 0}
    each_batch = len(ends) <= POSITIONS_EACH_BATCH
    checked = time.monotonic()
    while remaining and not stopped:
        # As a runner does: what is queued, at most up to the transaction's end.
        want = min(10_000, commit_records - in_txn)
        msgs = consumer.consume(want, 0) or consumer.consume(1, 0.05)
        for m in msgs:
            if m.error() is not None:
                continue
            while True:
                try:
                    produce(
                        single or dests[m.topic()],
                        m.value(),
                        m.key(),
                        m.partition(),
                        None,
                        None,
                        m.timestamp()[1],
                        m.headers(),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        in_txn += len(msgs)
        producer.poll(0)
        if transactional and (in_txn >= commit_records or time.monotonic() - sealed >= commit_s):
            producer.commit_transaction(60)  # flushes the batch first
            producer.begin_transaction()
            sealed = time.monotonic()
            in_txn = 0
        # Range ends are checked from the consumer's positions, as a runner does.
        if steady or not (each_batch or time.monotonic() - checked >= POSITIONS_EVERY_S):
            continue
        checked = time.monotonic()
        done = {
            (tp.topic, tp.partition)
            for tp in consumer.position(list(remaining))
            if tp.offset >= ends[(tp.topic, tp.partition)]
        }
        if done:
            remaining = {r for r in remaining if (r.topic, r.partition) not in done}
    if transactional:
        producer.commit_transaction(60)
    producer.flush(120)
    consumer.close()


if __name__ == "__main__":
    main()
