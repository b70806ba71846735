"""W1 with schema mapping on against the same copy with it off (issue 20's 85 % goal).

One embedded broker pair (production-like: 1 GiB heaps, full JIT) and two Apicurio
registries. The source topic holds ``--records`` x 100 B over 8 partitions, every value in
Confluent's wire format (magic byte, one of three Avro schemas registered on the source
registry, payload), keys plain 8-digit ASCII numbers (they pass unchanged: not wire format). Each
round copies it twice with ``k2k start --until-caught-up`` on ``local[2]``, into fresh
target topics: schema mapping off (bytes copied as they are) and on (default rules: both
facets; the values' ids rewritten, three schemas registered on the target by the first
lease of each Python worker). The order alternates per round; medians are printed with
the ratio. Two warm-up copies (``--warmups``, mapping on then off) run first and are not
counted: the brokers' and registries' JIT compiles under the first copies, which made
whichever mode ran first or second look slower (production brokers and registries are long
warm). Records/s counts from the first record on the target to the last (start-up
excluded; the brokers' append times of the first and last target records). Each copy also
prints the CPU seconds of k2k's process tree (driver, Spark's JVM, Python workers), of the two
registries and of the two brokers over the whole run, and the host's steal share.

    .venv/bin/python -m bench.schema_mapping_w1 [--records 5000000] [--rounds 3] [--warmups 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import PARTITIONS, Monitor, cpu_clock, steal_pct
from bench.lifecycle import stop_processes
from k2k.local import free_port, start_pair
from k2k.local.registry import LocalRegistry, start_registry, wait_ready

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = 3
COPY_TIMEOUT_S = 1800


def register(url: str, subject: str, schema: dict[str, object]) -> int:
    """``POST /subjects/{subject}/versions``: the schema's id on that registry."""
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        body,
        {"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(json.load(answer)["id"])


def preload(bootstrap: str, topic: str, records: int, ids: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    payload = bytes(95)
    values = [b"\x00" + i.to_bytes(4, "big") + payload for i in ids]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, values[i % len(values)], b"%08d" % i, i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    print(f"  loaded {records:,} x 100 B into {topic} in {time.monotonic() - started:.1f} s")


def pipeline(source: str, target: str, topic: str, dest: str, registries: list[str] | None) -> dict:
    doc: dict = {
        "name": f"bench-sm-{uuid.uuid4().hex[:8]}",
        "features": {"autoCreateTopics": "enabled", "autoCreateControlTopics": "enabled"},
        "source": {"kafka": {"common": {"bootstrap.servers": source}}},
        "target": {"kafka": {"common": {"bootstrap.servers": target}}},
        "replication": [
            {"source": {"topic": [topic]}},
            {"sink": {"topic": {"map": {topic: dest}}, "partition": "source"}},
        ],
        "spark": {"master": "local[2]"},
    }
    if registries is not None:
        doc["features"]["schemaMapping"] = "enabled"
        doc["source"]["registry"] = {"config": {"schema.registry.url": registries[0]}}
        doc["target"]["registry"] = {"config": {"schema.registry.url": registries[1]}}
    return doc


def cpu_s(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` have used so far."""
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def copy(
    tmp: Path,
    doc: dict,
    target: str,
    dest: str,
    records: int,
    others: dict[str, list[int]],
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> float:
    """Records/s of one ``k2k start --until-caught-up [flags]`` (``env`` added to the
    environment), first to last target record (the target topic is created first with
    LogAppendTime: the brokers' clock times the copy); prints the CPU seconds of k2k's
    process tree and of ``others`` (name -> pids)."""
    admin = AdminClient({"bootstrap.servers": target})
    append_time = {"message.timestamp.type": "LogAppendTime"}
    admin.create_topics([NewTopic(dest, PARTITIONS, 1, config=append_time)])[dest].result()
    path = tmp / f"{dest}.yaml"
    path.write_text(yaml.safe_dump(doc))
    before = {name: cpu_s(pids) for name, pids in others.items()}
    clock = cpu_clock()
    with open(tmp / f"{dest}.log", "w") as log:
        k2k = subprocess.Popen(
            [str(ROOT / ".venv/bin/k2k"), "start", "--until-caught-up", *flags, "-f", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, **(env or {})},
        )
        monitor = Monitor([k2k])
        monitor.start()
        try:
            k2k.wait(COPY_TIMEOUT_S)
        finally:
            monitor.stop()
            stop_processes([k2k], "k2k start")
    tree = monitor.cpu_s()
    if k2k.returncode != 0:
        raise SystemExit(f"k2k start exited {k2k.returncode}: see {tmp / f'{dest}.log'}")
    used = ", ".join(f"{n} {cpu_s(p) - before[n]:.1f}" for n, p in others.items())
    print(f"    CPU s: k2k {tree:.1f}, {used}; steal {steal_pct(clock):.1f} %", flush=True)
    return records / _copy_seconds(target, dest)


def _copy_seconds(bootstrap: str, topic: str) -> float:
    """Log-append time of the target's last record minus its first (the brokers' clock)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-sm", "enable.auto.commit": False}
    )
    first, last = float("inf"), 0.0
    try:
        for p in range(PARTITIONS):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for offset in (low, high - 1):
                c.assign([TopicPartition(topic, p, offset)])
                m = c.poll(30)
                assert m is not None and m.error() is None, m
                stamp = m.timestamp()[1] / 1000
                first, last = min(first, stamp), max(last, stamp)
    finally:
        c.close()
    return max(last - first, 1e-3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--warmups",
        type=int,
        default=2,
        help="copies before the rounds (mapping on, off, ...), not counted: new brokers and "
        "registries are cold",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="k2k-bench-sm-"))
    pair = start_pair(
        tmp / "clusters", free_port(), free_port(), heap="1g", jvm_options=(), owner_pid=os.getpid()
    )
    registries: list[LocalRegistry] = []
    try:
        for name in ("source-registry", "target-registry"):
            registries.append(
                start_registry(name, tmp, free_port(), free_port(), owner_pid=os.getpid())
            )
        for r in registries:
            wait_ready(r)
        urls = [r.url for r in registries]
        topic = "w1-sm"
        ids = [
            register(urls[0], f"{topic}-value", {"type": "record", "name": f"R{i}", "fields": []})
            for i in range(SCHEMAS)
        ]
        preload(pair.source.bootstrap, topic, args.records, ids)
        others = {
            "registries": [r.process.pid for r in registries],
            "brokers": [pid for b in (pair.source, pair.target) if (pid := b.pid) is not None],
        }

        def copy_to(dest: str, mode: str) -> float:
            """Records/s of one copy of ``topic`` to ``dest``, schema mapping ``mode``."""
            registry_urls = urls if mode == "on" else None
            doc = pipeline(pair.source.bootstrap, pair.target.bootstrap, topic, dest, registry_urls)
            return copy(tmp, doc, pair.target.bootstrap, dest, args.records, others)

        for i in range(args.warmups):
            mode = ("on", "off")[i % 2]
            rate = copy_to(f"{topic}-warmup-{i}", mode)
            print(f"  warm-up {i + 1} (mapping {mode}, not counted): {rate:,.0f} records/s")
        results: dict[str, list[float]] = {"off": [], "on": []}
        for rnd in range(args.rounds):
            for mode in ("off", "on") if rnd % 2 == 0 else ("on", "off"):
                rate = copy_to(f"{topic}-{mode}-{rnd}", mode)
                results[mode].append(rate)
                print(f"  round {rnd + 1} mapping {mode:3}: {rate:,.0f} records/s", flush=True)
        off, on = statistics.median(results["off"]), statistics.median(results["on"])
        print(
            f"W1 {args.records:,} x 100 B, {args.rounds} rounds: mapping off {off:,.0f} "
            f"records/s, on {on:,.0f} records/s (medians): {on / off:.0%} of off"
        )
    finally:
        for r in registries:
            r.stop()
        pair.stop()


if __name__ == "__main__":
    main()
