"""The rules k2k applies to Kafka client property names, as tables :mod:`k2k.config.clients` reads.

A Java property librdkafka spells differently (:data:`RENAMES`), one without meaning outside the
JVM (:data:`JAVA_ONLY`), one k2k sets itself (:data:`MANAGED`), and the names offered in "did
you mean" (:data:`SUGGESTIONS`). They change when librdkafka or the Java client do; the
checking and translating that uses them does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "JAVA_ONLY",
    "MANAGED",
    "OAUTHBEARER_ADVICE",
    "REGISTRY_REASON",
    "RENAMES",
    "SUGGESTIONS",
    "Rename",
]


def _kbytes(value: str) -> str:
    number = int(value)
    if number < 1024:
        raise ValueError("librdkafka sizes this buffer in whole kilobytes")
    return str(number // 1024)


def _socket_buffer(value: str) -> str:
    number = int(value)
    return "0" if number == -1 else str(number)


def _identification(value: str) -> str:
    lowered = value.strip().lower()
    if lowered in ("", "none"):
        return "none"
    if lowered == "https":
        return "https"
    raise ValueError("librdkafka knows 'https' and 'none'")


@dataclass(frozen=True)
class Rename:
    """A Java property that librdkafka spells ``target`` (value passed through ``convert``)."""

    target: str
    convert: Callable[[str], str] | None = None
    note: str = ""


RENAMES: dict[str, Rename] = {
    "max.request.size": Rename("message.max.bytes"),
    "fetch.max.wait.ms": Rename("fetch.wait.max.ms"),
    "buffer.memory": Rename("queue.buffering.max.kbytes", _kbytes, "bytes / 1024"),
    "send.buffer.bytes": Rename("socket.send.buffer.bytes", _socket_buffer, "-1 (OS default) -> 0"),
    "receive.buffer.bytes": Rename(
        "socket.receive.buffer.bytes", _socket_buffer, "-1 (OS default) -> 0"
    ),
    "delivery.timeout.ms": Rename("message.timeout.ms"),
    "ssl.endpoint.identification.algorithm": Rename(
        "ssl.endpoint.identification.algorithm", _identification, "empty -> none"
    ),
    "ssl.truststore.certificates": Rename("ssl.ca.pem"),
    "ssl.keystore.key": Rename("ssl.key.pem"),
    "ssl.keystore.certificate.chain": Rename("ssl.certificate.pem"),
}

_SERDE = "k2k copies keys and values as bytes, so (de)serializer settings do not apply"
#: Why registry settings are refused in a client map (also every ``schema.registry.*``).
REGISTRY_REASON = "schema registry settings belong in source.registry / target.registry"
_METRICS = "k2k reports metrics itself (see the metrics section)"
_PARTITIONER = (
    "the sink stage places records (replication sink partition: source | hash | producer); "
    "Java partitioner classes cannot run in librdkafka: with partition: producer set "
    "librdkafka's partitioner instead (default murmur2_random, the Java default placement)"
)
_JVM_TLS = "Java security providers do not apply; librdkafka uses OpenSSL"
_TLS_VERSION = (
    "librdkafka negotiates the TLS version with OpenSSL; restrict ciphers with ssl.cipher.suites"
)
#: What replaces a Java login callback for OAUTHBEARER (also said of a JAAS OAuthBearerLoginModule).
OAUTHBEARER_ADVICE = (
    "for OAUTHBEARER set sasl.oauthbearer.method: oidc with sasl.oauthbearer.client.id, "
    "sasl.oauthbearer.client.secret and sasl.oauthbearer.token.endpoint.url"
)
_CALLBACKS = f"Java callback classes cannot run in librdkafka; {OAUTHBEARER_ADVICE}"

#: Java client properties without a librdkafka meaning, with the reason shown to the user.
JAVA_ONLY: dict[str, str] = {
    "key.serializer": _SERDE,
    "value.serializer": _SERDE,
    "key.deserializer": _SERDE,
    "value.deserializer": _SERDE,
    "key.subject.name.strategy": _SERDE,
    "value.subject.name.strategy": _SERDE,
    "auto.register.schemas": _SERDE,
    "use.latest.version": _SERDE,
    "specific.avro.reader": _SERDE,
    "schema.registry.url": REGISTRY_REASON,
    "basic.auth.credentials.source": REGISTRY_REASON,
    "basic.auth.user.info": REGISTRY_REASON,
    "max.poll.records": (
        "k2k sizes its reads itself; bound a batch with coordination.commit.batchSize"
    ),
    "interceptor.classes": "Java interceptor classes cannot run in librdkafka",
    "metric.reporters": _METRICS,
    "metrics.num.samples": _METRICS,
    "metrics.recording.level": _METRICS,
    "metrics.sample.window.ms": _METRICS,
    "auto.include.jmx.reporter": _METRICS,
    "partitioner.class": _PARTITIONER,
    "partitioner.ignore.keys": _PARTITIONER,
    "partitioner.adaptive.partitioning.enable": _PARTITIONER,
    "partitioner.availability.timeout.ms": _PARTITIONER,
    "max.block.ms": "librdkafka does not block on metadata; k2k bounds waits with connectTimeout",
    "default.api.timeout.ms": "k2k bounds its client calls with connectTimeout",
    "exclude.internal.topics": "k2k never replicates internal topics",
    "security.providers": _JVM_TLS,
    "ssl.provider": _JVM_TLS,
    "ssl.secure.random.implementation": _JVM_TLS,
    "ssl.keymanager.algorithm": _JVM_TLS,
    "ssl.trustmanager.algorithm": _JVM_TLS,
    "ssl.engine.factory.class": _JVM_TLS,
    "ssl.protocol": _TLS_VERSION,
    "ssl.enabled.protocols": _TLS_VERSION,
    "sasl.login.class": _CALLBACKS,
    "sasl.login.callback.handler.class": _CALLBACKS,
    "sasl.client.callback.handler.class": _CALLBACKS,
    "plugin.library.paths": "k2k does not load librdkafka plugins",
}

#: Properties k2k sets itself: name -> (refused values or None for any value, reason).
MANAGED: dict[str, tuple[frozenset[str] | None, str]] = {
    "enable.auto.commit": (
        frozenset({"true"}),
        "k2k never commits offsets to the source cluster; its progress lives in "
        "coordination.commit.topic on the target",
    ),
    "enable.auto.offset.store": (
        frozenset({"true"}),
        "k2k tracks consumed positions itself and stores them in coordination.commit.topic",
    ),
    "transactional.id": (
        None,
        "k2k sets one transactional.id per runner group itself (see coordination.assignment)",
    ),
    "acks": (
        frozenset({"0", "1"}),
        "progress is written only for records the target acknowledged durably: acks must "
        "be all (-1)",
    ),
    "enable.idempotence": (
        frozenset({"false"}),
        "the idempotent producer keeps each partition's order when requests are retried",
    ),
    "allow.auto.create.topics": (
        frozenset({"true"}),
        "k2k creates target topics itself (features.autoCreateTopics) with the source's "
        "partition count and configs; a topic the broker creates on a write gets the broker's "
        "defaults, and a deleted target topic would come back without its records unnoticed",
    ),
    "isolation.level": (
        frozenset({"read_uncommitted"}),
        "k2k reads read_committed so that aborted source transactions are never replicated",
    ),
}

# Names offered in "did you mean" for unknown properties (checked against librdkafka in tests).
SUGGESTIONS: tuple[str, ...] = (
    "bootstrap.servers", "client.id", "client.rack", "security.protocol", "sasl.mechanism",
    "sasl.username", "sasl.password", "sasl.kerberos.service.name", "sasl.kerberos.principal",
    "sasl.kerberos.keytab", "sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location",
    "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem", "ssl.key.password",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.cipher.suites",
    "enable.ssl.certificate.verification", "group.id", "group.instance.id",
    "auto.offset.reset", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.wait.max.ms",
    "fetch.queue.backoff.ms", "queued.max.messages.kbytes", "queued.min.messages",
    "check.crcs", "allow.auto.create.topics", "acks", "enable.idempotence", "linger.ms",
    "batch.size", "batch.num.messages", "compression.type", "compression.level", "retries",
    "retry.backoff.ms", "retry.backoff.max.ms", "request.timeout.ms", "message.timeout.ms",
    "message.max.bytes", "max.in.flight.requests.per.connection", "transaction.timeout.ms",
    "queue.buffering.max.kbytes", "queue.buffering.max.messages", "socket.timeout.ms",
    "socket.keepalive.enable", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "socket.connection.setup.timeout.ms", "connections.max.idle.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "metadata.max.age.ms", "topic.metadata.refresh.interval.ms",
    "client.dns.lookup", "statistics.interval.ms", "debug", "log_level",
    *RENAMES,
)  # fmt: skip
