"""The ceilings: what the hardware and the client libraries allow, with no replicator logic.

* :class:`BareLoop` — two bare librdkafka consume→produce processes (one per core), the same
  client settings as a k2k runner, no stages, no progress records, no Spark. The ceiling for
  k2k's design.
* :class:`BareLoopTransactional` — the same loops through one transactional producer that
  commits in line every 100 ms or 40,000 records: in W2 the latency floor of exactly-once
  with 100 ms batches on these brokers (the harness also runs it, unmeasured, to warm the
  brokers up before the W2 windows); in W1 what transactions of k2k's default size cost.
* :class:`ProducerPerfTool` — Kafka's own ``ProducerPerformance`` (kafka-producer-perf-test,
  from the same jars as the brokers) writing the same number and size of records into the
  target. It reads nothing, so it is the ceiling of the target side alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from bench.bare_loop import write_plan
from bench.contender import Contender, Ctx, create_topic
from bench.topics import create_topics
from k2k.config.coordination import EXACTLY_ONCE_BATCH_SIZE
from k2k.local.install import ensure_kafka_installed, find_java

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["BareLoop", "BareLoopTransactional", "ProducerPerfTool"]


class BareLoop(Contender):
    """Two processes, every other partition each. Many topics (``ctx.prefix``): the target
    topics are created first, in batches, then every other (topic, partition) each; no topic
    discovery (it copies ``ctx.topics``)."""

    key = "bare"
    name = "bare librdkafka loop"
    exits_when_done = True
    prefix_capable = True

    def start(self, ctx: Ctx) -> None:
        if ctx.prefix:
            self.start_many(ctx)
            return
        create_topic(ctx.target, ctx.dest, ctx.partitions)
        for share in (range(0, ctx.partitions, 2), range(1, ctx.partitions, 2)):
            parts = list(share)
            argv = [
                sys.executable,
                "-m",
                "bench.bare_loop",
                *ctx.copy_args(),
                "--partitions",
                ",".join(map(str, parts)),
            ]
            if not ctx.steady:
                argv += ["--ends", ",".join(str(ctx.ends[p]) for p in parts)]
            ctx.procs.append(subprocess.Popen(argv + self.extra_args(), cwd=ROOT))

    def start_many(self, ctx: Ctx) -> None:
        dests = [self.dest_topic(t, ctx.run) for t in ctx.topics]
        create_topics(ctx.target, dests, ctx.partitions)
        rows = [
            (t, d, p, None if ctx.steady else ctx.topic_ends[(t, p)])
            for t, d in zip(ctx.topics, dests, strict=True)
            for p in range(ctx.partitions)
        ]
        ctx.tmp.mkdir(parents=True, exist_ok=True)
        for i in range(2):
            plan = ctx.tmp / f"bare-{ctx.run}-{i}.json"
            write_plan(plan, rows[i::2])
            argv = [sys.executable, "-m", "bench.bare_loop", "--source", ctx.source]
            argv += ["--target", ctx.target, "--plan", str(plan)]
            ctx.procs.append(subprocess.Popen(argv + self.extra_args(), cwd=ROOT))

    def extra_args(self) -> list[str]:
        return []


class BareLoopTransactional(BareLoop):
    key = "bare-eos"
    name = "bare loop, transactions"
    guarantee = "exactly-once"
    COMMIT_MS: ClassVar[int] = 100
    #: k2k's default transaction in W1: exactly-once's default ``batchSize`` for each of the
    #: four partitions a runner copies.
    COMMIT_RECORDS: ClassVar[int] = EXACTLY_ONCE_BATCH_SIZE * 4

    def extra_args(self) -> list[str]:
        return ["--commit-ms", str(self.COMMIT_MS), "--commit-records", str(self.COMMIT_RECORDS)]


class ProducerPerfTool(Contender):
    key = "perf-tool"
    name = "kafka-producer-perf-test"
    exits_when_done = True
    exact = False
    steady_capable = False
    #: The producer settings k2k's runners use (acks=all with idempotence, 5 ms linger,
    #: 1 MB batches), so the ceiling is for the same durability.
    PRODUCER_PROPS: ClassVar[tuple[str, ...]] = (
        "acks=all",
        "enable.idempotence=true",
        "linger.ms=5",
        "batch.size=1000000",
        "max.request.size=16777216",
        "buffer.memory=268435456",
    )

    def setup(self) -> None:
        self.libs = ensure_kafka_installed()
        self.java = find_java()

    def start(self, ctx: Ctx) -> None:
        create_topic(ctx.target, ctx.dest, ctx.partitions)
        with open(ctx.tmp / f"{ctx.dest}.log", "w") as log:
            ctx.procs.append(
                subprocess.Popen(
                    [
                        self.java,
                        "-Xmx512m",
                        "-cp",
                        f"{self.libs}/*",
                        "org.apache.kafka.tools.ProducerPerformance",
                        "--topic",
                        ctx.dest,
                        "--num-records",
                        str(ctx.records),
                        "--record-size",
                        str(ctx.value_size),
                        "--throughput",
                        "-1",
                        "--producer-props",
                        f"bootstrap.servers={ctx.target}",
                        *self.PRODUCER_PROPS,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
