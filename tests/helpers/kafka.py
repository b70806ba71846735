"""Test helpers that talk to real Kafka brokers with real confluent-kafka clients.

Why helpers and not fixtures: integration tests compose them freely (create, produce, replicate,
read back, compare), and each helper waits for a *condition* (metadata shows leaders, the read
reached the end offset) rather than for a fixed time, so tests are fast when Kafka is fast and
still correct when it is slow.

Records read back are :class:`Rec` tuples so that tests can compare whole records (key, value,
headers, timestamp) and their offsets per partition, not just counts.
"""

from __future__ import annotations

import reprlib
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from k2k.kafka.faults import kafka_error_of

__all__ = [
    "Clusters",
    "Header",
    "ProducedRecord",
    "Rec",
    "create_topic",
    "end_offsets",
    "eventually",
    "list_topics",
    "produce",
    "produce_bulk",
    "produce_transaction",
    "read_all",
    "transactions_settled",
    "when_ready",
]

T = TypeVar("T")
Header = tuple[str, bytes | None]
ProducedRecord = tuple[
    int | None, bytes | str | None, bytes | str | None, Sequence[Header] | None, int | None
]
"""What :func:`produce` takes: (partition, key, value, headers, timestamp_ms).

``partition`` None lets the producer's partitioner choose; ``timestamp_ms`` None lets the
producer stamp the current time; ``headers`` None or [] sends none."""

Isolation = Literal["read_committed", "read_uncommitted"]
_ISOLATION = {
    "read_committed": IsolationLevel.READ_COMMITTED,
    "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
}
_UNSET: Any = object()


@dataclass(frozen=True)
class Clusters:
    """Bootstrap addresses of the two clusters the tests replicate between."""

    source: str
    target: str


class Rec(NamedTuple):
    """One record as read back; ``headers`` is always a list (None and [] both become [])."""

    key: bytes | None
    value: bytes | None
    headers: list[Header]
    timestamp: int
    offset: int

    @classmethod
    def make(
        cls,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] | None = None,
        timestamp: int = 0,
        offset: int = -1,
    ) -> Rec:
        """Build a record with headers normalised, e.g. for an expected value in a test."""
        return cls(key, value, [(k, v) for k, v in headers or ()], timestamp, offset)

    @classmethod
    def from_message(cls, message: Message) -> Rec:
        """Convert a consumed confluent-kafka message (timestamp in ms, whatever its type)."""
        return cls.make(
            message.key(),
            message.value(),
            message.headers(),
            message.timestamp()[1],
            message.offset(),
        )

    def content(self) -> tuple[bytes | None, bytes | None, list[Header], int]:
        """Everything but the offset: what must survive replication unchanged."""
        return self.key, self.value, self.headers, self.timestamp


# -- polling -------------------------------------------------------------------------------
#: Errors a fresh broker or partition answers with for a moment, flagged retriable or not (an
#: admin result does not always carry librdkafka's retriable flag).
_NOT_READY_YET = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)


def when_ready(fn: Callable[[], T], timeout: float = 30.0) -> T:
    """``fn()``, called again while it fails with a retriable Kafka error.

    A broker that has just started, or a topic just created, answers retriably for a moment
    (``COORDINATOR_LOAD_IN_PROGRESS`` while it loads ``__consumer_offsets``,
    ``NOT_LEADER_FOR_PARTITION`` before its metadata cache knows a new partition's leader);
    a test's own set-up and read-back wait that out instead of failing on it. Any other
    error propagates at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except KafkaException as exc:
            error = kafka_error_of(exc)
            ready_later = error is not None and (
                error.retriable() or error.code() in _NOT_READY_YET
            )
            if not ready_later or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


def eventually(
    fn: Callable[[], T],
    expected: Any = _UNSET,
    timeout: float = 30.0,
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``fn`` until it returns ``expected`` (or, without ``expected``, anything truthy).

    Returns the last value. Exceptions of the ``ignore`` types count as "not yet" (e.g. a topic
    the replicator has not created yet); others propagate at once.

    :raises AssertionError: on timeout, showing the expected and the last value seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: Any = fn()
        except ignore as exc:
            last = exc
        else:
            if (bool(last) if expected is _UNSET else last == expected) is True:
                return last  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            wanted = "a truthy value" if expected is _UNSET else _short(expected)
            raise AssertionError(
                f"not reached within {timeout:g} s: expected {wanted}, last seen {_short(last)}"
            )
        time.sleep(interval)  # the poll interval, not a guess at how long Kafka needs


def _short(value: object) -> str:
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = 300
    shortener.maxlist = shortener.maxdict = shortener.maxtuple = 20
    return shortener.repr(value)


# -- topics --------------------------------------------------------------------------------
def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def list_topics(bootstrap: str, timeout: float = 30.0) -> set[str]:
    """Names of all topics on the cluster, internal ones (``__consumer_offsets``) included."""
    return set(_admin(bootstrap).list_topics(timeout=timeout).topics)


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create a topic and return once metadata shows every partition with a leader.

    Waiting for leaders matters: a produce right after CreateTopics can otherwise fail with
    "unknown topic or partition" while the broker catches up. The replication factor is the
    cluster's default (1 on the embedded clusters).
    """
    admin = _admin(bootstrap)
    new = NewTopic(name, num_partitions=partitions, replication_factor=-1, config=config or {})
    admin.create_topics([new], request_timeout=timeout)[name].result()

    def partitions_with_leader() -> int:
        topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
        if topic is None or topic.error is not None:
            return 0
        return sum(1 for p in topic.partitions.values() if p.leader >= 0 and p.error is None)

    eventually(partitions_with_leader, expected=partitions, timeout=timeout)


