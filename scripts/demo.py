"""The visible demo: load sample data into the embedded source cluster, replicate it with
``k2k start --until-caught-up``, then show what arrived where on the target cluster.

Run through ``scripts/demo`` (which installs everything and starts the clusters first).
Re-running is fine: the demo topics and the demo pipeline's progress are reset each time.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from k2k.coordination.progress import ProgressStore
from k2k.kafka.murmur2 import murmur2_partition

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "demo-pipeline.yaml"
SOURCE = os.environ.get("K2K_DEMO_SOURCE", "127.0.0.1:19092")
TARGET = os.environ.get("K2K_DEMO_TARGET", "127.0.0.1:29092")
TOPICS = {"demo.orders": 6, "demo.payments": 3, "demo.clicks": 4}
RECORDS = {"demo.orders": 200_000, "demo.payments": 60_000, "demo.clicks": 140_000}
console = Console()


def reset(admin: AdminClient, names: list[str]) -> None:
    """Delete ``names`` where they exist and wait until they are gone."""
    existing = [n for n in names if n in admin.list_topics(timeout=10).topics]
    if not existing:
        return
    for f in admin.delete_topics(existing, operation_timeout=30).values():
        f.result()
    deadline = time.monotonic() + 60
    while any(n in admin.list_topics(timeout=10).topics for n in existing):
        if time.monotonic() > deadline:
            sys.exit("error: demo topics were not deleted within 60 s")
        time.sleep(0.2)  # polling the broker's metadata for the deletion to finish


def forget_progress() -> None:
    """Tombstone the demo pipeline's progress so the replication starts from the beginning."""
    store = ProgressStore(
        {"bootstrap.servers": TARGET},
        "__k2k_consumer-offsets",
        "demo-dr",
        sync_timeout_s=30,
        on_sync_timeout="fail",
        on_bad_record="ignore",
    )
    try:
        latest = store.load()
    finally:
        store.close()
    if not latest:
        return
    md = AdminClient({"bootstrap.servers": TARGET}).list_topics(
        "__k2k_consumer-offsets", timeout=10
    )
    partitions = len(md.topics["__k2k_consumer-offsets"].partitions)
    producer = Producer({"bootstrap.servers": TARGET})
    for rec in latest.values():
        key = rec.key.encode()
        producer.produce("__k2k_consumer-offsets", None, key, murmur2_partition(key, partitions))
    producer.flush(30)


def scaled(total: int) -> dict[str, int]:
    """Records per demo topic for ``total`` records in all, in the default's proportions.

    >>> scaled(4_000)
    {'demo.orders': 2000, 'demo.payments': 600, 'demo.clicks': 1400}
    """
    default = sum(RECORDS.values())
    return {topic: count * total // default for topic, count in RECORDS.items()}


def load_sample_data(records: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": SOURCE})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
        f.result()
    producer = Producer(
        {"bootstrap.servers": SOURCE, "linger.ms": 20, "queue.buffering.max.messages": 500_000}
    )
    rng = random.Random(2026)
    now = int(time.time() * 1000) - 3_600_000
    for topic, count in records.items():
        parts = TOPICS[topic]
        for i in range(count):
            key = f"{topic.split('.')[1][:-1]}-{rng.randrange(50_000)}".encode()
            value = f'{{"seq":{i},"amount":{rng.randrange(1, 10_000)},"note":"{rng.randbytes(24).hex()}"}}'.encode()
            headers = [("source-app", b"demo"), ("seq", str(i).encode())]
            while True:
                try:
                    producer.produce(
                        topic, value, key, i % parts, timestamp=now + i, headers=headers
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(60)
    console.print(
        f"[bold]loaded[/bold] {sum(records.values()):,} records into {len(TOPICS)} topics on the source cluster {SOURCE}"
    )


def counts(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "k2k-demo-reader"})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        out = []
        for p in sorted(md.partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out.append(hi - lo)
        return out
    finally:
        c.close()


def first_record(bootstrap: str, topic: str):
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "k2k-demo-reader", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        return c.poll(10)
    finally:
        c.close()


def show_result() -> None:
    table = Table(title="what arrived where")
    for col in ("source topic", "records", "target topic", "records", "per partition equal"):
        table.add_column(col)
    for topic in TOPICS:
        src, dst = counts(SOURCE, topic), counts(TARGET, f"dr.{topic}")
        table.add_row(
            topic,
            f"{sum(src):,}",
            f"dr.{topic}",
            f"{sum(dst):,}",
            "yes" if src == dst else f"NO {src} vs {dst}",
        )
    console.print(table)
    rec = first_record(TARGET, "dr.demo.orders")
    if rec is not None and rec.error() is None:
        console.print("[bold]first record of dr.demo.orders[0] on the target:[/bold]")
        console.print(f"  key={rec.key()!r} timestamp={rec.timestamp()[1]}")
        console.print(f"  value={rec.value()!r}")
        for name, value in rec.headers() or []:
            console.print(f"  header {name} = {value!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--records",
        type=int,
        default=sum(RECORDS.values()),
        help="sample records over all demo topics (default: %(default)s)",
    )
    args = ap.parse_args()
    if args.records < len(RECORDS):
        ap.error(f"--records: expected at least {len(RECORDS)}, got {args.records}")
    console.rule("k2k demo")
    console.print(f"source cluster {SOURCE}  ->  target cluster {TARGET}")
    try:
        reset(AdminClient({"bootstrap.servers": SOURCE}), list(TOPICS))
        reset(AdminClient({"bootstrap.servers": TARGET}), [f"dr.{t}" for t in TOPICS])
        forget_progress()
        load_sample_data(scaled(args.records))
    except KafkaException as exc:
        sys.exit(f"error: preparing the demo data failed: {exc}")
    console.print(
        f"[bold]running[/bold] k2k start --until-caught-up -f {PIPELINE.relative_to(ROOT)}"
    )
    env = {**os.environ, "K2K_DEMO_SOURCE": SOURCE, "K2K_DEMO_TARGET": TARGET}
    started = time.monotonic()
    result = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "k2k"), "start", "--until-caught-up", "-f", str(PIPELINE)],
        env=env,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(result.returncode)
    console.print(
        f"replication finished in {time.monotonic() - started:.1f} s (including Spark start-up)"
    )
    show_result()
    console.print(
        "the clusters keep running: [bold].venv/bin/k2k local status[/bold], [bold].venv/bin/k2k local down[/bold]"
    )


if __name__ == "__main__":
    main()
