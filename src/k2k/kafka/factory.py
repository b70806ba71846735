"""Builds every librdkafka client k2k uses, from already-translated client properties.

Two layers of settings meet here: *defaults* tuned for replication, which the user's
properties override, and *forced* settings the replicator's guarantees depend on, which the
user cannot override (the config model already refuses them with a reason). The
measurements behind the defaults are in docs/benchmarks.md#client-settings. Clients are not
picklable: runners build theirs inside the Spark task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from k2k.kafka.clientlog import CLIENT_LOG

__all__ = [
    "ADMIN_DEFAULTS",
    "CONSUMER_DEFAULTS",
    "FETCH_QUEUE_BACKOFF",
    "JAVA_PARTITIONER",
    "PRODUCER_DEFAULTS",
    "READY_TIMEOUT_S",
    "TRANSACTIONAL_DEFAULTS",
    "ErrorCallback",
    "StatsCallback",
    "admin_settings",
    "build_admin",
    "build_consumer",
    "build_producer",
    "consumer_settings",
    "delivery_timeout_s",
    "producer_settings",
    "ready",
]

#: Fetching resumes within a millisecond once the local queue drains below its thresholds:
#: librdkafka's default postpones the next fetch by 1 s each time the queue is over them,
#: which stalls every read of more records than the queue holds (a control topic's catch-up).
#: A reader that leaves a full queue unread for long (a checkpoint pass's tail between
#: passes) only re-checks it more often: a timer in librdkafka's thread, no fetch.
FETCH_QUEUE_BACKOFF: dict[str, str] = {"fetch.queue.backoff.ms": "1"}

#: Source consumer defaults. Fetching resumes as the queue drains (:data:`FETCH_QUEUE_BACKOFF`);
#: the queue is sized per process because every concurrent runner task is its own Python
#: process. Fetches are batched (``fetch.min.bytes``, ``fetch.wait.max.ms``): librdkafka
#: fetches again as soon as an answer arrives, so a source written in small bursts would be
#: fetched a few records at a time, costing CPU and latency (docs/benchmarks.md#client-settings).
CONSUMER_DEFAULTS: dict[str, str] = {
    "isolation.level": "read_committed",
    **FETCH_QUEUE_BACKOFF,
    "queued.max.messages.kbytes": "32768",
    "fetch.min.bytes": "65536",
    "fetch.wait.max.ms": "25",
    "socket.nagle.disable": "true",
}

#: Consumer settings the at-least-once contract depends on. k2k never commits offsets to
#: the source cluster (it may be read-only); it needs EOF events to find range ends; and a
#: runner must never silently jump over records: the planner resolves start offsets
#: (``auto.offset.reset``) itself, so inside a runner an out-of-range position is an error
#: (records deleted by retention before they were replicated), not a reset.
CONSUMER_FORCED: dict[str, str] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "true",
    "auto.offset.reset": "error",
}

#: librdkafka's partitioner that places keyed records as the Java producer's default
#: partitioner does (Kafka's murmur2 of the key, :mod:`k2k.kafka.murmur2`).
JAVA_PARTITIONER = "murmur2_random"

#: Target producer defaults: ordered, durable and batched. Idempotence keeps per-partition
#: order across retries; ``message.max.bytes`` is raised so the broker, not the client,
#: decides what is too large (its limit is per topic).
PRODUCER_DEFAULTS: dict[str, str] = {
    "linger.ms": "5",
    "batch.size": "1000000",
    "batch.num.messages": "100000",
    "queue.buffering.max.messages": "500000",
    "queue.buffering.max.kbytes": "262144",
    "message.max.bytes": "16777216",
    "socket.nagle.disable": "true",
}


#: k2k creates target topics itself; a write must never make the broker create one (with
#: its defaults, or again after the topic was deleted: docs/operations.md#topic-lifecycle).
_NO_TOPIC_CREATION = {"allow.auto.create.topics": "false"}

#: Producer settings the at-least-once contract depends on (the config model refuses
#: other values of the first two with the reason): durable acknowledgements and
#: retry-safe ordering. The last two make one acknowledgement cover every earlier record of
#: the same target partition, which lets a runner ask for one delivery report per partition
#: run instead of one per record (see ``k2k.pipeline.task.copier``): a failure that would leave
#: a gap before a later, acknowledged record becomes a fatal producer error instead, and
#: records never expire locally (librdkafka's gapless guarantee does not cover local
#: expiry). The runner enforces the user's ``message.timeout.ms`` itself, on whole commit
#: batches, failing the lease without committing them.
PRODUCER_FORCED: dict[str, str] = {
    "acks": "all",
    "enable.idempotence": "true",
    "enable.gapless.guarantee": "true",
    # The largest value (24.8 days), not 0 ("infinite"): with 0, librdkafka sends late
    # (docs/benchmarks.md#client-settings).
    "message.timeout.ms": "2147483647",
    **_NO_TOPIC_CREATION,
}

#: librdkafka's default ``message.timeout.ms`` (Java: ``delivery.timeout.ms``).
DEFAULT_DELIVERY_TIMEOUT_MS = 300_000


def consumer_settings(props: Mapping[str, str], group_id: str) -> dict[str, str]:
    """The effective source-consumer properties: defaults < user properties < forced."""
    conf = {**CONSUMER_DEFAULTS, "group.id": group_id, **props, **CONSUMER_FORCED}
    return conf


def delivery_timeout_s(props: Mapping[str, str]) -> float:
    """The user's delivery timeout in seconds (``message.timeout.ms``; 0 means none)."""
    ms = int(props.get("message.timeout.ms", DEFAULT_DELIVERY_TIMEOUT_MS))
    return ms / 1000 if ms > 0 else float("inf")


