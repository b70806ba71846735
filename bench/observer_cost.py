"""What the per-run observer hook costs the copy loop.

One runner (``k2k.pipeline.task.runner.Runner``, in-process, no Spark) copies a backlog of
``--records`` x 100 B from an 8-partition source topic into a fresh target topic, in both
delivery modes, with no observer (the fast path), with an observer that only counts the
runs it is told about (every run then carries callbacks on its first and last record), and
with offset mappings (``MappingPublisher``: one mapping record per run). Rounds alternate
the order; the summary compares medians.

    .venv/bin/python -m bench.observer_cost [--records 2000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import preload
from k2k.kafka.factory import consumer_settings, producer_settings
from k2k.local import free_port, start_pair
from k2k.pipeline.plan import (
    ClientSpec,
    CommitSpec,
    ControlTopicSpec,
    LeaseSpec,
    PartitionRange,
    PolicySpec,
    RunnerGroup,
)
from k2k.pipeline.task.mappings import MappingPublisher
from k2k.pipeline.task.observe import ProducedRun
from k2k.pipeline.task.runner import Runner
from k2k.stages import SourcePartition, TopicPlan

PARTITIONS = 8


class CountingObserver:
    """The cheapest real observer: it counts runs and records."""

    def __init__(self) -> None:
        self.runs = 0
        self.records = 0

    def on_run(self, run: ProducedRun) -> None:
        self.runs += 1
        self.records += run.count


def _create(bootstrap: str, *topics: tuple[str, int, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, parts, 1, config=config) for name, parts, config in topics]
    for future in admin.create_topics(new).values():
        future.result()
    # A new topic's leaders settle asynchronously: ask each partition's leader for its
    # offsets until it answers (the runner reads the progress topic at once).
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "observer-cost"})
    try:
        for name, parts, _ in topics:
            for partition in range(parts):
                _eventually_answered(reader, TopicPartition(name, partition))
    finally:
        reader.close()


def _eventually_answered(reader: Consumer, tp: TopicPartition) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            reader.get_watermark_offsets(tp, timeout=5)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # poll interval while leadership settles


OBSERVERS = ("none", "counting", "mappings")


def runner_spec(
    name: str,
    source: str,
    target: str,
    routes: dict[str, str],
    *,
    eos: bool,
    batch_size: int,
    batch_timeout_s: float,
) -> LeaseSpec:
    """The lease spec of one in-process runner copying ``routes`` (source -> target topic)
    with ``partition: source``; progress in ``<name>-progress``."""
    return LeaseSpec(
        lease_id=1,
        topics={s: TopicPlan(s, t, SourcePartition(), True, True, None) for s, t in routes.items()},
        topic_ids={},
        lease_s=600,
        control=None,
        observer=None,
        telemetry=False,
        clients=ClientSpec(
            source_consumer=consumer_settings({"bootstrap.servers": source}, name),
            target_producer=producer_settings(
                {"bootstrap.servers": target}, False, exactly_once=eos
            ),
            control_consumer={"bootstrap.servers": target},
            statistics_interval_ms=None,
        ),
        # The delivery timeout and policies a pipeline has when it sets none.
        commit=CommitSpec(
            exactly_once=eos,
            batch_size=batch_size,
            batch_timeout_s=batch_timeout_s,
            ack_timeout_s=300.0,
        ),
        control_topics=ControlTopicSpec(
            pipeline=name,
            member="",
            commit_group=name,
            commit_topic=f"{name}-progress",
            commit_partitions=1,
            assignment_topic="",
            assignment_partitions=1,
            sync_timeout_s=30.0,
        ),
        policies=PolicySpec(
            on_sync_timeout="fail",
            on_bad_record="fail",
            on_records_lost="fail",
            on_foreign_writes="warn",
        ),
    )


def copy_once(
    source: str, target: str, topic: str, records: int, eos: bool, observe: str
) -> tuple[float, float]:
    """One runner copies the whole topic; returns records/s over the runner's lifetime and
    CPU µs per record."""
    name = f"obs-{uuid.uuid4().hex[:8]}"
    _create(
        target,
        (name, PARTITIONS, {}),
        (f"{name}-progress", 1, {"cleanup.policy": "compact"}),
        (f"{name}-maps", 1, {"cleanup.policy": "delete"}),
    )
    counter = CountingObserver()
    observer: Any = None
    if observe == "counting":
        observer = lambda strategy: counter  # noqa: E731 - a picklable-enough test double
    elif observe == "mappings":
        observer = MappingPublisher(name, f"{name}-maps", 1)
    spec = runner_spec(
        name, source, target, {topic: name}, eos=eos, batch_size=1000, batch_timeout_s=2.0
    )
    spec = dataclasses.replace(spec, observer=observer)
    per_partition = records // PARTITIONS
    ranges = tuple(PartitionRange(topic, p, 0, per_partition, False) for p in range(PARTITIONS))
    group = RunnerGroup(0, ranges, transactional_id=f"{name}-txn" if eos else None)
    started, cpu_started = time.monotonic(), time.process_time()
    summary = Runner(spec, group).run()
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    if summary.error or summary.records != records:
        raise SystemExit(f"copy failed: {summary.error or summary.records}")
    if observe == "mappings":
        reader = Consumer({"bootstrap.servers": target, "group.id": "observer-cost"})
        runs = reader.get_watermark_offsets(TopicPartition(f"{name}-maps", 0), timeout=10)[1]
        reader.close()
        print(f"  {runs:,} mapping records: {records / max(1, runs):,.0f} records per run")
    if observe == "counting" and counter.records != records:
        raise SystemExit(f"observer saw {counter.records} of {records} records")
    return records / elapsed, cpu / records * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    records = args.records // PARTITIONS * PARTITIONS
    root = tempfile.mkdtemp(prefix="k2k-observer-cost-")
    pair = start_pair(root, free_port(), free_port())
    source, target = pair.source.bootstrap, pair.target.bootstrap
    cases = [(eos, observe) for eos in (False, True) for observe in OBSERVERS]
    rates: dict[tuple[bool, str], list[tuple[float, float]]] = {case: [] for case in cases}
    try:
        preload(source, "backlog", records, 100)
        copy_once(source, target, "backlog", records, False, "none")  # warm-up, not counted
        for round_ in range(args.rounds):
            for case in cases if round_ % 2 == 0 else cases[::-1]:
                rate, cpu_us = copy_once(source, target, "backlog", records, *case)
                rates[case].append((rate, cpu_us))
                print(
                    f"round {round_ + 1} {_label(*case)}: {rate:,.0f} records/s, {cpu_us:.2f} µs CPU/record"
                )
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)
    for eos in (False, True):
        plain = [statistics.median(x[i] for x in rates[(eos, "none")]) for i in (0, 1)]
        for observe in OBSERVERS[1:]:
            seen = [statistics.median(x[i] for x in rates[(eos, observe)]) for i in (0, 1)]
            print(
                f"{'exactly-once' if eos else 'at-least-once'}: {plain[0]:,.0f} records/s, "
                f"{plain[1]:.2f} µs CPU/record without; {seen[0]:,.0f} records/s "
                f"({seen[0] / plain[0]:.0%}), {seen[1]:.2f} µs with {observe} (CPU "
                f"{seen[1] / plain[1] - 1:+.1%}, medians of {args.rounds})"
            )


def _label(eos: bool, observe: str) -> str:
    return f"{'exactly-once' if eos else 'at-least-once'}, observer: {observe}"


if __name__ == "__main__":
    main()
