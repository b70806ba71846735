"""Captures the librdkafka statistics samples beside this file from real brokers.

Not a test: run it once against a running pair (``k2k local up``) to refresh the samples
that tests/unit/metrics/test_clientstats.py parses, so the parser is checked against what
the installed librdkafka really emits, without brokers in the unit tests:

    PYTHONPATH=src python tests/unit/metrics/data/capture_statistics.py BOOTSTRAP

The producer and consumer have k2k's runner settings (k2k.kafka.factory). The samples are
taken while records are still in flight (producer) and queued (consumer), so the queue
fields are not all zero.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from k2k.kafka.factory import consumer_settings, producer_settings

HERE = Path(__file__).parent
RECORDS = 200_000
PARTITIONS = 3


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str) -> dict:
    """Statistics of a producer with records queued and in flight, once all were sent."""
    samples: list[dict] = []
    conf = producer_settings({"bootstrap.servers": bootstrap}, partition_by_key=True)
    producer = Producer({**conf, "statistics.interval.ms": "100", "stats_cb": _keep(samples)})
    for i in range(RECORDS):
        producer.produce(topic, f"value-{i:08d}".encode() * 4, f"key-{i}".encode())
        if i % 10_000 == 0:
            producer.poll(0)
    deadline = time.monotonic() + 60
    while not any(s["msg_cnt"] > 0 and s["txmsgs"] > 0 for s in samples):
        assert time.monotonic() < deadline, "no statistics with records queued"
        producer.poll(0.05)
    busy = next(s for s in samples if s["msg_cnt"] > 0 and s["txmsgs"] > 0)
    producer.flush(60)
    return busy


def _consume(bootstrap: str, topic: str) -> dict:
    """Statistics of an assigned consumer (no group) with records in its fetch queue."""
    samples: list[dict] = []
    conf = consumer_settings({"bootstrap.servers": bootstrap}, group_id=f"capture-{uuid.uuid4()}")
    consumer = Consumer({**conf, "statistics.interval.ms": "100", "stats_cb": _keep(samples)})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    deadline = time.monotonic() + 60
    while not any(_fetch_queue(s) > 0 and s["rxmsgs"] > 0 for s in samples):
        assert time.monotonic() < deadline, "no statistics with records queued"
        consumer.consume(100, 0.05)
    busy = next(s for s in samples if _fetch_queue(s) > 0 and s["rxmsgs"] > 0)
    consumer.close()
    return busy


def _fetch_queue(stats: dict) -> int:
    return sum(p["fetchq_cnt"] for t in stats["topics"].values() for p in t["partitions"].values())


def _keep(samples: list[dict]):
    return lambda raw: samples.append(json.loads(raw))


def main(bootstrap: str) -> None:
    """One topic serves both clients: the consumer reads what the producer wrote."""
    topic = f"capture-stats-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic)
    producer = _produce(bootstrap, topic)
    consumer = _consume(bootstrap, topic)
    for name, stats in (("producer", producer), ("consumer", consumer)):
        (HERE / f"librdkafka_{name}_statistics.json").write_text(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