#: What a topic seconds old may answer before its partitions have leaders.
_LEADERSHIP_PENDING = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.REPLICA_NOT_AVAILABLE,
    }
)


def end_offsets(
    bootstrap: str, topic: str, isolation: Isolation = "read_committed", timeout: float = 30.0
) -> dict[int, int]:
    """End offset of each partition: the LSO for read_committed, the high watermark otherwise.

    Under read_committed the end stops before the first record of any open transaction.
    A topic that does not exist has no partitions: ``{}`` (so pollers can wait for a topic that
    a replicator has yet to create). One that exists but whose leaders are not settled yet is
    asked again until ``timeout``.
    """
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(topic=topic, timeout=timeout).topics[topic]
        if metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return {}
        try:
            if metadata.error is not None:
                raise KafkaException(metadata.error)
            request = {TopicPartition(topic, p): OffsetSpec.latest() for p in metadata.partitions}
            futures = admin.list_offsets(
                request, isolation_level=_ISOLATION[isolation], request_timeout=timeout
            )
            return {tp.partition: future.result().offset for tp, future in futures.items()}
        except KafkaException as exc:
            # A topic the replicator has just created may not have its leaders yet
            # (pollers call this right then): asked again within ``timeout``.
            error = kafka_error_of(exc)
            code = error.code() if error is not None else None
            if code not in _LEADERSHIP_PENDING or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)  # leadership settles on the broker: poll again


# -- producing -----------------------------------------------------------------------------
def produce(
    bootstrap: str, topic: str, records: Iterable[ProducedRecord], **producer_conf: Any
) -> list[tuple[int, int]]:
    """Produce records, flush, and assert that every delivery succeeded.

    ``producer_conf`` adds or overrides librdkafka settings; as their names contain dots, pass
    them as ``**{"message.max.bytes": 2_000_000}``. The producer is idempotent, so per-partition
    order equals input order.

    :returns: (partition, offset) of each record, in input order.
    """
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5} | producer_conf
    )
    # Metadata first: an idempotent producer with no broker connection yet postpones getting
    # its producer id by 500 ms; with the connection up it takes a few ms.
    producer.list_topics(topic, timeout=30)
    return _send(producer, topic, records)


#: Below the brokers' transaction.max.timeout.ms (15 minutes by default).
OPEN_TRANSACTION_TIMEOUT_MS = 600_000


def produce_transaction(
    bootstrap: str,
    topic: str,
    records: Iterable[ProducedRecord],
    *,
    outcome: Literal["commit", "abort", "open"] = "commit",
    transactional_id: str | None = None,
    **producer_conf: Any,
) -> Producer:
    """Produce records in one transaction and commit it, abort it, or leave it open.

    ``open`` flushes the records (they are in the log, holding back the LSO) without ending the
    transaction; finish it later with the returned producer's ``commit_transaction()`` or
    ``abort_transaction()``. An open transaction gets a ten-minute ``transaction.timeout.ms``
    (unless one is given): with librdkafka's one minute, a slow machine could see the broker
    abort it (and fence its producer) while the test still relies on it being open.
    """
    defaults = {"transaction.timeout.ms": OPEN_TRANSACTION_TIMEOUT_MS} if outcome == "open" else {}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id or f"k2k-test-{uuid.uuid4().hex[:12]}",
            "linger.ms": 5,
        }
        | defaults
        | producer_conf
    )
    producer.list_topics(topic, timeout=30)  # metadata first avoids a slow init (field notes)
    producer.init_transactions(30)
    producer.begin_transaction()
    _send(producer, topic, records)
    if outcome == "commit":
        producer.commit_transaction(30)
    elif outcome == "abort":
        producer.abort_transaction(30)
    return producer


