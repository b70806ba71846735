"""Consumer groups in failover drills: positions committed on the source, and what a group
reads on the target from its translated commit."""

from __future__ import annotations

import random
from collections.abc import Callable

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers.kafka import Rec, read_all

__all__ = ["commit_random_positions", "failover_reads", "target_commits"]


def commit_random_positions(
    bootstrap: str,
    groups: list[str],
    topics: list[str],
    seed: int,
    fixed: dict[tuple[str, int], int] | None = None,
):
    """Each group stops somewhere on every partition: the start, the end, inside a gap, or
    at random; the first group at ``fixed`` positions when given. Returns group ->
    (topic, partition) -> committed offset."""
    rng = random.Random(seed)
    recs = {t: read_all(bootstrap, t) for t in topics}
    out: dict[str, dict[tuple[str, int], int]] = {}
    for i, group in enumerate(groups):
        positions = {}
        for t in topics:
            for p, rs in recs[t].items():
                present = {r.offset for r in rs}
                end = rs[-1].offset + 1 if rs else 0
                gaps = [o for o in range(end) if o not in present]
                choices = [0, end, rng.randrange(end + 1)]
                if gaps:
                    choices.append(rng.choice(gaps))
                positions[(t, p)] = (
                    choices[(i + p) % len(choices)] if i < 2 else rng.choice(choices)
                )
        if fixed and i == 0:
            positions.update(fixed)
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()],
                asynchronous=False,
            )
        finally:
            consumer.close()
        out[group] = positions
    return out


def target_commits(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.result().topic_partitions
        if tp.offset >= 0
    }


def failover_reads(
    clusters, group, positions, rename, copy: Callable[[Rec], Rec | None] | None = None
) -> tuple[int, int, int]:
    """For every source partition the group had a position on: the records the group reads
    on the target from its translated commit, against those it had not read on the source
    (``copy``: what the pipeline makes of a source record, None when it drops it).
    Returns (expected records, skipped, read again)."""
    commits = target_commits(clusters.target, group)
    expected_total = skipped = again = 0
    by_topic: dict[str, dict[int, list[Rec]]] = {}
    for (topic, part), position in sorted(positions.items()):
        src = by_topic.setdefault(topic, read_all(clusters.source, topic))
        target_topic = rename(topic)
        dst = by_topic.setdefault(f"dst:{target_topic}", read_all(clusters.target, target_topic))
        assert (target_topic, part) in commits, f"{group}: no commit for {target_topic}[{part}]"
        unread = [r for r in src[part] if r.offset >= position]
        copies = unread if copy is None else [c for r in unread if (c := copy(r)) is not None]
        expected = [r.value for r in copies]
        got = [r.value for r in dst[part] if r.offset >= commits[(target_topic, part)]]
        expected_total += len(expected)
        missing = set(expected) - set(got)
        skipped += len(missing)
        again += len(got) - len(expected) + len(missing)
    return expected_total, skipped, again
