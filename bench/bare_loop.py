"""The ceiling for k2k's design: a bare librdkafka consume -> produce loop.

Same client settings as a k2k runner, same partition assignment style, no stages, no
progress records, no Spark. Run one process per core, each with a share of the partitions.

``--commit-ms N`` writes through a transactional producer and commits every N ms, or every
``--commit-records`` records if that comes first: the shape of an exactly-once runner with
``batchTimeout: N milliseconds`` and its ``batchSize``. In W2 it is the latency ceiling of
exactly-once on the same brokers (and the harness's broker warm-up); in W1 it shows what
transactions of that size cost the brokers, with one producer that waits for each commit.
"""

from __future__ import annotations

import argparse
import signal
import time

from confluent_kafka import Consumer, TopicPartition

from k2k.kafka.factory import build_producer, consumer_settings, producer_settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--dest", required=True)
    ap.add_argument("--partitions", required=True, help="comma-separated partition numbers")
    ap.add_argument(
        "--ends", help="comma-separated end offsets, same order (none: run until SIGTERM)"
    )
    ap.add_argument("--commit-ms", type=int, help="a transaction per this many milliseconds")
    ap.add_argument(
        "--commit-records", type=int, help="with --commit-ms: at most this many records each"
    )
    args = ap.parse_args()
    parts = [int(p) for p in args.partitions.split(",")]
    steady = args.ends is None
    if args.commit_records is not None and args.commit_ms is None:
        ap.error("--commit-records: only with --commit-ms")
    ends = (
        {p: 2**62 for p in parts}
        if steady
        else dict(zip(parts, (int(e) for e in args.ends.split(",")), strict=True))
    )
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    consumer = Consumer(consumer_settings({"bootstrap.servers": args.source}, "bench-bare"))
    transactional = args.commit_ms is not None
    props = {"bootstrap.servers": args.target}
    if transactional:
        props["transactional.id"] = f"bench-bare-{args.dest}-{args.partitions}"
    producer = build_producer(producer_settings(props, False, exactly_once=transactional))
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    commit_s = (args.commit_ms or 0) / 1000
    commit_records = args.commit_records or 2**62
    sealed = time.monotonic()
    in_txn = 0
    consumer.assign([TopicPartition(args.topic, p, 0) for p in parts])
    produce, dest = producer.produce, args.dest
    remaining = {TopicPartition(args.topic, p) for p in parts if ends[p] > 0}
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
                        dest,
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
        # Range ends are checked per batch from the consumer's positions, as a runner does.
        if steady:
            continue
        for tp in consumer.position(list(remaining)):
            if tp.offset >= ends[tp.partition]:
                remaining = {r for r in remaining if r.partition != tp.partition}
    if transactional:
        producer.commit_transaction(60)
    producer.flush(120)
    consumer.close()


if __name__ == "__main__":
    main()