#: Exactly-once replaces the last two forced settings: a transaction commit confirms every
#: record of the batch (no per-run acknowledgement to protect), and librdkafka requires
#: ``message.timeout.ms`` <= ``transaction.timeout.ms``.
TRANSACTIONAL_FORCED: dict[str, str] = {
    "acks": "all",
    "enable.idempotence": "true",
    **_NO_TOPIC_CREATION,
}

#: Exactly-once target-producer defaults, over ``PRODUCER_DEFAULTS``. A commit point makes
#: every partition's batch ready at once; with more ready than request slots, librdkafka's
#: broker thread spins until a slot frees (librdkafka issue #3692), starving a broker on the
#: same machine. With 2 in flight that wait is cheap, and one request still carries every
#: ready batch of a broker (docs/benchmarks.md#client-settings).
TRANSACTIONAL_DEFAULTS: dict[str, str] = {"max.in.flight.requests.per.connection": "2"}


def producer_settings(
    props: Mapping[str, str], partition_by_key: bool, *, exactly_once: bool = False
) -> dict[str, str]:
    """The effective target-producer properties: defaults < user properties < forced.

    With ``partition_by_key`` (``partition: hash`` or ``producer``) the producer places
    records itself, with librdkafka's ``murmur2_random`` partitioner (the Java client's
    murmur2 placement) unless the user's ``partitioner`` says otherwise (the config model
    allows one with ``partition: producer`` only). The ``transactional.id`` of an
    exactly-once runner is added by the runner itself.
    """
    if exactly_once:
        conf = {**PRODUCER_DEFAULTS, **TRANSACTIONAL_DEFAULTS, **props, **TRANSACTIONAL_FORCED}
        txn_ms = int(conf.get("transaction.timeout.ms", 60_000))
        conf.setdefault("message.timeout.ms", str(min(DEFAULT_DELIVERY_TIMEOUT_MS, txn_ms)))
    else:
        conf = {**PRODUCER_DEFAULTS, **props, **PRODUCER_FORCED}
    if partition_by_key:
        conf.setdefault("partitioner", JAVA_PARTITIONER)
    return conf