def _send(
    producer: Producer, topic: str, records: Iterable[ProducedRecord]
) -> list[tuple[int, int]]:
    delivered: list[tuple[int, int]] = []
    failures: list[str] = []

    def make_callback(index: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(f"record #{index}: {error}")
            else:
                delivered[index] = (message.partition(), message.offset())

        return on_delivery

    for index, (partition, key, value, headers, timestamp_ms) in enumerate(records):
        delivered.append((-1, -1))
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": make_callback(index)}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        _produce_with_backpressure(producer, topic, kwargs)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records still undelivered to {topic} after 60 s"
    assert not failures, f"deliveries to {topic} failed: {failures[:5]}"
    return delivered


def _produce_with_backpressure(producer: Producer, topic: str, kwargs: dict[str, Any]) -> None:
    """``produce`` that waits for room when the local queue is full instead of failing."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def produce_bulk(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: int,
    value_size: int = 100,
    **producer_conf: Any,
) -> dict[int, int]:
    """Produce ``n`` records fast, round-robin over ``partitions``; return the count per partition.

    Record ``i`` goes to partition ``i % partitions`` with key ``b"%010d" % i`` and a value of
    ``value_size`` bytes that starts with the same ten digits, so a reader can check order and
    completeness from the data itself. Only failed deliveries are reported back (speed).
    """
    failures: list[str] = []

    def on_error(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
        | producer_conf
    )
    producer.list_topics(topic, timeout=30)  # see produce(): avoids a 500 ms start-up stall
    filler = b"." * max(value_size - 10, 0)
    counts = dict.fromkeys(range(partitions), 0)
    for i in range(n):
        key = b"%010d" % i
        partition = i % partitions
        _produce_with_backpressure(
            producer,
            topic,
            {"key": key, "value": (key + filler)[:value_size], "partition": partition},
        )
        counts[partition] += 1
    remaining = producer.flush(120)
    assert remaining == 0, f"{remaining} records still undelivered to {topic} after 120 s"
    assert not failures, f"{len(failures)} deliveries to {topic} failed, first: {failures[0]}"
    return counts


# -- consuming -----------------------------------------------------------------------------
def transactions_settled(bootstrap: str, topics: Iterable[str], timeout: float = 30.0) -> None:
    """Wait until no transaction is open on ``topics``: each partition's LSO is its high
    watermark.

    ``commit_transaction`` returns once the coordinator has logged the commit; the markers
    that end the transaction on each partition follow asynchronously, and until they land a
    read_committed snapshot (:func:`read_all`) stops before the transaction's records.
    """
    for topic in topics:
        eventually(
            lambda t=topic: (
                end_offsets(bootstrap, t) == end_offsets(bootstrap, t, "read_uncommitted")
            ),
            timeout=timeout,
        )


def read_all(
    bootstrap: str, topic: str, isolation: Isolation = "read_committed", timeout: float = 60.0
) -> dict[int, list[Rec]]:
    """Read every partition from its beginning up to its end offset at the time of the call.

    The end is the LSO under read_committed and the high watermark otherwise (see
    :func:`end_offsets`); records appended after the call are not returned, so the result is a
    consistent snapshot. A partition is complete when the consumer's position reaches its end:
    under read_committed, transaction markers and aborted records occupy offsets that are never
    delivered, so completion is judged by offsets (including end-of-partition events), never by
    counting records or waiting for silence.

    :returns: partition -> records in offset order (every partition present, maybe empty;
        ``{}`` when the topic does not exist).
    :raises AssertionError: the end was not reached within ``timeout`` seconds.
    """
    ends = end_offsets(bootstrap, topic, isolation, timeout)
    records: dict[int, list[Rec]] = {p: [] for p in sorted(ends)}
    position = dict.fromkeys(ends, 0)
    pending = {p for p, end in ends.items() if end > 0}
    if not pending:
        return records
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"k2k-test-read-{uuid.uuid4().hex[:12]}",  # never joined or committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.queue.backoff.ms": 1,  # the 1000 ms default stalls once the queue is full
            # At the end of a partition the broker holds an empty fetch this long; the
            # end-of-partition event that completes the read waits for that answer.
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.list_topics(topic, timeout=timeout)  # connect before assigning: no slow start
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        last_error: KafkaError | None = None
        while pending:
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"read_all({topic!r}, {isolation}) did not reach the end offsets within "
                    f"{timeout:g} s: positions {position}, ends {ends}, last error {last_error}"
                )
            # Ask for what remains (records plus one end-of-partition event each): consume()
            # returns early only when it has that many, so a larger ask would wait it out.
            wanted = sum(ends[p] - position[p] for p in pending) + len(pending)
            for message in consumer.consume(num_messages=min(wanted, 10_000), timeout=0.1):
                partition = message.partition()
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    if error.fatal():
                        raise KafkaException(error)
                    last_error = error  # transient (e.g. a dropped connection): the client retries
                    continue
                if error is None and message.offset() < ends[partition]:
                    records[partition].append(Rec.from_message(message))
                # Data message: the next position is offset + 1; EOF event: offset is the end.
                reached = message.offset() + (1 if error is None else 0)
                position[partition] = max(position[partition], reached)
                if position[partition] >= ends[partition]:
                    pending.discard(partition)
    finally:
        consumer.close()
    return records
