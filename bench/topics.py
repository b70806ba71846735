"""Admin work on many topics at once, for the many-partition workloads (W3).

One request per topic made set-up the slowest part of a 1,000-topic run (issue 47: 62 s to
create 1,000 target topics one at a time, under a second in batches), so the harness and the
bare loop create, delete and read the end offsets of many topics per request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

__all__ = [
    "ADMIN_BATCH",
    "batches",
    "create_topics",
    "delete_topics",
    "end_offsets_many",
    "wait_until_visible",
]

#: Topics per CreateTopics / DeleteTopics request: 1,000 topics x 8 partitions in one
#: request is within what a single controller takes, but a smaller request lets a failure
#: name fewer topics and keeps each request under the default 30 s request timeout on a
#: busy 2-core host.
ADMIN_BATCH = 250


class Admin(Protocol):
    """The part of :class:`confluent_kafka.admin.AdminClient` used here (tests pass a fake)."""

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Any]: ...

    def delete_topics(self, topics: list[str], **kwargs: Any) -> dict[str, Any]: ...

    def list_topics(self, *args: Any, **kwargs: Any) -> Any: ...


def batches(items: Sequence[str], size: int) -> Iterator[list[str]]:
    """``items`` in order, ``size`` at a time (the last batch may be shorter).

    >>> list(batches(["a", "b", "c"], 2))
    [['a', 'b'], ['c']]
    """
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def create_topics(
    admin: Admin | str,
    names: Sequence[str],
    partitions: int,
    batch: int = ADMIN_BATCH,
    timeout_s: float | None = None,
) -> None:
    """Create ``names`` (replication factor 1), ``batch`` topics per request; a topic that
    already exists is fine. Returns once every topic's metadata shows ``partitions``
    partitions with a leader (:func:`wait_until_visible`), within ``timeout_s`` (None: 2
    minutes plus 50 ms per partition: the broker creates each partition's files, and on a
    busy 2-core host the last of 1,000 topics x 8 partitions was not visible 2 minutes after
    the CreateTopics requests had been acknowledged).

    :param admin: an admin client, or the cluster's bootstrap servers.
    :raises RuntimeError: a creation failed for another reason, or the topics did not become
        visible within ``timeout_s``.
    """
    client = AdminClient({"bootstrap.servers": admin}) if isinstance(admin, str) else admin
    for names_batch in batches(names, batch):
        new = [NewTopic(name, partitions, 1) for name in names_batch]
        futures = client.create_topics(new, operation_timeout=60, request_timeout=90)
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise RuntimeError(f"could not create {name}: {exc.args[0].str()}") from exc
    if timeout_s is None:
        timeout_s = 120 + 0.05 * len(names) * partitions
    wait_until_visible(client, names, partitions, timeout_s)


def wait_until_visible(
    admin: Admin, names: Sequence[str], partitions: int, timeout_s: float
) -> None:
    """Poll the cluster's metadata (one request for all topics) until each of ``names`` has
    ``partitions`` partitions, each with a leader.

    :raises RuntimeError: some are not visible after ``timeout_s``; the message names how many
        and the first of them.
    """
    deadline = time.monotonic() + timeout_s
    missing = list(names)
    while True:
        topics = admin.list_topics(timeout=30).topics
        missing = [name for name in names if not _ready(topics.get(name), partitions)]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the controller is still propagating: poll again
    if missing:
        raise RuntimeError(
            f"{len(missing)} of {len(names)} topics (first: {missing[0]}) not visible with "
            f"{partitions} partitions after {timeout_s:.0f} s"
        )


def _ready(md: Any, partitions: int) -> bool:
    if md is None or md.error is not None or len(md.partitions) != partitions:
        return False
    return all(p.leader >= 0 and p.error is None for p in md.partitions.values())


def delete_topics(admin: Admin | str, names: Sequence[str], batch: int = ADMIN_BATCH) -> list[str]:
    """Delete ``names``, ``batch`` topics per request; a topic that does not exist is fine.

    :returns: a line per topic that could not be deleted for another reason (the run goes on:
        its scratch data is deleted with the brokers).
    """
    client = AdminClient({"bootstrap.servers": admin}) if isinstance(admin, str) else admin
    problems = []
    for names_batch in batches(names, batch):
        futures = client.delete_topics(names_batch, operation_timeout=60, request_timeout=90)
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    problems.append(f"could not delete {name}: {exc.args[0].str()}")
    return problems


def end_offsets_many(
    admin: AdminClient, names: Sequence[str], partitions: int
) -> dict[tuple[str, int], int]:
    """High watermarks of every partition of ``names`` in one ListOffsets request per leader;
    a partition whose topic does not exist (yet) or has no leader is left out.

    The cluster's metadata is read first: the admin client's cache kept missing topics
    created after its first ListOffsets for minutes (a readiness poll saw 12 of 80 target
    partitions filled while all 80 were), and topics that do not exist yet are not asked for.
    """
    topics = admin.list_topics(timeout=30).topics
    query = {
        TopicPartition(t, p): OffsetSpec.latest()
        for t in names
        if _ready(topics.get(t), partitions)
        for p in range(partitions)
    }
    if not query:
        return {}
    out = {}
    for tp, future in admin.list_offsets(query, request_timeout=30).items():
        try:
            out[(tp.topic, tp.partition)] = future.result().offset
        except KafkaException:
            continue  # not there yet: the caller polls again
    return out


def bulk_producer(bootstrap: str) -> Producer:
    """An idempotent producer for loading backlogs: large batches, a deep queue."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
