"""Driver-side cluster queries, each bounded in time and naming the cluster when it fails.

A :class:`ClusterView` wraps one AdminClient for one cluster (``source`` or ``target``) so
every error message can say which cluster and which ``bootstrap.servers`` were involved.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Protocol

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from k2k.errors import ClusterError, TopicError
from k2k.kafka.factory import build_admin
from k2k.kafka.faults import cluster_error

__all__ = ["ClusterSettings", "ClusterView", "TopicInfo"]


#: The all-zero topic id (base64) of brokers that have none.
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the cluster's metadata shows it. ``replication_factor`` is the most replicas
    any partition has (0 when unknown); it takes no part in comparisons."""

    name: str
    partitions: int
    replication_factor: int = field(default=0, compare=False)


class ClusterSettings(Protocol):
    """What a view needs of one cluster's configuration (``source:`` or ``target:``)."""

    CLUSTER: ClassVar[str]

    @property
    def connect_timeout(self) -> timedelta: ...

    def client(self, role: str) -> dict[str, str]: ...


class ClusterView:
    """Runs on: driver. One cluster's metadata, offsets, configs and topic creation."""

    @classmethod
    def of(cls, cluster: ClusterSettings) -> ClusterView:
        """The view of a configured cluster: its admin client, its ``connectTimeout``."""
        return cls(
            cluster.CLUSTER, cluster.client("admin"), cluster.connect_timeout.total_seconds()
        )

    def __init__(self, cluster: str, conf: Mapping[str, str], timeout_s: float) -> None:
        self.cluster = cluster
        self.bootstrap = conf.get("bootstrap.servers", "?")
        self.timeout_s = timeout_s
        self.last_client_error: KafkaError | None = None
        #: False while the last probe went unanswered (see :meth:`probe`): callers that retry
        #: anyway log their own failures at DEBUG then, the outage is reported once.
        self.answering = True
        self.admin = build_admin(conf, on_error=self._on_client_error)

    def _failure(self, exc: KafkaException, doing: str) -> ClusterError:
        self.admin.poll(0)  # serve queued error callbacks: they carry the real cause
        return cluster_error(exc, self.cluster, self.bootstrap, doing, self.last_client_error)

    def _on_client_error(self, err: KafkaError) -> None:
        """librdkafka reports why it cannot connect (e.g. SASL or TLS failures) only here;
        requests just time out. Kept so the failure message can name the real cause, which
        the "all brokers are down" summary that follows it does not replace."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN and self.last_client_error is not None:
            return
        self.last_client_error = err

    def probe(self) -> Future[Any]:
        """Ask the cluster for its brokers (a metadata request without topics: small, and it
        needs no ACL); the future fails when no answer arrives within ``timeout_s``.
        Judge the outcome with :meth:`probe_failure`."""
        return self.admin.describe_cluster(request_timeout=self.timeout_s)

    def probe_failure(self, probe: Future[Any]) -> str | None:
        """None when the finished ``probe`` was answered, else why not: the client's last
        background error (it names the broker and the cause: refused, TLS, SASL), or the
        probe's own error when there is none."""
        self.admin.poll(0)  # serve queued error callbacks and log lines
        exc = probe.exception()
        self.answering = exc is None
        if exc is None:
            self.last_client_error = None  # a later failure must not quote an old cause
            return None
        cause = self.last_client_error
        if cause is not None:
            return cause.str() or cause.name()
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return err.str() if isinstance(err, KafkaError) else str(exc)

    def cluster_id(self) -> str:
        """The cluster's id (KRaft: the one the storage was formatted with)."""
        try:
            answer = self.probe().result()
        except KafkaException as exc:
            raise self._failure(exc, "describing the cluster") from None
        return str(answer.cluster_id)

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic the principal can see (fails within ``timeout_s`` when unreachable)."""
        try:
            md = self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._failure(exc, "listing topics") from None
        out: dict[str, TopicInfo] = {}
        for name, tmd in md.topics.items():
            if tmd.error is not None and tmd.error.code() != KafkaError.LEADER_NOT_AVAILABLE:
                continue
            if not tmd.partitions:
                continue  # being created: no partitions yet
            replicas = max(len(p.replicas) for p in tmd.partitions.values())
            out[name] = TopicInfo(name, len(tmd.partitions), replicas)
        return out

    def topic_ids(self, names: Iterable[str]) -> dict[str, str]:
        """The topic id of each of ``names`` that exists (a name deleted and created again
        gets a new id, so an id tells a re-created topic from the old one); "" where the
        cluster keeps none."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        try:
            futures = self.admin.describe_topics(
                TopicCollection(wanted), request_timeout=self.timeout_s
            )
        except KafkaException as exc:
            raise self._failure(exc, "describing topics") from None
        out: dict[str, str] = {}
        for name, future in futures.items():
            try:
                topic_id = str(future.result().topic_id)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # deleted: absent from the answer
                raise self._failure(exc, f"describing topic {name}") from None
            # Brokers without topic ids answer all zeros: "" (unknown).
            out[name] = "" if topic_id == _NO_TOPIC_ID else topic_id
        return out

    def offsets(
        self, partitions: Iterable[tuple[str, int]], which: str, committed_only: bool = True
    ) -> dict[tuple[str, int], int]:
        """Earliest or latest offset per partition; ``latest`` under read_committed is the
        last stable offset (an open transaction holds it back)."""
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        level = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
        try:
            futures = self.admin.list_offsets(
                request, isolation_level=level, request_timeout=self.timeout_s
            )
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            raise self._failure(exc, f"listing {which} offsets") from None

    def _describe(self, topic: str) -> dict:
        res = ConfigResource(ResourceType.TOPIC, topic)
        try:
            return self.admin.describe_configs([res], request_timeout=self.timeout_s)[res].result()
        except KafkaException as exc:
            raise self._failure(exc, f"describing topic {topic}") from None

    def non_default_configs(self, topic: str) -> dict[str, str]:
        """The topic's own (dynamic) configs: what a copy of the topic should carry."""
        return {
            name: entry.value
            for name, entry in self._describe(topic).items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None
        }

    def topic_config(self, topic: str) -> dict[str, str]:
        """Every effective config value of ``topic`` (defaults included)."""
        return {n: e.value for n, e in self._describe(topic).items() if e.value is not None}

    def alter_topic_configs(
        self, topic: str, updates: Mapping[str, str], removals: Iterable[str] = ()
    ) -> None:
        """Set ``updates`` on ``topic`` and remove its own values of ``removals`` (the
        cluster's default applies again), in one IncrementalAlterConfigs request; the configs
        not named keep their values."""
        entries = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in sorted(updates.items())
        ] + [
            ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
            for name in sorted(removals)
        ]
        if not entries:
            return
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        try:
            futures = self.admin.incremental_alter_configs([res], request_timeout=self.timeout_s)
            futures[res].result()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.retriable():
                raise self._failure(exc, f"altering the configs of topic {topic}") from None
            raise TopicError(
                f"{self.cluster} cluster at {self.bootstrap}: cannot alter the configs of topic "
                f"{topic!r}: {err.str() if isinstance(err, KafkaError) else exc}"
            ) from None

    def literal_topic_acls(self) -> list[AclBinding] | None:
        """Every ACL binding on a topic with a literal resource pattern; None when the
        cluster says it has no authorizer (brokers of Kafka 4 answer no ACLs instead)."""
        # None matches any name, principal and host (the stubs type them as str only).
        wanted = AclBindingFilter(
            ResourceType.TOPIC,
            None,  # type: ignore[arg-type]
            ResourcePatternType.LITERAL,
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        try:
            return list(self.admin.describe_acls(wanted, request_timeout=self.timeout_s).result())
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.SECURITY_DISABLED:
                return None
            raise self._failure(exc, "describing topic ACLs") from None

    def create_acls(self, bindings: Iterable[AclBinding]) -> bool:
        """Create ``bindings`` (one that exists already is left as it is); False when the
        cluster has no authorizer (it keeps no ACLs)."""
        wanted = list(bindings)
        if not wanted:
            return True
        try:
            for future in self.admin.create_acls(wanted, request_timeout=self.timeout_s).values():
                future.result()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.SECURITY_DISABLED:
                return False
            raise self._failure(exc, "creating ACLs") from None
        return True

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create ``name``; a topic that already exists (a concurrent creator) is fine."""
        new = NewTopic(name, partitions, replication_factor, config=dict(configs))
        try:
            self.admin.create_topics([new], request_timeout=self.timeout_s)[name].result()
        except KafkaException as exc:
            err = exc.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise TopicError(
                f"{self.cluster} cluster at {self.bootstrap}: cannot create topic {name!r}: "
                f"{err.str() if isinstance(err, KafkaError) else exc}"
            ) from None

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions; a topic that already has them is fine."""
        try:
            self.admin.create_partitions(
                [NewPartitions(name, total)], request_timeout=self.timeout_s
            )[name].result()
        except KafkaException as exc:
            err = exc.args[0]
            grown = isinstance(err, KafkaError) and err.code() == KafkaError.INVALID_PARTITIONS
            if grown and self.topics().get(name, TopicInfo(name, 0)).partitions >= total:
                return  # a concurrent grower got there first
            raise TopicError(
                f"{self.cluster} cluster at {self.bootstrap}: cannot grow topic {name!r} to "
                f"{total} partitions: {err.str() if isinstance(err, KafkaError) else exc}"
            ) from None

    def wait_for_topic(self, name: str, partitions: int = 1) -> dict[str, TopicInfo]:
        """Poll metadata until a just-created (or grown) topic is visible with at least
        ``partitions`` partitions (changes propagate asynchronously to the brokers' metadata
        caches); bounded by ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            topics = self.topics()
            if name in topics and topics[name].partitions >= partitions:
                return topics
            if time.monotonic() >= deadline:
                raise TopicError(
                    f"{self.cluster} cluster at {self.bootstrap}: topic {name!r} was created "
                    f"(or grown) but is not visible with {partitions} partitions after {self.timeout_s:g} s"
                )
            time.sleep(0.05)  # metadata poll interval
