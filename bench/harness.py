"""Benchmark harness: same brokers, same data, each contender in turn, one table.

    bench/run [--quick] [--only k2k,mm2,...] [--skip-steady]

1. Fetch every contender's jars (``setup``), then start one embedded source/target pair.
2. Warm the brokers' JIT with an unmeasured bare-loop copy, so the first contender is not
   penalised (and, before the W2 runs, with an unmeasured W2-shaped copy: see
   :func:`warm_brokers_for_steady`).
3. **W1 backlog**: load each workload once into an 8-partition source topic; each contender
   copies it once unmeasured (:func:`warm_up_round`), then, per round, into a fresh target
   topic while a monitor samples the target's end offsets and
   the contender's process tree (CPU seconds, summed RSS) every 100 ms. A run counts only if
   the target holds exactly the source's records per partition and sampled records are
   byte-identical (key, value, timestamp).
   With ``--verify``, each complete W1 copy by a k2k contender is then checked with
   ``k2k verify`` on the same pipeline file, timed like a contender (:func:`run_verify`),
   and printed next to the copy.
4. **W2 steady state**: per contender and rate, a fresh source topic; the contender is
   started, warm-up records are written until one reaches the target and the probe has read
   one, then the same rate runs unmeasured for ``warmup_s``; then a paced writer sends
   ``rate`` records/s for the window while a probe on the target (``read_committed``)
   measures source timestamp → visible latency (``bench/latency.py``). The CPU time the
   brokers' JIT compilers use during the window is printed with it: a window that overlaps
   the brokers' compilation measures the machine's warm-up, not the contender.

Instead of W1 and W2 (issue 47; by default for k2k, k2k-eos, mm2 and bare, resp. k2k,
k2k-eos, mm2 and mm2-eos):

* ``--w3``: **W3, many partitions** (:mod:`bench.w3`): 1,000 topics x 8 partitions
  (``--w3-topics``, ``--w3-partitions``), created and deleted in batches. The *catch-up*:
  50 records per partition (``--w3-backlog``), copied by each contender once unmeasured and
  then ``--rounds`` times; time from process start to the first record on the target,
  catch-up records/s, time to all copied, the copy compared with the source partition by
  partition. The *steady* part: per contender and round fresh topics, a paced writer at
  1,000 records/s (``--w3-rate``) round-robin over all partitions, the latency probe on every
  target partition, p50/p99/p99.9/max. The embedded brokers get 2 GiB heaps
  (``--broker-heap``).
* ``--long-w2``: **the long W2** (:mod:`bench.long_w2`): one W2 window at 5,000 records/s
  lasting 3.4 k2k leases (17 minutes by default), a topic created two leases into it that
  the contenders must find and copy; p50/p99/p99.9/max and the largest latency per 10 s,
  where lease boundaries and the discovery show. ``--lease-duration`` and
  ``--discovery-interval`` set k2k's (a smoke run: "20 seconds" and "5 seconds"); MirrorMaker
  2 refreshes its topics at the same interval.

Both end with a second table (first record, all copied, the latency tail) and summary lines
of medians against the bare loop and MirrorMaker 2.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import hashlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.ceiling import BareLoop, BareLoopTransactional, ProducerPerfTool
from bench.contender import Contender, Ctx, create_topic
from bench.k2k_bench import (
    K2KAtLeastOnce,
    K2KAtLeastOnceClientStatistics,
    K2KAtLeastOnceIdentical,
    K2KAtLeastOnceMappings,
    K2KAtLeastOnceTelemetry,
    K2KExactlyOnce,
    K2KExactlyOnceFastCommit,
    K2KExactlyOnceMappings,
    K2KFromMM2File,
    K2KFromMM2FileExactlyOnce,
)
from bench.latency import WARMUP, PacedWriter
from bench.lifecycle import (
    STOPPING,
    Interrupted,
    install_handlers,
    stop_processes,
    stop_strays,
)
from bench.long_w2 import (
    DEFAULT_DISCOVERY,
    DEFAULT_LEASE,
    NewTopic,
    new_topic_at_s,
    per_10s_lines,
    window_s,
)
from bench.mm2 import MirrorMaker2AtLeastOnce, MirrorMaker2ExactlyOnce
from bench.spark_sss import SparkStructuredStreaming
from bench.topics import ADMIN_BATCH, bulk_producer, create_topics, delete_topics, end_offsets_many
from bench.w3 import Digests, ManyReader, ManyTopics, digest_many, load, wait_files_gone
from k2k.config.durations import parse_duration
from k2k.kafka.factory import CONSUMER_DEFAULTS
from k2k.local import ClusterPair, free_port, start_pair

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 8

#: Every contender, in the order they run.
CONTENDERS: list[type[Contender]] = [
    K2KAtLeastOnce,
    K2KAtLeastOnceMappings,
    K2KAtLeastOnceIdentical,
    K2KAtLeastOnceTelemetry,
    K2KAtLeastOnceClientStatistics,
    K2KExactlyOnce,
    K2KExactlyOnceMappings,
    K2KExactlyOnceFastCommit,
    MirrorMaker2AtLeastOnce,
    MirrorMaker2ExactlyOnce,
    K2KFromMM2File,
    K2KFromMM2FileExactlyOnce,
    SparkStructuredStreaming,
    ProducerPerfTool,
    BareLoop,
    BareLoopTransactional,
]

#: A W1 run in which no record reached the target for this long says so in its note.
STALL_NOTE_S = 2.0
#: The long W2: how long after the window the topic created in it may still take to be copied.
NEW_TOPIC_GRACE_S = 60.0


@dataclass(frozen=True)
class Backlog:
    name: str
    records: int
    value_size: int

    @property
    def topic(self) -> str:
        return f"bench-{self.name}-{self.records}"


@dataclass(frozen=True)
class Steady:
    rate: int  # records/s
    seconds: float  # the measured window
    warmup_s: float  # the same rate, unmeasured, right before the window
    value_size: int = 100
    #: The long W2 (bench/long_w2.py): a topic is created this many seconds into the window,
    #: and the contenders copy every topic that starts with the measured topic's name.
    new_topic_at_s: float | None = None

    @property
    def name(self) -> str:
        if self.new_topic_at_s is not None:
            span = self.seconds / 60
            length = f"{span:g}min" if span.is_integer() else f"{self.seconds:g}s"
            return f"W2-long-{self.rate // 1000}k/s-{length}"
        return f"W2-{self.rate // 1000}k/s"


@dataclass(frozen=True)
class Plan:
    backlog: tuple[Backlog, ...]
    steady: tuple[Steady, ...]
    warmup_records: int
    #: The W2 broker warm-up's window (:func:`warm_brokers_for_steady`): the brokers'
    #: compilers were busy for about 50 s of the first W2 contender's run without it.
    steady_warmup_s: float
    #: W1 copies of each workload per contender, unless ``--rounds`` says otherwise.
    rounds: int = 1
    #: The W1 warm-up round copies this many records of each workload's record size instead
    #: of the workload itself (None: the workload itself).
    warm_up_round_records: int | None = None
    #: W3 (``--w3``): many topics, its catch-up and its steady part (bench/w3.py).
    many: ManyTopics | None = None

    def warm_up_workload(self, w: Backlog) -> Backlog:
        """What each contender copies, unmeasured, before the measured rounds of ``w``."""
        n = self.warm_up_round_records
        return w if n is None or n >= w.records else Backlog(f"{w.name}-warm-up", n, w.value_size)


FULL = Plan(
    (Backlog("W1-100B", 5_000_000, 100), Backlog("W1-1KB", 1_000_000, 1024)),
    (Steady(5_000, 60, 15), Steady(20_000, 60, 15)),
    1_000_000,
    90,
)
#: Quick mode's contenders unless ``--only`` names others: the ones the headline ratios are of.
#: W3's too.
QUICK_CONTENDERS = ("k2k", "k2k-eos", "mm2", "bare")
#: The long W2's contenders unless ``--only`` names others.
LONG_CONTENDERS = ("k2k", "k2k-eos", "mm2", "mm2-eos")
#: The embedded brokers' heap; W3's, whose target holds 8,000 partitions besides the control
#: topics (a 512 MB broker ran out of memory near 13,000 partitions).
BROKER_HEAP = "1g"
W3_BROKER_HEAP = "2g"
#: With :data:`QUICK_CONTENDERS`: the full run's W1-100B, two rounds after a warm-up round of
#: 1M records; the W2 rate only with ``--skip-backlog`` (run time and why:
#: docs/benchmarks.md#quick-mode). The backlog is the full run's, so its figures are the
#: full run's (a shorter copy is dominated by its ramp, e.g. one runner starting before the
#: other), and two rounds because single copies differ by up to a third.
QUICK = Plan(
    (FULL.backlog[0],),
    (Steady(5_000, 10, 5),),
    200_000,
    20,
    rounds=2,
    warm_up_round_records=1_000_000,
)


@dataclass
class Result:
    contender: str
    guarantee: str
    workload: str
    records: int
    value_size: int
    seconds: float = 0.0  # backlog: first record on the target -> last record on the target
    wall: float = 0.0  # process start -> done (includes JVM/Spark start-up)
    cpu_s: float = 0.0
    #: backlog: CPU s inside the copy window (``seconds``), start-up and shutdown excluded
    copy_cpu_s: float | None = None
    peak_rss_mb: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None  # steady: p99.9
    max_ms: float | None = None  # steady: the largest latency in the window
    first_s: float | None = None  # W3 catch-up: process start -> first record on the target
    all_s: float | None = None  # W3 catch-up: process start -> every record on the target
    jit_s: float | None = None  # steady: CPU s of the brokers' JIT compilers in the window
    steal_pct: float | None = None  # share of the machine's CPU time the hypervisor took
    complete: bool = False
    note: str = ""
    #: steady: the largest latency per 10 s of the window (None: nothing sent in them)
    per_10s_max_ms: list[int | None] = dataclasses.field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mbps(self) -> float:
        return self.rate * (self.value_size + 8) / 1e6


# -- cluster reads ------------------------------------------------------------------------

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


def preload(bootstrap: str, topic: str, records: int, value_size: int) -> dict[int, int]:
    ends = end_offsets(bootstrap, topic)
    if sum(ends.values()) == records:
        return ends
    create_topic(bootstrap, topic, PARTITIONS)
    rng = random.Random(records)
    values = [rng.randbytes(value_size) for _ in range(997)]
    p = bulk_producer(bootstrap)
    t0 = time.monotonic()
    base_ts = int(time.time() * 1000) - 3_600_000  # recent: old stamps fall to retention
    headers = [("bench", b"k2k")]
    for i in range(records):
        key = i.to_bytes(8, "big")
        while True:
            try:
                p.produce(
                    topic,
                    values[i % 997],
                    key,
                    i % PARTITIONS,
                    timestamp=base_ts + i,
                    headers=headers if i % 10 == 0 else None,
                )
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    print(f"  loaded {records:,} x {value_size} B into {topic} in {time.monotonic() - t0:.1f} s")
    return end_offsets(bootstrap, topic)


#: How long the target's transaction code is warmed up before W2-only runs (when a contender
#: writes transactions).
TXN_WARMUP_S = 30.0


def warm_transactions(bootstrap: str, seconds: float) -> None:
    """Unmeasured: small transactions on the target, read back ``read_committed``.

    The backlog warm-up copies without transactions, so the broker's transaction paths
    (coordinator, partition registration, markers, the last stable offset) were still
    cold when the first exactly-once contender ran. Needed only without W1, whose
    :func:`warm_up_round` warms them; W2's other cold paths and the brokers' JIT are left to
    :func:`warm_brokers_for_steady` (run S in docs/benchmarks.md).
    """
    topic, progress = "bench-warmup-txn", "bench-warmup-txn-progress"
    create_topic(bootstrap, topic, PARTITIONS)
    create_topic(bootstrap, progress, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warmup"})
    producer.init_transactions(60)
    reader = _committed_reader(bootstrap, f"bench-warmup-{uuid.uuid4().hex[:6]}")
    reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    value = b"w" * 100
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        producer.begin_transaction()
        for i in range(400):
            producer.produce(topic, value, None, i % PARTITIONS)
        producer.produce(progress, value, None, 0)
        producer.commit_transaction(60)
        n += 1
        reader.consume(1000, 0.01)
    reader.close()
    print(f"  warmed the target's transactions: {n:,} commits in {seconds:.0f} s", flush=True)


def warm_brokers_for_steady(env: Env, first: Steady, seconds: float) -> None:
    """Unmeasured: the transactional bare loop at the first W2 rate for ``seconds``.

    Paced produce on the source, ``read_committed`` fetches on both clusters and 100 ms
    transactions on the target are code paths the backlog warm-up leaves cold. On two cores
    the brokers' JIT compilers took most of a core for the first minute of W2 load, so the
    first W2 contender measured their warm-up (its p99 at 5k/s depended on whether it ran
    first). Production brokers are long warm; this gives every contender warm ones.
    """
    shape = Steady(first.rate, seconds, first.warmup_s, first.value_size)
    r = run_steady(BareLoopTransactional(), shape, env)
    print(
        f"  warmed the brokers for W2: {r.contender} at {first.rate:,}/s for "
        f"{seconds:.0f} s (p99 {_ms(r.p99_ms)} ms; brokers' JIT {_jit(r)} CPU s, "
        f"steal {_pct(r.steal_pct)} %, {_verdict(r, 'complete')})",
        flush=True,
    )


#: The parts of the machine's CPU time that add up to all of it (guest time is in ``user``).
_CPU_PARTS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_clock() -> tuple[float, float]:
    """(all, stolen) CPU seconds of the machine so far (psutil, Linux)."""
    t = psutil.cpu_times()
    return sum(getattr(t, part) for part in _CPU_PARTS), t.steal


def settle_disk() -> None:
    """Write back what earlier copies and loads left dirty in the page cache. The brokers
    do not fsync, so the kernel writes a copy's gigabyte out 30 s later
    (``vm.dirty_expire_centisecs``), inside whichever contender's window runs then, on the
    same two cores and disk (docs/benchmarks.md#what-a-run-does)."""
    os.sync()


def steal_pct(since: tuple[float, float]) -> float:
    """Percent of the machine's CPU time since ``since`` that the hypervisor gave elsewhere.

    This machine is a VM: when its host is busy, steal reached 55-70 % of the time, and
    every figure measured then is the host's, not the contender's (docs/benchmarks.md).
    """
    total, stolen = cpu_clock()
    span = total - since[0]
    return 100 * (stolen - since[1]) / span if span else 0.0


def jit_cpu_s(pids: tuple[int, ...]) -> float:
    """CPU seconds the JIT compiler threads of the JVMs ``pids`` have used (Linux ``/proc``).

    HotSpot names them ``C1 CompilerThre…``/``C2 CompilerThre…``; a compiler thread that has
    already exited is not counted, so this is a lower bound.
    """
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            if "CompilerThre" in name:
                fields = rest.split()
                total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _committed_reader(bootstrap: str, group: str) -> Consumer:
    """A consumer for checks: ``read_committed``, end-of-partition events, no commits; with
    k2k's source-consumer defaults, whose ``fetch.queue.backoff.ms`` resumes fetching as soon
    as the local queue drains (librdkafka's default postpones it by 1 s, which kept these
    reads waiting most of their time: docs/benchmarks.md#quick-mode)."""
    return Consumer(
        {
            **CONSUMER_DEFAULTS,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )


def digest(bootstrap: str, topic: str, with_ts: bool) -> dict[int, tuple[int, str]]:
    """Per partition: (record count, ordered hash of key, value, headers and maybe timestamp),
    read with ``read_committed`` up to the end offsets at the time of the call.

    Reading everything makes the check independent of offsets, which transaction markers of
    exactly-once contenders shift."""
    ends = end_offsets(bootstrap, topic)
    c = _committed_reader(bootstrap, "bench-digest")
    hashes = {p: hashlib.blake2b(digest_size=16) for p in ends}
    counts = dict.fromkeys(ends, 0)
    todo = {p for p, end in ends.items() if end > 0}
    c.assign([TopicPartition(topic, p, 0) for p in todo])
    deadline = time.monotonic() + 600
    while todo and time.monotonic() < deadline:
        for m in c.consume(10_000, 1):
            p = m.partition()
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[p]:
                    todo.discard(p)
                continue
            h = hashes[p]
            h.update(m.key() or b"\0")
            h.update(m.value() or b"\0")
            headers = m.headers()
            if headers:
                h.update(repr(headers).encode())
            if with_ts:
                h.update(m.timestamp()[1].to_bytes(8, "big"))
            counts[p] += 1
    c.close()
    return {p: (counts[p], hashes[p].hexdigest()) for p in ends}


_source_digests: dict[tuple[str, bool], dict[int, tuple[int, str]]] = {}


def identical(ctx: Ctx, with_ts: bool) -> tuple[bool, str]:
    """The target equals the source, partition by partition, record for record."""
    key = (ctx.topic, with_ts)
    if key not in _source_digests:
        _source_digests[key] = digest(ctx.source, ctx.topic, with_ts)
    want = _source_digests[key]
    got = digest(ctx.target, ctx.dest, with_ts)
    if got == want:
        return True, ""
    have = sum(n for n, _ in got.values())
    total = sum(n for n, _ in want.values())
    if have != total:
        return False, f"INCOMPLETE: {have:,} of {total:,} records"
    differ = sorted(p for p in want if got.get(p) != want[p])
    return False, f"DIFFERENT content in partitions {differ}"


_tail_readers: dict[str, Consumer] = {}


def last_keys(bootstrap: str, topic: str) -> dict[int, bytes | None]:
    """The key of the last committed record of every partition (read near the end)."""
    ends = end_offsets(bootstrap, topic)
    c = _tail_readers.get(bootstrap)
    if c is None:  # polled every 100 ms near the end of a run: one client per cluster
        c = _tail_readers[bootstrap] = _committed_reader(bootstrap, "bench-tail")
    out: dict[int, bytes | None] = dict.fromkeys(ends)
    todo = {p for p, end in ends.items() if end > 0}
    c.assign([TopicPartition(topic, p, max(0, ends[p] - 64)) for p in todo])
    deadline = time.monotonic() + 10
    while todo and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                out[m.partition()] = m.key()
            elif m.error().code() == KafkaError._PARTITION_EOF:
                todo.discard(m.partition())
    c.unassign()
    return out


# -- measurement --------------------------------------------------------------------------


class Monitor(threading.Thread):
    """Samples the contender's whole process tree every 100 ms: CPU seconds, peak RSS, and
    the running CPU total over time (for the CPU spent inside a copy window)."""

    def __init__(self, procs: list[subprocess.Popen]) -> None:
        super().__init__(daemon=True)
        self.procs = procs
        self.cpu: dict[int, float] = {}
        self.peak_rss = 0
        self.timeline: list[tuple[float, float]] = []  # (monotonic s, CPU s so far)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.1):
            self.sample()

    def sample(self) -> None:
        rss = 0
        for proc in self._tree():
            try:
                t = proc.cpu_times()
                self.cpu[proc.pid] = t.user + t.system + t.children_user + t.children_system
                rss += proc.memory_info().rss
            except psutil.Error:
                pass
        self.peak_rss = max(self.peak_rss, rss)
        self.timeline.append((time.monotonic(), self.cpu_s()))

    def cpu_s(self) -> float:
        return sum(self.cpu.values())

    def cpu_at(self, when: float) -> float:
        """The tree's CPU seconds at monotonic time ``when``, interpolated between samples."""
        points = self.timeline
        i = bisect.bisect_left(points, (when, -1.0))
        if i == 0:
            return points[0][1] if points else 0.0
        if i == len(points):
            return points[-1][1]
        (t0, c0), (t1, c1) = points[i - 1], points[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def _tree(self) -> list[psutil.Process]:
        out = []
        for p in list(self.procs):
            try:
                root = psutil.Process(p.pid)
                out.append(root)
                out.extend(root.children(recursive=True))
            except psutil.Error:
                pass
        return out


def run_backlog(
    c: Contender,
    w: Backlog,
    env: Env,
    ends: dict[int, int],
    limit: float,
    verified: list[Result] | None = None,
) -> Result:
    """One W1 copy by ``c``. With ``verified`` (``--verify``) and a complete copy by a k2k
    contender, ``k2k verify`` then checks it: its result is appended to ``verified``."""
    run = uuid.uuid4().hex[:6]
    ctx = Ctx(
        env.source,
        env.target,
        w.topic,
        c.dest_topic(w.topic, run),
        PARTITIONS,
        False,
        run,
        env.scratch(run),
        records=w.records,
        value_size=w.value_size,
        ends=ends,
    )
    res = Result(c.name, c.guarantee, w.name, w.records, w.value_size)
    total = sum(ends.values())
    tails = last_keys(env.source, w.topic) if c.guarantee == "exactly-once" else {}
    settle_disk()
    started = time.monotonic()
    clock = cpu_clock()
    monitor = Monitor(ctx.procs)
    c.start(ctx)
    monitor.start()
    first = done = None
    # The longest time in the copy window in which nothing new reached the target: on this
    # 2-core machine the brokers sometimes starve for seconds (docs/benchmarks.md), and a
    # figure that hides such a stall cannot be compared with one that had none.
    last_have, last_change, longest_stall = 0, 0.0, 0.0
    # Exactly-once targets hold transaction markers, so end offsets overshoot the record
    # count: there, done means every partition's last source record is on the target.
    transactional = c.guarantee == "exactly-once"
    try:
        while time.monotonic() - started < limit:
            if done is None:
                have = sum(end_offsets(ctx.target, ctx.dest).values())
                now = time.monotonic()
                if have > 0 and first is None:
                    first = now
                if have != last_have:
                    if last_have:
                        longest_stall = max(longest_stall, now - last_change)
                    last_have, last_change = have, now
                if have >= total and (
                    not transactional or last_keys(ctx.target, ctx.dest) == tails
                ):
                    done = now
                    if not c.exits_when_done:
                        break
            if done is not None and all(p.poll() is not None for p in ctx.procs):
                break
            if done is None and ctx.procs and all(p.poll() is not None for p in ctx.procs):
                res.note = "exited early"
                break
            time.sleep(0.1)  # the monitor's sampling period
        else:
            res.note = "timed out"
    finally:
        monitor.sample()
        stop_processes(ctx.procs, c.name)
        monitor.stop()
    res.cpu_s = monitor.cpu_s()
    res.steal_pct = steal_pct(clock)
    res.peak_rss_mb = monitor.peak_rss / 2**20
    res.wall = time.monotonic() - started
    if first is not None and done is not None:
        res.seconds = done - first
        res.copy_cpu_s = monitor.cpu_at(done) - monitor.cpu_at(first)
    if longest_stall >= STALL_NOTE_S:
        stalled = f"nothing reached the target for {longest_stall:.1f} s"
        res.note = f"{res.note}; {stalled}" if res.note else stalled
    check_copy(c, w, env, ctx, res, limit, verified)
    return res


def check_copy(
    c: Contender,
    w: Backlog,
    env: Env,
    ctx: Ctx,
    res: Result,
    limit: float,
    verified: list[Result] | None,
) -> None:
    """Complete or not (and why, in ``res``); with ``verified``, ``k2k verify`` on a complete
    k2k copy; then the copy's target topic goes, unless ``--keep-data``."""
    if c.exact:
        res.complete, why = identical(ctx, c.keeps_timestamps)
    else:
        have, total = sum(end_offsets(ctx.target, ctx.dest).values()), sum(ctx.ends.values())
        res.complete, why = have == total, f"INCOMPLETE: {have:,} of {total:,} records"
    if not res.complete:
        res.note = f"{why}; {res.note}" if res.note else why
    # The MM2-file contenders have no pipeline file of their own to verify with.
    checkable = isinstance(c, K2KAtLeastOnce) and not isinstance(c, K2KFromMM2File)
    if verified is not None and res.complete and checkable:
        verified.append(run_verify(c, w, ctx, limit))
    if not env.keep_data:
        drop_topic(env, ctx.dest)


def drop_topic(env: Env, topic: str) -> None:
    """Delete a checked copy's target topic, and on the embedded target wait until its files
    are gone: a full run's copies would not fit this machine's disk
    (docs/benchmarks.md#what-a-run-does), and files deleted later would be written off during
    another contender's copy."""
    admin = AdminClient({"bootstrap.servers": env.target})
    for future in admin.delete_topics([topic], operation_timeout=30, request_timeout=30).values():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:  # never created
                print(f"  could not delete {topic} on the target: {exc.args[0].str()}", flush=True)
            return
    if env.target_data is None:
        return
    deadline = time.monotonic() + 30
    while any(env.target_data.glob(f"*/{topic}-*")) and time.monotonic() < deadline:
        time.sleep(0.1)


def run_verify(c: Contender, w: Backlog, ctx: Ctx, limit: float) -> Result:
    """``k2k verify --json`` on the pipeline file ``c`` just copied ``w`` with (its progress
    is committed up to the end), timed from process start to exit like a contender: the
    whole process tree's CPU seconds and peak RSS. Complete when it exits 0 having compared
    every record."""
    res = Result(f"k2k verify ({c.name})", "-", w.name, w.records, w.value_size)
    argv = [
        str(ROOT / ".venv/bin/k2k"),
        "verify",
        "--json",
        "-f",
        str(ctx.tmp / f"{ctx.dest}.yaml"),
    ]
    out = ctx.tmp / f"{ctx.dest}.verify.json"
    procs: list[subprocess.Popen] = []
    monitor = Monitor(procs)
    clock = cpu_clock()
    started = time.monotonic()
    with open(out, "w") as stdout, open(ctx.tmp / f"{ctx.dest}.verify.log", "w") as log:
        procs.append(subprocess.Popen(argv, stdout=stdout, stderr=log))
    monitor.start()
    try:
        code = procs[0].wait(limit)
    except subprocess.TimeoutExpired:
        code = None
        res.note = "timed out"
    finally:
        monitor.sample()
        stop_processes(procs, res.contender)
        monitor.stop()
    res.wall = res.seconds = time.monotonic() - started
    res.cpu_s = monitor.cpu_s()
    res.peak_rss_mb = monitor.peak_rss / 2**20
    res.steal_pct = steal_pct(clock)
    try:
        report = json.loads(out.read_text())
    except ValueError:
        report = {}
    compared = report.get("sourceRecords", 0)
    res.complete = code == 0 and report.get("ok") is True and compared == w.records
    if not res.complete and not res.note:
        res.note = f"exit {code}: {report.get('summary', 'no report')}"
    return res


def start_probe(
    env: Env,
    topic: str | list[str],
    expect: int,
    out: Path,
    limit_s: float,
    partitions: int = PARTITIONS,
) -> subprocess.Popen:
    """The latency probe (``bench/latency.py``, its own process) on the target ``topic`` (or
    topics): it writes a ready file beside ``out`` once it reads, and its figures to ``out``."""
    argv = [sys.executable, "-m", "bench.latency", "--target", env.target]
    if isinstance(topic, str):
        argv += ["--topic", topic]
    else:
        names = out.with_suffix(".topics")
        names.write_text("\n".join(topic) + "\n")
        argv += ["--topics", str(names)]
    argv += ["--partitions", str(partitions), "--expect", str(expect)]
    argv += ["--out", str(out), "--limit", str(limit_s)]
    return subprocess.Popen(argv, cwd=ROOT)


def latency_figures(env: Env, res: Result, out: Path) -> dict[str, Any]:
    """The probe's figures (none if it wrote none), its p50 and p99 put in ``res``, and
    the window appended to the run's ``latency.jsonl``."""
    figures = json.loads(out.read_text()) if out.is_file() else {}
    res.p50_ms = figures.get("p50_ms")
    res.p99_ms = figures.get("p99_ms")
    res.p999_ms = figures.get("p999_ms")
    res.max_ms = figures.get("max_ms")
    res.per_10s_max_ms = figures.get("per_10s_max_ms", [])
    line = {"contender": res.contender, "workload": res.workload, "jit_s": res.jit_s}
    line |= {"steal_pct": res.steal_pct, **figures}
    with (env.tmp / "latency.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")
    return figures


def run_steady(c: Contender, s: Steady, env: Env) -> Result:
    """One W2 window of ``c``; the long W2 (``s.new_topic_at_s``) also creates a topic
    mid-window (:class:`bench.long_w2.NewTopic`), which ``c`` must find and copy."""
    run = uuid.uuid4().hex[:6]
    topic = f"steady-{s.rate}-{run}"
    create_topic(env.source, topic, PARTITIONS)
    long = s.new_topic_at_s is not None
    ctx = Ctx(
        env.source,
        env.target,
        topic,
        c.dest_topic(topic, run),
        PARTITIONS,
        True,
        run,
        env.scratch(run),
        value_size=s.value_size,
        prefix=long,  # the long W2: also the topic created mid-window
        topics=(topic,),
    )
    expect = int(s.rate * s.seconds)
    res = Result(c.name, c.guarantee, s.name, expect, s.value_size)
    writer = PacedWriter(env.source, topic, PARTITIONS, s.value_size)
    monitor = Monitor(ctx.procs)
    started = time.monotonic()
    c.start(ctx)
    monitor.start()
    out = ctx.tmp / "latency.json"
    probe = new_topic = None
    new_topic_note = ""
    try:
        # Ready once a warm-up record made it through (start-up, topic creation, discovery).
        while sum(end_offsets(ctx.target, ctx.dest).values()) == 0:
            if time.monotonic() - started > 300 or all(p.poll() is not None for p in ctx.procs):
                res.note = "never became ready"
                return res
            writer.warmup()
            time.sleep(1)  # one warm-up round per second; readiness is polled meanwhile
        probe = start_probe(env, ctx.dest, expect, out, s.seconds + 120)
        while not out.with_suffix(".ready").exists():
            if time.monotonic() - started > 360 or probe.poll() is not None:
                res.note = "latency probe never became ready"
                return res
            writer.warmup()
            time.sleep(0.2)  # a warm-up round, then look for the probe's ready file again
        writer.run(s.rate, s.warmup_s, WARMUP)
        monitor.sample()
        cpu0, jit0, clock = monitor.cpu_s(), jit_cpu_s(env.broker_pids), cpu_clock()
        if s.new_topic_at_s is not None:
            new = f"{topic}-new"
            new_topic = NewTopic(
                env.source, env.target, new, c.dest_topic(new, run), PARTITIONS, s.new_topic_at_s
            )
            new_topic.start()
        writer.run(s.rate, s.seconds)
        probe.wait(s.seconds + 180)
        if new_topic is not None:
            new_topic_note = new_topic.finish(NEW_TOPIC_GRACE_S)
        monitor.sample()
        res.cpu_s = monitor.cpu_s() - cpu0
        res.steal_pct = steal_pct(clock)
        res.jit_s = jit_cpu_s(env.broker_pids) - jit0 if env.broker_pids else None
        res.seconds = s.seconds
    finally:
        if probe is not None and probe.poll() is None:
            probe.kill()
        if new_topic is not None and not new_topic_note:  # the window ended early
            new_topic_note = new_topic.finish(0)
        stop_processes(ctx.procs, c.name)
        monitor.stop()
        res.wall = time.monotonic() - started
        res.peak_rss_mb = monitor.peak_rss / 2**20
    figures = latency_figures(env, res, out)
    received, dups = figures.get("received", 0), figures.get("duplicates", 0)
    res.complete = received == expect
    if not res.complete:
        res.note = f"INCOMPLETE: {received:,} of {expect:,} measured records seen"
    elif c.exact:
        res.complete, res.note = identical(ctx, c.keeps_timestamps)
    if res.complete and dups:
        res.note = f"{dups} duplicates"
    if new_topic is not None:
        # A contender that never copied the new topic skipped the discovery: not comparable.
        res.complete = res.complete and new_topic.copied_s is not None
        leases = k2k_leases(ctx.tmp / f"{ctx.dest}.log")
        if leases is not None:
            new_topic_note += f"; {leases} k2k leases in the run"
        res.note = f"{res.note}; {new_topic_note}" if res.note else new_topic_note
    return res


_LEASES = re.compile(r"over (\d+) lease\(s\)")


def k2k_leases(log: Path) -> int | None:
    """How many leases ``k2k start`` ran, from the summary line it logs when it stops (None:
    not a k2k log, or no summary)."""
    try:
        found = _LEASES.findall(log.read_text(errors="replace"))
    except OSError:
        return None
    return int(found[-1]) if found else None


# -- W3, many partitions (bench/w3.py) ------------------------------------------------------


@dataclass
class W3Source:
    """The W3 catch-up backlog on the source: its topics, their end offsets and, computed
    once per timestamp choice, the digests every copy is compared with."""

    prefix: str
    topics: list[str]
    ends: dict[tuple[str, int], int]
    partitions: int
    digests: dict[bool, Digests] = dataclasses.field(default_factory=dict)

    def digest(self, bootstrap: str, with_ts: bool) -> Digests:
        if with_ts not in self.digests:
            self.digests[with_ts] = digest_many(bootstrap, self.topics, self.partitions, with_ts)
        return self.digests[with_ts]


def load_w3(env: Env, many: ManyTopics) -> W3Source:
    """Create W3's source topics (in batches) and load the catch-up backlog into them."""
    prefix = f"w3-{uuid.uuid4().hex[:6]}-"
    topics = many.names(prefix)
    t0 = time.monotonic()
    create_topics(env.source, topics, many.partitions)
    created = time.monotonic() - t0
    took = load(env.source, topics, many.partitions, many.per_partition, many.value_size)
    ends = end_offsets_many(AdminClient({"bootstrap.servers": env.source}), topics, many.partitions)
    short = [tp for tp in ends if ends[tp] != many.per_partition]
    if len(ends) != many.topics * many.partitions or short:
        raise RuntimeError(f"W3 source not loaded as planned: {len(short)} partitions differ")
    print(
        f"  created {many.topics:,} topics x {many.partitions} partitions ({prefix}*) on the "
        f"source in {created:.1f} s, {ADMIN_BATCH} per request; loaded {many.records:,} x "
        f"{many.value_size} B in {took:.1f} s",
        flush=True,
    )
    return W3Source(prefix, topics, ends, many.partitions)


def drop_topics(env: Env, bootstrap: str, topics: list[str]) -> None:
    """Delete ``topics`` in batches (unless ``--keep-data``); on the embedded target, wait
    until their files are gone (:func:`drop_topic` says why)."""
    if env.keep_data or not topics:
        return
    if STOPPING.is_set() and env.broker_pids:
        return  # the run is ending: the embedded brokers' data goes with them
    for problem in delete_topics(bootstrap, topics)[:3]:
        print(f"  {problem}", flush=True)
    data = env.target_data if bootstrap == env.target else None
    if data is not None and not wait_files_gone(data, topics):
        print(f"  the target still holds files of deleted topics ({topics[0]}...)", flush=True)


def _targets_ready(target: str, dests: list[str], partitions: int) -> float:
    """Create the target topics and wait until every partition answers a ListOffsets (its
    log exists); returns the seconds it took. A fresh broker creating the logs of 8,000
    partitions set every contender's pace (docs/benchmarks.md), so the catch-up measures the
    copy, and start-up with topic creation is bench.start_many_topics's to measure."""
    started = time.monotonic()
    create_topics(target, dests, partitions)
    admin = AdminClient({"bootstrap.servers": target})
    while len(end_offsets_many(admin, dests, partitions)) < len(dests) * partitions:
        time.sleep(1)
    return time.monotonic() - started


def run_w3_catch_up(
    c: Contender, many: ManyTopics, src: W3Source, env: Env, limit: float
) -> Result:
    """One W3 catch-up by ``c``: every partition of every ``src`` topic copied; times from
    process start to the first and to the last record read on the target
    (:class:`bench.w3.ManyReader`), CPU and memory as in W1."""
    run = uuid.uuid4().hex[:6]
    ctx = Ctx(
        env.source,
        env.target,
        src.prefix,
        c.dest_topic(src.prefix, run),
        many.partitions,
        False,
        run,
        env.scratch(run),
        records=many.records,
        value_size=many.value_size,
        prefix=True,
        topics=tuple(src.topics),
        topic_ends=src.ends,
    )
    dests = [c.dest_topic(t, run) for t in src.topics]
    want = {
        (i, p): src.ends[(t, p)] for i, t in enumerate(src.topics) for p in range(many.partitions)
    }
    res = Result(c.name, c.guarantee, many.catch_up_name, many.records, many.value_size)
    created = _targets_ready(env.target, dests, many.partitions)
    print(
        f"  created the {len(dests):,} target topics beforehand: their logs ready in {created:.1f} s"
    )
    reader = ManyReader(env.target, dests, many.partitions, c.keeps_timestamps, f"bench-w3-{run}")
    settle_disk()
    started = time.monotonic()
    clock = cpu_clock()
    monitor = Monitor(ctx.procs)
    try:
        c.start(ctx)
        monitor.start()
        ended_at = None
        while time.monotonic() - started < limit:
            reader.poll(0.1)
            if ended_at is None and ctx.procs and all(p.poll() is not None for p in ctx.procs):
                ended_at = time.monotonic()  # what it wrote may still be on its way
            if reader.reached(want):
                break
            if ended_at is not None and time.monotonic() - ended_at > 10:
                res.note = "exited early"
                break
        else:
            res.note = "timed out"
        if reader.reached(want) and c.exits_when_done:
            for p in ctx.procs:  # its own exit belongs to its wall time
                p.wait(max(1.0, limit - (time.monotonic() - started)))
    finally:
        monitor.sample()
        stop_processes(ctx.procs, c.name)
        monitor.stop()
        reader.close()
    res.wall = time.monotonic() - started
    res.cpu_s = monitor.cpu_s()
    res.steal_pct = steal_pct(clock)
    res.peak_rss_mb = monitor.peak_rss / 2**20
    if reader.first_at is not None and reader.last_at is not None and reader.reached(want):
        res.first_s, res.all_s = reader.first_at - started, reader.last_at - started
        res.seconds = reader.last_at - reader.first_at
        res.copy_cpu_s = monitor.cpu_at(reader.last_at) - monitor.cpu_at(reader.first_at)
    if ended_at is not None and reader.last_at is not None and reader.last_at - ended_at > 0.5:
        # A contender that exits when done (the bare loop) had written everything: a reader
        # still reading then measures itself, not the copy.
        late = f"the reader was done {reader.last_at - ended_at:.1f} s after the contender exited"
        res.note = f"{res.note}; {late}" if res.note else late
    got, expected = reader.digests(), src.digest(env.source, c.keeps_timestamps)
    res.complete = got == expected
    if not res.complete:
        have = sum(n for n, _ in got.values())
        why = (
            f"INCOMPLETE: {have:,} of {many.records:,} records"
            if have != many.records
            else f"DIFFERENT content in {sum(got.get(k) != v for k, v in expected.items())} partitions"
        )
        res.note = f"{why}; {res.note}" if res.note else why
    drop_topics(env, env.target, dests)
    return res


def run_w3_steady(c: Contender, many: ManyTopics, env: Env, limit: float) -> Result:
    """One W3 steady window of ``c``: fresh source topics (created in batches), the
    contender copying all of them, a paced writer over every partition, the latency probe on
    every target partition; both sides' topics are deleted afterwards."""
    run = uuid.uuid4().hex[:6]
    prefix = f"w3s-{run}-"
    topics = many.names(prefix)
    create_topics(env.source, topics, many.partitions)
    ctx = Ctx(
        env.source,
        env.target,
        prefix,
        c.dest_topic(prefix, run),
        many.partitions,
        True,
        run,
        env.scratch(run),
        value_size=many.value_size,
        prefix=True,
        topics=tuple(topics),
    )
    dests = [c.dest_topic(t, run) for t in topics]
    expect = int(many.rate * many.seconds)
    res = Result(c.name, c.guarantee, many.steady_name, expect, many.value_size)
    writer = PacedWriter(env.source, topics, many.partitions, many.value_size)
    admin = AdminClient({"bootstrap.servers": env.target})
    monitor = Monitor(ctx.procs)
    out = ctx.tmp / "latency.json"
    probe = None
    started = time.monotonic()
    try:
        c.start(ctx)
        monitor.start()
        # Ready once a warm-up record reached every target partition: all topics created,
        # every partition assigned and copying.
        writer.warmup()
        while True:
            ends = end_offsets_many(admin, dests, many.partitions)
            if len(ends) == len(dests) * many.partitions and all(ends.values()):
                break
            if time.monotonic() - started > limit or all(p.poll() is not None for p in ctx.procs):
                res.note = (
                    f"never became ready ({sum(v > 0 for v in ends.values()):,} partitions copying)"
                )
                return res
            time.sleep(1)  # readiness is polled; the warm-up records are already written
        probe = start_probe(env, dests, expect, out, many.seconds + 120, many.partitions)
        while not out.with_suffix(".ready").exists():
            if time.monotonic() - started > limit or probe.poll() is not None:
                res.note = "latency probe never became ready"
                return res
            time.sleep(0.2)  # the probe reads the warm-up records already on the target
        writer.run(many.rate, many.warmup_s, WARMUP)
        monitor.sample()
        cpu0, jit0, clock = monitor.cpu_s(), jit_cpu_s(env.broker_pids), cpu_clock()
        writer.run(many.rate, many.seconds)
        probe.wait(many.seconds + 180)
        monitor.sample()
        res.cpu_s = monitor.cpu_s() - cpu0
        res.steal_pct = steal_pct(clock)
        res.jit_s = jit_cpu_s(env.broker_pids) - jit0 if env.broker_pids else None
        res.seconds = many.seconds
    finally:
        if probe is not None and probe.poll() is None:
            probe.kill()
        stop_processes(ctx.procs, c.name)
        monitor.stop()
        res.wall = time.monotonic() - started
        res.peak_rss_mb = monitor.peak_rss / 2**20
        drop_topics(env, env.target, dests)
        drop_topics(env, env.source, topics)
    figures = latency_figures(env, res, out)
    received, dups = figures.get("received", 0), figures.get("duplicates", 0)
    res.complete = received == expect
    if not res.complete:
        res.note = f"INCOMPLETE: {received:,} of {expect:,} measured records seen"
    elif dups:
        res.note = f"{dups} duplicates"
    return res


def alternating(chosen: list[Contender], rounds: int) -> list[Contender]:
    """``rounds`` runs of each of ``chosen``, every other round in reverse order
    (:func:`backlog_order` says why)."""
    return [c for i in range(rounds) for c in (chosen if i % 2 == 0 else chosen[::-1])]


def run_w3(
    args: argparse.Namespace, plan: Plan, chosen: list[Contender], env: Env, results: list[Result]
) -> None:
    """W3: the catch-up (an unmeasured warm-up round, then ``plan.rounds`` rounds) unless
    ``--skip-backlog``, then the steady windows (``plan.rounds`` per contender) unless
    ``--skip-steady``; each result appended to ``results`` and printed."""
    many = plan.many
    assert many is not None
    capable = [c for c in chosen if c.prefix_capable]
    if not args.skip_backlog:
        src = load_w3(env, many)
        try:
            for c in alternating([c for c in capable if c.backlog_capable], 1):
                r = run_w3_catch_up(c, many, src, env, args.timeout)
                print(f"  {_w3_line(r)}  warm-up, not counted", flush=True)
            for c in alternating([c for c in capable if c.backlog_capable], plan.rounds):
                r = run_w3_catch_up(c, many, src, env, args.timeout)
                results.append(r)
                print(f"  {_w3_line(r)}", flush=True)
        finally:
            drop_topics(env, env.source, src.topics)
    if args.skip_steady:
        return
    for c in alternating([c for c in capable if c.steady_capable], plan.rounds):
        r = run_w3_steady(c, many, env, args.timeout)
        results.append(r)
        print(f"  {_w3_line(r)}", flush=True)


def _w3_line(r: Result) -> str:
    """The progress line of a W3 run (catch-up figures, or steady latencies)."""
    if r.workload.startswith("W3-steady"):
        figures = (
            f"p50 {_ms(r.p50_ms):>6} ms  p99 {_ms(r.p99_ms):>6} ms  "
            f"p99.9 {_ms(r.p999_ms):>6} ms  max {_ms(r.max_ms):>6} ms"
        )
    else:
        figures = (
            f"first record {_s(r.first_s):>6} s  {r.rate:>9,.0f} records/s  "
            f"all copied {_s(r.all_s):>6} s"
        )
    return f"{r.contender:32} {r.workload}  {figures}  steal {_pct(r.steal_pct):>3} %  {_verdict(r, 'complete')}"


# -- report -------------------------------------------------------------------------------


def _verdict(r: Result, word: str) -> str:
    """``word`` for a complete run, with its note if it has one (a stall, duplicates)."""
    if not r.complete:
        return r.note
    return f"{word} ({r.note})" if r.note else word


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _jit(r: Result) -> str:
    return "-" if r.jit_s is None else f"{r.jit_s:.1f}"


def _cpu(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def table(results: list[Result]) -> str:
    lines = [
        "| contender | guarantee | workload | records | records/s | MB/s | p50 ms | p99 ms "
        "| copy s | wall s | CPU s | copy CPU s | peak RSS MB | steal % | complete |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        steady = r.p50_ms is not None or r.workload.startswith("W2")
        rate = "-" if steady else f"{r.rate:,.0f}"
        mbps = "-" if steady else f"{r.mbps:,.1f}"
        lines.append(
            f"| {r.contender} | {r.guarantee} | {r.workload} | {r.records:,} | {rate} | {mbps} "
            f"| {_ms(r.p50_ms)} | {_ms(r.p99_ms)} | {r.seconds:.1f} | {r.wall:.1f} "
            f"| {r.cpu_s:.1f} | {_cpu(r.copy_cpu_s)} | {r.peak_rss_mb:,.0f} | {_pct(r.steal_pct)} | {_verdict(r, 'yes')} |"
        )
    return "\n".join(lines)


def tails_table(results: list[Result]) -> str:
    """W3 and the long W2: time to the first and to the last record, catch-up throughput,
    and the latency tail (empty when neither ran)."""
    rows = [r for r in results if r.workload.startswith(("W3", "W2-long"))]
    if not rows:
        return ""
    lines = [
        "| contender | guarantee | workload | records | first record s | all copied s "
        "| records/s | p50 ms | p99 ms | p99.9 ms | max ms | CPU s | peak RSS MB | steal % "
        "| complete |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        rate = f"{r.rate:,.0f}" if r.all_s is not None else "-"
        lines.append(
            f"| {r.contender} | {r.guarantee} | {r.workload} | {r.records:,} | {_s(r.first_s)} "
            f"| {_s(r.all_s)} | {rate} | {_ms(r.p50_ms)} | {_ms(r.p99_ms)} | {_ms(r.p999_ms)} "
            f"| {_ms(r.max_ms)} | {r.cpu_s:.1f} | {r.peak_rss_mb:,.0f} | {_pct(r.steal_pct)} "
            f"| {_verdict(r, 'yes')} |"
        )
    return "\n".join(lines)


#: The W3 and long W2 summary lines: (label, contender, the contender it is compared with).
_TAIL_COMPARISONS = (
    ("k2k at-least-once vs bare librdkafka loop", K2KAtLeastOnce.name, BareLoop.name),
    ("k2k exactly-once vs bare librdkafka loop", K2KExactlyOnce.name, BareLoop.name),
    (
        "k2k at-least-once vs MirrorMaker 2 at-least-once",
        K2KAtLeastOnce.name,
        MirrorMaker2AtLeastOnce.name,
    ),
    (
        "k2k exactly-once vs MirrorMaker 2 exactly-once",
        K2KExactlyOnce.name,
        MirrorMaker2ExactlyOnce.name,
    ),
    (
        "k2k exactly-once vs MirrorMaker 2 at-least-once",
        K2KExactlyOnce.name,
        MirrorMaker2AtLeastOnce.name,
    ),
)


def tail_ratios(results: list[Result]) -> list[str]:
    """The W3 and long W2 summary lines, of medians of complete runs: catch-up throughput
    and times from start, steady p50/p99 (and p99.9/max), each pair of :data:`_TAIL_COMPARISONS`
    that both ran. The issue's targets: k2k within 10 % of the bare loop on W3 throughput and
    p99, ahead of MirrorMaker 2 on both; in the long W2, k2k's p99.9 at most MirrorMaker 2's."""
    runs: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        if r.complete and r.workload.startswith(("W3", "W2-long")):
            runs.setdefault((r.contender, r.workload), []).append(r)

    def median(rs: list[Result], field: str) -> float | None:
        values = [getattr(r, field) for r in rs if getattr(r, field) is not None]
        return statistics.median(values) if values else None

    out = []
    for w in sorted({w for _, w in runs}):
        for label, a, b in _TAIL_COMPARISONS:
            ra, rb = runs.get((a, w)), runs.get((b, w))
            if not ra or not rb:
                continue
            n = min(len(ra), len(rb))
            medians = f" (medians of {n} runs each)" if n > 1 else ""
            if w.startswith("W3-catch-up"):
                ta, tb = (
                    statistics.median(r.rate for r in ra),
                    statistics.median(r.rate for r in rb),
                )
                parts = [f"throughput {ta:,.0f} vs {tb:,.0f} records/s ({ta / tb:.0%})"]
                for word, field in (("first record", "first_s"), ("all copied", "all_s")):
                    fa, fb = median(ra, field), median(rb, field)
                    if fa is not None and fb is not None:
                        parts.append(f"{word} {fa:.1f} vs {fb:.1f} s")
            else:
                fields = [("p50", "p50_ms"), ("p99", "p99_ms")]
                if w.startswith("W2-long"):
                    fields += [("p99.9", "p999_ms"), ("max", "max_ms")]
                else:
                    fields += [("max", "max_ms")]
                parts = []
                for word, field in fields:
                    fa, fb = median(ra, field), median(rb, field)
                    if fa is not None and fb is not None:
                        ratio = f" ({fa / fb:.0%})" if fb else ""
                        parts.append(f"{word} {fa:,.0f} vs {fb:,.0f} ms{ratio}")
            out.append(f"{w}, {label}: {'; '.join(parts)}{medians}")
    return out


def warm_up_round(
    chosen: list[Contender], w: Backlog, env: Env, ends: dict[int, int], limit: float
) -> None:
    """Unmeasured: each contender copies ``w`` once before the measured rounds, so that no
    measured copy pays for the brokers compiling the code paths its contender's requests
    take (docs/benchmarks.md#warm-up-round)."""
    for c in backlog_order(chosen, 1):
        r = run_backlog(c, w, env, ends, limit)
        print(
            f"  {r.contender:32} {w.name:8} {r.rate:>10,.0f} records/s "
            f"{r.mbps:7.1f} MB/s  warm-up, not counted  {_verdict(r, 'complete')}",
            flush=True,
        )


def backlog_order(chosen: list[Contender], rounds: int) -> list[Contender]:
    """The W1 runs of one workload: every round runs each backlog contender once, every
    other round in reverse, so no contender always follows the same one (the run that first
    exercises a broker code path pays for its JIT compilation: run AA in
    docs/benchmarks.md)."""
    capable = [c for c in chosen if c.backlog_capable]
    return [c for i in range(rounds) for c in (capable if i % 2 == 0 else capable[::-1])]


#: The W1 summary lines: (label, contender, the contender it is divided by).
_W1_COMPARISONS = (
    ("k2k at-least-once vs bare librdkafka loop", K2KAtLeastOnce.name, BareLoop.name),
    ("bare loop, transactions vs without", BareLoopTransactional.name, BareLoop.name),
    ("k2k exactly-once vs at-least-once", K2KExactlyOnce.name, K2KAtLeastOnce.name),
    ("k2k with metrics scraped 1/s vs without", K2KAtLeastOnceTelemetry.name, K2KAtLeastOnce.name),
    (
        "k2k with metrics and client statistics vs without",
        K2KAtLeastOnceClientStatistics.name,
        K2KAtLeastOnce.name,
    ),
)


def ratios(results: list[Result]) -> list[str]:
    """The summary lines; the last are ``ratio vs MirrorMaker 2, <workload>: ...``, one per
    W1 workload both ran.

    With ``--rounds`` a contender has several complete runs of a workload: the lines
    compare their medians."""
    runs: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.complete:
            runs.setdefault((r.contender, r.workload), []).append(r.rate)

    def rate(name: str, workload: str) -> float:
        rates = runs.get((name, workload))
        return statistics.median(rates) if rates else 0.0

    out = []
    w1 = sorted({r.workload for r in results if r.workload.startswith("W1")})
    for label, name, base in _W1_COMPARISONS:
        for w in w1:
            a, b = rate(name, w), rate(base, w)
            if a and b:
                n = min(len(runs[(name, w)]), len(runs[(base, w)]))
                medians = f" (medians of {n} runs each)" if n > 1 else ""
                out.append(f"{label}, {w}: {a / b:.0%}{medians}")
    walls: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.complete:
            walls.setdefault((r.contender, r.workload), []).append(r.wall)
    for (name, w), verify_walls in sorted(walls.items()):
        copied = name.removeprefix("k2k verify (").removesuffix(")")
        if name.startswith("k2k verify (") and (copied, w) in walls:
            v, copy = statistics.median(verify_walls), statistics.median(walls[(copied, w)])
            n = min(len(verify_walls), len(walls[(copied, w)]))
            medians = f" (medians of {n} runs each)" if n > 1 else ""
            out.append(
                f"k2k verify vs the copy it checks ({copied}), {w}: wall {v:.1f} s vs "
                f"{copy:.1f} s = {v / copy:.0%}{medians}"
            )
    out.extend(cpu_per_million(results, K2KAtLeastOnce.name, BareLoop.name))
    for w in w1:
        k_alo, m_alo = rate(K2KAtLeastOnce.name, w), rate(MirrorMaker2AtLeastOnce.name, w)
        if k_alo and m_alo:
            line = f"ratio vs MirrorMaker 2, {w}: at-least-once {k_alo / m_alo:.2f}"
            k_eos, m_eos = rate(K2KExactlyOnce.name, w), rate(MirrorMaker2ExactlyOnce.name, w)
            if k_eos and m_eos:
                line += f", exactly-once {k_eos / m_eos:.2f}"
            out.append(line)
    return out


def cpu_per_million(results: list[Result], name: str, base: str) -> list[str]:
    """CPU seconds per million records of ``name`` against ``base`` in each W1 workload
    (medians of complete runs): over the whole run, and inside the copy window only, which
    leaves out what starting and stopping cost once (for k2k, Spark's start-up)."""
    whole: dict[tuple[str, str], list[float]] = {}
    window: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.complete and r.workload.startswith("W1") and r.contender in (name, base):
            whole.setdefault((r.contender, r.workload), []).append(r.cpu_s / r.records * 1e6)
            if r.copy_cpu_s is not None:
                per_m = r.copy_cpu_s / r.records * 1e6
                window.setdefault((r.contender, r.workload), []).append(per_m)
    out = []
    for w in sorted({w for _, w in whole}):
        if (name, w) not in whole or (base, w) not in whole:
            continue
        parts = []
        for label, runs in (("whole run", whole), ("copy window", window)):
            if (name, w) in runs and (base, w) in runs:
                a, b = statistics.median(runs[(name, w)]), statistics.median(runs[(base, w)])
                parts.append(f"{label} {a:.2f} vs {b:.2f} ({a / b:.1f}x)")
        n = min(len(whole[(name, w)]), len(whole[(base, w)]))
        medians = f" (medians of {n} runs each)" if n > 1 else ""
        out.append(f"CPU s per million records, {name} vs {base}, {w}: {'; '.join(parts)}{medians}")
    return out


def machine() -> str:
    mem = psutil.virtual_memory().total / 2**30
    cpu = platform.processor() or platform.machine()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jvm = java.splitlines()[0] if java else "java ?"
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, {jvm}"
    )


@dataclass
class Env:
    source: str
    target: str
    tmp: Path
    broker_pids: tuple[int, ...] = ()  # embedded brokers only: their JIT time is reported
    keep_data: bool = False  # --keep-data: every copy's target topic stays

    @property
    def target_data(self) -> Path | None:
        """The embedded target broker's data directory (None for ``--clusters``)."""
        return self.tmp / "clusters" / "target" if self.broker_pids else None

    def scratch(self, run: str) -> Path:
        d = self.tmp / run
        d.mkdir(parents=True, exist_ok=True)
        return d


def run_workloads(
    args: argparse.Namespace, plan: Plan, chosen: list[Contender], env: Env, results: list[Result]
) -> None:
    """Warm up, then every backlog and steady run of ``plan`` (or W3's); each result is
    appended to ``results`` (and printed) as soon as it is known."""
    warm = Backlog("warmup", plan.warmup_records, 100)
    ends = preload(env.source, warm.topic, warm.records, warm.value_size)
    run_backlog(BareLoop(), warm, env, ends, args.timeout)  # unmeasured: JIT warm-up
    if plan.many is not None:
        run_w3(args, plan, chosen, env, results)  # its own warm-up round
        return
    # Before W1, each exactly-once contender's own warm-up copy (warm_up_round) warms the
    # transaction paths; without W1, nothing else does before the W2 warm-up.
    no_w1 = args.skip_backlog or not plan.backlog
    if no_w1 and any(c.guarantee == "exactly-once" for c in chosen):
        warm_transactions(env.target, TXN_WARMUP_S)
        # Unmeasured: large transactions over every partition, as exactly-once copies write.
        run_backlog(BareLoopTransactional(), warm, env, ends, args.timeout)
    for w in () if args.skip_backlog else plan.backlog:
        ends = preload(env.source, w.topic, w.records, w.value_size)
        warm_up = plan.warm_up_workload(w)
        warm_ends = (
            ends
            if warm_up == w
            else preload(env.source, warm_up.topic, warm_up.records, warm_up.value_size)
        )
        warm_up_round(chosen, warm_up, env, warm_ends, args.timeout)
        for c in backlog_order(chosen, plan.rounds):
            verified: list[Result] | None = [] if args.verify else None
            r = run_backlog(c, w, env, ends, args.timeout, verified)
            results.append(r)
            print(
                f"  {r.contender:32} {w.name:8} {r.rate:>10,.0f} records/s "
                f"{r.mbps:7.1f} MB/s  steal {_pct(r.steal_pct):>3} %  {_verdict(r, 'complete')}",
                flush=True,
            )
            for v in verified or ():
                results.append(v)
                print(
                    f"  {'then k2k verify':32} {w.name:8} {v.wall:>7.1f} s wall "
                    f"(the copy: {r.wall:.1f} s wall, {r.seconds:.1f} s copying)  "
                    f"CPU {v.cpu_s:.1f} s  steal {_pct(v.steal_pct):>3} %  "
                    f"{_verdict(v, 'all match')}",
                    flush=True,
                )
    steady = () if args.skip_steady else plan.steady
    if steady and any(c.steady_capable for c in chosen):
        warm_brokers_for_steady(env, steady[0], plan.steady_warmup_s)
    for s in steady:
        for c in chosen:
            if not c.steady_capable:
                continue
            r = run_steady(c, s, env)
            results.append(r)
            tails = (
                f"p99.9 {_ms(r.p999_ms):>6} ms  max {_ms(r.max_ms):>6} ms  "
                if s.new_topic_at_s is not None
                else ""
            )
            print(
                f"  {r.contender:32} {s.name:8} p50 {_ms(r.p50_ms):>6} ms  "
                f"p99 {_ms(r.p99_ms):>6} ms  {tails}brokers' JIT {_jit(r):>5} CPU s  "
                f"steal {_pct(r.steal_pct):>3} %  {_verdict(r, 'complete')}",
                flush=True,
            )
            if s.new_topic_at_s is not None:
                for line in per_10s_lines(r.per_10s_max_ms):
                    print(f"    {line}", flush=True)


def stop_brokers(pair: ClusterPair | None, tmp: Path, *, keep_data: bool, say: bool) -> None:
    """Stop the embedded pair (if this run started one) and delete its data unless
    ``keep_data``; ``say``: print what was stopped (a run that did not end normally)."""
    if pair is None:
        return
    described = [f"the {c.name} broker (pid {c.pid}, port {c.port})" for c in pair if c.pid]
    pair.stop()
    if not keep_data:
        # Before anything is printed: a run that ended because the disk filled up cannot
        # print, and must still give the space back.
        shutil.rmtree(tmp / "clusters", ignore_errors=True)
    if say and described:
        print(f"  stopped {' and '.join(described)}", flush=True)
    if say and not keep_data:
        print(f"  deleted the brokers' data in {tmp / 'clusters'}", flush=True)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    keys = [c.key for c in CONTENDERS]
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"W1 5M x 100 B, two rounds, by default for {','.join(QUICK_CONTENDERS)} only; "
        "with --skip-backlog one short W2 rate instead (a few minutes: "
        "docs/benchmarks.md#quick-mode)",
    )
    ap.add_argument(
        "--only",
        help=f"contenders, of {','.join(keys)} (default: all; with --quick: "
        f"{','.join(QUICK_CONTENDERS)})",
    )
    ap.add_argument("--skip-steady", action="store_true", help="only the W1 backlog runs")
    ap.add_argument("--skip-backlog", action="store_true", help="only the W2 steady runs")
    ap.add_argument("--timeout", type=float, default=900, help="per-run time limit in seconds")
    ap.add_argument(
        "--clusters",
        metavar="SOURCE,TARGET",
        help="use running clusters (bootstrap servers) instead of starting an embedded pair; "
        "loaded workload topics are reused",
    )
    ap.add_argument(
        "--client-nice",
        type=int,
        default=0,
        metavar="N",
        help="run the contenders and the harness's own clients at this niceness, so the "
        "embedded brokers (which in production have machines of their own) are served first "
        "on a small machine; default %(default)s, as the brokers (docs/benchmarks.md)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="W1 and W3: copy each workload N times per contender (W3: and N steady windows), "
        "in alternating order, and compare the median figures (one 1 KB copy lasts under "
        "10 s, and single runs swing by 20 %%); default 1, with --quick 2",
    )
    ap.add_argument(
        "--workloads",
        metavar="W1-100B,...",
        help="W1: only these backlog workloads (default: all of the plan's)",
    )
    ap.add_argument(
        "--records",
        type=int,
        metavar="N",
        help="W1: copy N records per workload instead of the plan's (trial runs; a short "
        "copy's figures are mostly start-up)",
    )
    ap.add_argument(
        "--verify",
        action="store_true",
        help="after each complete W1 copy by a k2k contender, time `k2k verify` on it and "
        "print it next to the copy (docs/benchmarks.md)",
    )
    ap.add_argument(
        "--keep-data",
        action="store_true",
        help="keep every W1 copy's target topic (deleted once checked, by default) and the "
        "embedded brokers' data (deleted once the brokers stop) in the scratch directory",
    )
    ap.add_argument(
        "--broker-heap",
        metavar="SIZE",
        help=f"the embedded brokers' heap (-Xmx), default {BROKER_HEAP}, with --w3 "
        f"{W3_BROKER_HEAP}: a 512 MB broker ran out of memory near 13,000 partitions",
    )
    w3 = ap.add_argument_group(
        "W3, many partitions (bench/w3.py)",
        "--w3 runs W3 instead of W1 and W2: a catch-up (--skip-steady: only it) and a steady "
        "window (--skip-backlog: only it), --rounds times each per contender, by default for "
        f"{','.join(QUICK_CONTENDERS)}",
    )
    w3.add_argument("--w3", action="store_true", help="run W3 instead of W1 and W2")
    shape = ManyTopics()
    for flag, value, text in (
        ("--w3-topics", shape.topics, "topics"),
        ("--w3-partitions", shape.partitions, "partitions per topic"),
        ("--w3-backlog", shape.per_partition, "catch-up records per partition"),
        ("--w3-rate", shape.rate, "steady records/s over all partitions"),
        ("--w3-seconds", shape.seconds, "the steady window, s"),
        ("--w3-warmup", shape.warmup_s, "the steady rate before the window, unmeasured, s"),
    ):
        w3.add_argument(flag, type=type(value), metavar="N", help=f"{text} (default {value:g})")
    long = ap.add_argument_group(
        "the long W2 (bench/long_w2.py)",
        "--long-w2 runs one long W2 window instead of W1 and W2, by default for "
        f"{','.join(LONG_CONTENDERS)}: p50/p99/p99.9/max and the per-10-s maxima, across "
        "k2k's lease boundaries and the discovery of a topic created mid-window",
    )
    long.add_argument("--long-w2", action="store_true", help="run the long W2 instead")
    long.add_argument(
        "--long-rate", type=int, default=5000, metavar="N", help="records/s (default %(default)s)"
    )
    long.add_argument(
        "--long-seconds",
        type=float,
        metavar="S",
        help="the window (default 3.4 lease durations: 17 minutes at k2k's default lease)",
    )
    long.add_argument(
        "--new-topic-at",
        type=float,
        metavar="S",
        help="when the new topic is created, s into the window (default two lease durations)",
    )
    long.add_argument(
        "--lease-duration",
        metavar="DURATION",
        help=f"k2k's spark.leaseDuration, e.g. '20 seconds' for a smoke run (default k2k's, "
        f"{_duration(DEFAULT_LEASE)}); any mode",
    )
    long.add_argument(
        "--discovery-interval",
        metavar="DURATION",
        help="k2k's replication source discoveryInterval, and in the long W2 also MirrorMaker "
        f"2's refresh.topics.interval.seconds (default k2k's, {_duration(DEFAULT_DISCOVERY)})",
    )
    return ap


def _duration(d: timedelta) -> str:
    """A duration as k2k writes one.

    >>> _duration(timedelta(minutes=5)), _duration(timedelta(seconds=30))
    ('5 minutes', '30 seconds')
    """
    seconds = d.total_seconds()
    return f"{seconds / 60:g} minutes" if seconds % 60 == 0 else f"{seconds:g} seconds"


def chosen_and_plan(
    ap: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[Contender], Plan]:
    """The contenders and the plan the arguments ask for (argument errors exit here)."""
    keys = [c.key for c in CONTENDERS]
    if args.rounds is not None and args.rounds < 1:
        ap.error(f"--rounds: expected a whole number of at least 1, got {args.rounds}")
    if args.records is not None and args.records < 1:
        ap.error(f"--records: expected a whole number of at least 1, got {args.records}")
    if args.w3 and args.long_w2:
        ap.error("--w3 and --long-w2: one at a time")
    if (args.w3 or args.long_w2) and (args.quick or args.workloads or args.records):
        ap.error("--w3 and --long-w2 take no --quick, --workloads or --records")
    for flag in ("lease_duration", "discovery_interval"):
        value = getattr(args, flag)
        if value is not None:
            try:
                parse_duration(value)
            except ValueError as exc:
                ap.error(f"--{flag.replace('_', '-')}: {exc}, got {value!r} (e.g. '20 seconds')")
    default = LONG_CONTENDERS if args.long_w2 else QUICK_CONTENDERS
    only = args.only or ",".join(default if args.quick or args.w3 or args.long_w2 else keys)
    wanted = [k.strip() for k in only.split(",") if k.strip()]
    unknown = sorted(set(wanted) - set(keys))
    if unknown:
        ap.error(f"--only: unknown contender(s) {', '.join(unknown)}; known: {', '.join(keys)}")
    chosen = [contender(cls, args) for cls in CONTENDERS if cls.key in wanted]
    unfit = [c.key for c in chosen if not c.prefix_capable]
    if unfit and (args.w3 or args.long_w2):
        ap.error(f"--only: {', '.join(unfit)} cannot copy many topics (--w3, --long-w2)")
    if args.w3:
        return chosen, w3_plan(ap, args)
    if args.long_w2:
        return chosen, long_w2_plan(ap, args)
    plan = QUICK if args.quick else FULL
    if args.rounds is not None:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.quick and not args.skip_backlog:
        plan = dataclasses.replace(plan, steady=())  # quick mode runs W1 or W2, not both
    if args.workloads:
        names = {w.strip() for w in args.workloads.split(",")}
        known = [w.name for w in plan.backlog]
        if names - set(known):
            ap.error(
                f"--workloads: unknown {', '.join(sorted(names - set(known)))}; known: {', '.join(known)}"
            )
        plan = dataclasses.replace(plan, backlog=tuple(w for w in plan.backlog if w.name in names))
    if args.records is not None:
        backlog = tuple(dataclasses.replace(w, records=args.records) for w in plan.backlog)
        plan = dataclasses.replace(plan, backlog=backlog)
    return chosen, plan


def contender(cls: type[Contender], args: argparse.Namespace) -> Contender:
    """A contender of ``cls`` with the settings the arguments ask for: k2k's lease and
    discovery; in the long W2, MirrorMaker 2's topic refresh at k2k's discovery interval."""
    if issubclass(cls, K2KAtLeastOnce):
        return cls(args.lease_duration, args.discovery_interval)
    if issubclass(cls, MirrorMaker2AtLeastOnce) and args.long_w2:
        discovery = DEFAULT_DISCOVERY
        if args.discovery_interval is not None:
            discovery = parse_duration(args.discovery_interval)
        return cls(max(1, round(discovery.total_seconds())))
    return cls()


def w3_plan(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    """The plan of ``--w3`` (argument errors exit here)."""
    given = {
        "topics": args.w3_topics,
        "partitions": args.w3_partitions,
        "per_partition": args.w3_backlog,
        "rate": args.w3_rate,
        "seconds": args.w3_seconds,
        "warmup_s": args.w3_warmup,
    }
    many = ManyTopics(**{k: v for k, v in given.items() if v is not None})
    if min(many.topics, many.partitions, many.per_partition, many.rate) < 1:
        ap.error(f"--w3-*: sizes and the rate must be at least 1, got {many}")
    return Plan((), (), QUICK.warmup_records, 0, rounds=args.rounds or 1, many=many)


def long_w2_plan(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    """The plan of ``--long-w2``: one window, its length and the new topic's time derived from
    k2k's lease duration unless given (argument errors exit here)."""
    lease = DEFAULT_LEASE if args.lease_duration is None else parse_duration(args.lease_duration)
    seconds = args.long_seconds or window_s(lease)
    at = new_topic_at_s(lease) if args.new_topic_at is None else args.new_topic_at
    if not 0 <= at < seconds:
        ap.error(f"--new-topic-at: must fall inside the {seconds:g} s window, got {at:g}")
    steady = Steady(args.long_rate, seconds, 15, new_topic_at_s=at)
    return Plan((), (steady,), QUICK.warmup_records, FULL.steady_warmup_s)


def embedded_pair(tmp: Path, heap: str = BROKER_HEAP) -> ClusterPair:
    """The source and target brokers, started here and owned by this process: a run killed
    outright takes them with it. Full JIT (the test default stops at C1 for faster
    start-up) and 1 GiB heaps (``--broker-heap``; 2 GiB for W3): production-like brokers,
    not test ones."""
    return start_pair(
        tmp / "clusters",
        free_port(),
        free_port(),
        heap=heap,
        jvm_options=(),
        owner_pid=os.getpid(),
        # A deleted copy's files go at once (see drop_topic), not a minute later.
        broker_overrides={"log.segment.delete.delay.ms": 0},
    )


def embedded_env(args: argparse.Namespace, pair: ClusterPair, tmp: Path) -> Env:
    """The run's view of ``pair``. Called once the brokers run: their threads keep
    niceness 0, while this process and everything it starts from here on (contenders,
    Spark, MirrorMaker 2) run at ``--client-nice``."""
    pids = tuple(pid for pid in (pair.source.pid, pair.target.pid) if pid is not None)
    os.nice(args.client_nice)
    print(f"clients run at niceness {args.client_nice}, the brokers at 0")
    return Env(pair.source.bootstrap, pair.target.bootstrap, tmp, pids, args.keep_data)


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    chosen, plan = chosen_and_plan(ap, args)
    print(f"machine: {machine()}", flush=True)
    for c in chosen:
        c.setup()
    tmp = Path(tempfile.mkdtemp(prefix="k2k-bench-"))
    print(
        f"scratch: {tmp} (contender logs; latency.jsonl: per-second latency maxima; the "
        "brokers' data is deleted at the end unless --keep-data)"
    )
    install_handlers()
    pair = None
    results: list[Result] = []
    ended = False
    try:
        if args.clusters:
            env = Env(*args.clusters.split(",", 1), tmp, keep_data=args.keep_data)
        else:
            heap = args.broker_heap or (W3_BROKER_HEAP if args.w3 else BROKER_HEAP)
            pair = embedded_pair(tmp, heap)
            env = embedded_env(args, pair, tmp)
        run_workloads(args, plan, chosen, env, results)
        ended = True
    finally:
        for readers in (_readers, _tail_readers):  # before the brokers go: no reconnect noise
            for reader in readers.values():
                reader.close()
            readers.clear()
        stop_brokers(pair, tmp, keep_data=args.keep_data, say=not ended)
        if not ended:
            for what in stop_strays():
                print(f"  stopped {what}", flush=True)
    print()
    print(table(results))
    tails = tails_table(results)
    if tails:
        print()
        print(tails)
    print()
    for line in ratios(results) + tail_ratios(results):
        print(line)


if __name__ == "__main__":
    try:
        main()
    except Interrupted as stopped:
        sys.exit(128 + stopped.signum)  # what a shell reports for a process a signal ended
