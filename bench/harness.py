"""Benchmark harness: same brokers, same data, each contender in turn, one table.

For each workload the source topic is loaded once; each contender then copies it into a
fresh target topic while a monitor samples (every 100 ms) the target's end offsets and the
contender's process tree (CPU seconds, summed RSS). A run only counts if the target holds
exactly the source's record count per partition and sampled records are byte-identical.

    bench/run [--quick] [--only k2k,bare] [--keep-clusters]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from k2k.local import free_port, start_pair

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 8


@dataclass(frozen=True)
class Workload:
    name: str
    records: int
    value_size: int

    @property
    def topic(self) -> str:
        return f"bench-{self.name}-{self.records}"


FULL = [Workload("W1-100B", 5_000_000, 100), Workload("W1-1KB", 1_000_000, 1024)]
QUICK = [Workload("W1-100B", 1_000_000, 100), Workload("W1-1KB", 200_000, 1024)]


@dataclass
class Result:
    contender: str
    workload: Workload
    seconds: float = 0.0  # first record on the target -> last record on the target
    wall: float = 0.0  # process start -> done (includes JVM/Spark start-up)
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    complete: bool = False
    note: str = ""

    @property
    def rate(self) -> float:
        return self.workload.records / self.seconds if self.seconds else 0.0

    @property
    def mbps(self) -> float:
        return self.rate * (self.workload.value_size + 8) / 1e6


@dataclass
class Ctx:
    source: str
    target: str
    workload: Workload
    dest: str
    ends: dict[int, int]
    tmp: Path
    procs: list[subprocess.Popen] = field(default_factory=list)


# -- contenders ---------------------------------------------------------------------------


class K2KAtLeastOnce:
    """``k2k start --until-caught-up`` with default commit settings, local[2]."""

    name = "k2k at-least-once"
    extra: dict = {}
    commit: dict = {}

    def start(self, ctx: Ctx) -> None:
        doc = {
            "name": f"bench-{uuid.uuid4().hex[:8]}",
            "features": {
                "autoCreateTopics": "enabled",
                "autoCreateControlTopics": "enabled",
                "headerReplication": "enabled",
                **self.extra,
            },
            "source": {"kafka": {"common": {"bootstrap.servers": ctx.source}}},
            "target": {"kafka": {"common": {"bootstrap.servers": ctx.target}}},
            "replication": [
                {"source": {"topic": [ctx.workload.topic]}},
                {"sink": {"topic": {"map": {ctx.workload.topic: ctx.dest}}, "partition": "source"}},
            ],
            "spark": {"master": "local[2]"},
            "coordination": {"commit": self.commit},
        }
        path = ctx.tmp / f"{ctx.dest}.yaml"
        path.write_text(yaml.safe_dump(doc))
        with open(ctx.tmp / f"{ctx.dest}.log", "w") as log:  # the child keeps its own copy
            ctx.procs.append(
                subprocess.Popen(
                    [str(ROOT / ".venv/bin/k2k"), "start", "--until-caught-up", "-f", str(path)],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )


class K2KLargeBatches(K2KAtLeastOnce):
    """The same with fewer, larger commit batches (fewer progress writes on the target)."""

    name = "k2k at-least-once, batchSize 20000"
    commit = {"batchSize": 20000, "batchTimeout": "5 seconds"}


class BareLoop:
    """Two bare librdkafka consume->produce processes (one per core), 4 partitions each."""

    name = "bare librdkafka loop"

    def start(self, ctx: Ctx) -> None:
        _create(ctx.target, ctx.dest, PARTITIONS)
        for share in (range(0, PARTITIONS, 2), range(1, PARTITIONS, 2)):
            parts = list(share)
            ctx.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.bare_loop",
                        "--source",
                        ctx.source,
                        "--target",
                        ctx.target,
                        "--topic",
                        ctx.workload.topic,
                        "--dest",
                        ctx.dest,
                        "--partitions",
                        ",".join(map(str, parts)),
                        "--ends",
                        ",".join(str(ctx.ends[p]) for p in parts),
                    ],
                    cwd=ROOT,
                )
            )


CONTENDERS = {"k2k": K2KAtLeastOnce, "k2k-batch20k": K2KLargeBatches, "bare": BareLoop}


# -- data ---------------------------------------------------------------------------------


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=10).topics:
        return
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


_readers: dict[str, Consumer] = {}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermarks per partition ({} while the topic does not exist); one client per cluster."""
    c = _readers.get(bootstrap)
    if c is None:
        c = _readers[bootstrap] = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-reader"}
        )
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            return {}
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in md.partitions
        }
    except KafkaException:  # a topic being created has no leader yet: not there yet
        return {}


def preload(bootstrap: str, w: Workload) -> dict[int, int]:
    ends = end_offsets(bootstrap, w.topic)
    if sum(ends.values()) == w.records:
        return ends
    _create(bootstrap, w.topic, PARTITIONS)
    rng = random.Random(w.records)
    values = [rng.randbytes(w.value_size) for _ in range(997)]
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
    t0 = time.monotonic()
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: old stamps fall to retention
    for i in range(w.records):
        key = i.to_bytes(8, "big")
        while True:
            try:
                p.produce(w.topic, values[i % 997], key, i % PARTITIONS, timestamp=base_ts + i)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    print(
        f"  loaded {w.records:,} x {w.value_size} B into {w.topic} in {time.monotonic() - t0:.1f} s",
        flush=True,
    )
    return end_offsets(bootstrap, w.topic)