#: librdkafka's global error callback (``error_cb``): connection, authentication and
#: fatal client errors that no single call reports.
ErrorCallback = Callable[[KafkaError], None]


#: librdkafka's statistics callback (``stats_cb``): the JSON document, every
#: ``statistics.interval.ms``, called from inside the client's poll.
StatsCallback = Callable[[str], None]


def build_consumer(
    conf: Mapping[str, str],
    on_error: ErrorCallback | None = None,
    on_stats: StatsCallback | None = None,
) -> Consumer:
    """A consumer with exactly ``conf`` (see :func:`consumer_settings` for k2k's layers);
    librdkafka's log lines go through :data:`~k2k.kafka.clientlog.CLIENT_LOG`."""
    return Consumer(_with_callbacks(conf, on_error, on_stats))


def build_producer(
    conf: Mapping[str, str],
    on_error: ErrorCallback | None = None,
    on_stats: StatsCallback | None = None,
) -> Producer:
    """A producer with exactly ``conf`` (see :func:`producer_settings`); librdkafka's log
    lines go through :data:`~k2k.kafka.clientlog.CLIENT_LOG`."""
    return Producer(_with_callbacks(conf, on_error, on_stats))


#: The longest a client's first metadata request may take in :func:`ready`.
READY_TIMEOUT_S = 1.0

_Client = TypeVar("_Client", Producer, Consumer)


def ready(client: _Client, topic: str, timeout_s: float = READY_TIMEOUT_S) -> _Client:
    """``client``, after a metadata request for ``topic`` (one that exists). librdkafka
    otherwise connects at its own pace: an idempotent or transactional producer asks for
    its producer id only on a 500 ms retry timer, and a consumer's first fetch came 500 ms
    after ``assign`` (docs/benchmarks.md#clients-ready-at-once). A failure is left to the
    request that follows, which reports it; a cluster that does not answer costs up to
    ``timeout_s``."""
    with contextlib.suppress(KafkaException):
        client.list_topics(topic, timeout=timeout_s)
    return client


def _with_callbacks(
    conf: Mapping[str, str], on_error: ErrorCallback | None, on_stats: StatsCallback | None
) -> dict[str, object]:
    settings: dict[str, object] = {**conf, "logger": CLIENT_LOG}
    if on_error is not None:
        settings["error_cb"] = on_error
    if on_stats is not None:
        settings["stats_cb"] = on_stats
    return settings


#: Admin client defaults, both for a broker that dies
#: (docs/operations.md#broker-restarts-and-leader-elections): metadata refreshed every 5 s,
#: because admin requests go to the broker it names as the controller and librdkafka's
#: 5-minute default kept naming a dead one; and a connection to every broker, because with
#: sparse connections a request to a dead partition leader reconnects to it without backoff.
ADMIN_DEFAULTS: dict[str, str] = {
    "topic.metadata.refresh.interval.ms": "5000",
    "enable.sparse.connections": "false",
}


def admin_settings(props: Mapping[str, str]) -> dict[str, str]:
    """The effective admin-client properties: :data:`ADMIN_DEFAULTS` < user properties."""
    return {**ADMIN_DEFAULTS, **props}


def build_admin(conf: Mapping[str, str], on_error: ErrorCallback | None = None) -> AdminClient:
    """An admin client with ``conf`` over :data:`ADMIN_DEFAULTS` (:func:`admin_settings`);
    its log lines (served by ``poll``) go through :data:`~k2k.kafka.clientlog.CLIENT_LOG`."""
    settings = admin_settings(conf)
    # The stub types the config dict as plain values; callbacks go in as keyword settings.
    if on_error is None:
        return AdminClient(dict(settings), logger=CLIENT_LOG)
    return AdminClient(dict(settings), logger=CLIENT_LOG, error_cb=on_error)
