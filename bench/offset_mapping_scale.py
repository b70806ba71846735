"""How long one pass of the Offset Mapping app takes over many groups.

A 24-partition source topic is replicated exactly-once with offset mappings by one runner
(in-process, no Spark); ``--groups`` consumer groups then commit random positions on every
partition of the source, and the app (``k2k.offsetmapping.app.OffsetMappingApp``) runs
passes: the first commits every group on the target, the next ones find nothing changed,
and after the groups move, one commits them all again. Figures are printed per pass.

    .venv/bin/python -m bench.offset_mapping_scale [--groups 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import statistics
import tempfile
import time

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.observer_cost import _create, runner_spec
from k2k.config.loader import build_offset_mapping_app
from k2k.local import free_port, start_pair
from k2k.offsetmapping.app import OffsetMappingApp
from k2k.pipeline.plan import PartitionRange, RunnerGroup
from k2k.pipeline.task.mappings import MappingPublisher
from k2k.pipeline.task.runner import Runner

PARTITIONS = 24
MAPPING_PARTITIONS = 6


def preload(source: str, topic: str, records: int) -> None:
    """``records`` x 100 B spread evenly over the partitions, a few hundred per produce
    burst so the runner copies them in many runs."""
    _create(source, (topic, PARTITIONS, {}))
    producer = Producer({"bootstrap.servers": source, "linger.ms": 20})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, b"v" * 100, b"k%d" % i, i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60):
        raise SystemExit("preload: records not acknowledged")


def replicate(source: str, target: str, topic: str, records: int) -> None:
    name = "om-scale"
    _create(
        target,
        (topic, PARTITIONS, {}),
        (f"{name}-progress", 1, {"cleanup.policy": "compact"}),
        ("__k2k_offset_mappings", MAPPING_PARTITIONS, {"cleanup.policy": "delete"}),
    )
    spec = runner_spec(
        name, source, target, {topic: topic}, eos=True, batch_size=200, batch_timeout_s=1.0
    )
    spec = dataclasses.replace(
        spec, observer=MappingPublisher(name, "__k2k_offset_mappings", MAPPING_PARTITIONS)
    )
    per = records // PARTITIONS
    ranges = tuple(PartitionRange(topic, p, 0, per, False) for p in range(PARTITIONS))
    summary = Runner(spec, RunnerGroup(0, ranges, transactional_id=f"{name}-txn")).run()
    if summary.error:
        raise SystemExit(f"replication failed: {summary.error}")


def commit_groups(source: str, topic: str, groups: list[str], end: int, seed: int) -> None:
    """Every group stops at a random position on every partition (as its application would
    commit; the app itself never writes to the source)."""
    rng = random.Random(seed)
    admin = AdminClient({"bootstrap.servers": source})
    futures = [
        admin.alter_consumer_group_offsets(
            [
                ConsumerGroupTopicPartitions(
                    g, [TopicPartition(topic, p, rng.randrange(end + 1)) for p in range(PARTITIONS)]
                )
            ]
        )[g]
        for g in groups
    ]
    for future in futures:
        future.result()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--records", type=int, default=240_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="k2k-om-scale-")
    pair = start_pair(root, free_port(), free_port())
    source, target = pair.source.bootstrap, pair.target.bootstrap
    topic = "orders"
    groups = [f"app-{i:03d}" for i in range(args.groups)]
    timings: dict[str, list[float]] = {"commit all": [], "unchanged": []}
    try:
        preload(source, topic, args.records)
        replicate(source, target, topic, args.records)
        cfg = build_offset_mapping_app(
            {
                "name": "om-scale-app",
                "source": {"kafka": {"common": {"bootstrap.servers": source}}},
                "target": {"kafka": {"common": {"bootstrap.servers": target}}},
                "groups": {"consumerGroups": "app-.*"},
            }
        )
        app = OffsetMappingApp(cfg)
        app._prepare()  # the mapping topic, and the store reading it
        try:
            for round_ in range(args.rounds):
                commit_groups(source, topic, groups, args.records // PARTITIONS, seed=round_)
                first = app.one_pass()
                again = app.one_pass()
                timings["commit all"].append(first.seconds)
                timings["unchanged"].append(again.seconds)
                print(f"round {round_ + 1}: {first.line()}")
                print(f"round {round_ + 1}: {again.line()}")
        finally:
            app.close()
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)
    for what, seconds in timings.items():
        print(
            f"{args.groups} groups x {PARTITIONS} partitions, pass that finds {what}: "
            f"median {statistics.median(seconds):.2f} s of {args.rounds} rounds"
        )


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