def sample_identical(ctx: Ctx, per_partition: int = 500) -> bool:
    """The first and last ``per_partition`` records of every partition are byte-identical."""

    def read(bootstrap: str, topic: str, p: int, start: int, n: int) -> list[tuple]:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-check",
                "enable.partition.eof": True,
            }
        )
        c.assign([TopicPartition(topic, p, start)])
        out: list[tuple] = []
        while len(out) < n:
            for m in c.consume(n - len(out), 5):
                if m.error() is None:
                    out.append((m.key(), m.value(), m.timestamp()[1]))
                elif len(out) == 0:
                    continue
        c.close()
        return out[:n]

    for p, end in ctx.ends.items():
        for start in (0, max(0, end - per_partition)):
            n = min(per_partition, end)
            if read(ctx.source, ctx.workload.topic, p, start, n) != read(
                ctx.target, ctx.dest, p, start, n
            ):
                return False
    return True


# -- measurement --------------------------------------------------------------------------


def _tree(procs: list[subprocess.Popen]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            root = psutil.Process(p.pid)
            out.append(root)
            out.extend(root.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return out


def measure(contender, ctx: Ctx, timeout_s: float) -> Result:
    res = Result(contender.name, ctx.workload)
    total = sum(ctx.ends.values())
    cpu: dict[int, float] = {}
    started = time.monotonic()
    contender.start(ctx)
    first = done = None
    while time.monotonic() - started < timeout_s:
        rss = 0
        for proc in _tree(ctx.procs):
            try:
                t = proc.cpu_times()
                cpu[proc.pid] = t.user + t.system + t.children_user + t.children_system
                rss += proc.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        res.peak_rss_mb = max(res.peak_rss_mb, rss / 2**20)
        have = (
            sum(end_offsets(ctx.target, ctx.dest).values())
            if first is None or done is None
            else total
        )
        now = time.monotonic()
        if have > 0 and first is None:
            first = now
        if have >= total and done is None:
            done = now
        if done is not None and all(p.poll() is not None for p in ctx.procs):
            break
        time.sleep(0.1)  # sampling period of the monitor
    for p in ctx.procs:
        if p.poll() is None:
            p.kill()
            res.note = "timed out"
        p.wait()
    res.cpu_s = sum(cpu.values())
    res.wall = time.monotonic() - started
    if first is not None and done is not None:
        res.seconds = done - first
    final = end_offsets(ctx.target, ctx.dest)
    res.complete = final == ctx.ends and sample_identical(ctx)
    if not res.complete and not res.note:
        res.note = f"INCOMPLETE: {sum(final.values()):,} of {total:,}"
    return res


def table(results: list[Result]) -> str:
    lines = [
        "| contender | workload | records | records/s | MB/s | copy s | wall s | CPU s | peak RSS MB | complete |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.contender} | {r.workload.name} | {r.workload.records:,} | {r.rate:,.0f} | {r.mbps:,.1f} | {r.seconds:.1f} | "
            f"{r.wall:.1f} | {r.cpu_s:.1f} | {r.peak_rss_mb:,.0f} | {'yes' if r.complete else r.note} |"
        )
    return "\n".join(lines)


def machine() -> str:
    mem = psutil.virtual_memory().total / 2**30
    cpu = platform.processor() or platform.machine()
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smaller workloads (about 5 minutes)")
    ap.add_argument(
        "--only", default=",".join(CONTENDERS), help=f"contenders to run, of {','.join(CONTENDERS)}"
    )
    ap.add_argument("--timeout", type=float, default=900, help="per-run time limit in seconds")
    args = ap.parse_args()
    workloads = QUICK if args.quick else FULL
    chosen = [CONTENDERS[c.strip()]() for c in args.only.split(",") if c.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="k2k-bench-"))
    print(f"machine: {machine()}", flush=True)
    # Full JIT for the brokers (the test default stops at C1 for faster start-up), 1 GiB heaps.
    pair = start_pair(tmp / "clusters", free_port(), free_port(), heap="1g", jvm_options=())
    results: list[Result] = []
    try:
        for w in workloads:
            ends = preload(pair.source.bootstrap, w)
            for contender in chosen:
                dest = f"{w.topic}-{contender.__class__.__name__.lower()}-{uuid.uuid4().hex[:6]}"
                ctx = Ctx(pair.source.bootstrap, pair.target.bootstrap, w, dest, ends, tmp)
                r = measure(contender, ctx, args.timeout)
                results.append(r)
                print(
                    f"  {r.contender:24} {w.name:8} {r.rate:>12,.0f} records/s {r.mbps:8.1f} MB/s  complete={r.complete}",
                    flush=True,
                )
    finally:
        pair.stop()
    print()
    print(table(results))
    by = {(r.contender, r.workload.name): r for r in results}
    for w in workloads:
        b = by.get((BareLoop.name, w.name))
        for variant in (K2KAtLeastOnce, K2KLargeBatches):
            k = by.get((variant.name, w.name))
            if k and b and b.rate:
                print(f"{variant.name} vs bare loop, {w.name}: {k.rate / b.rate:.0%}")


if __name__ == "__main__":
    main()
