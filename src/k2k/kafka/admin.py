"""Driver-side cluster queries, each bounded in time and naming the cluster when it fails.

A :class:`ClusterView` wraps one AdminClient for one cluster (``source`` or ``target``) so
every error message can say which cluster and which ``bootstrap.servers`` were involved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
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
from k2k.kafka import TP
from k2k.kafka.bulk import (
    PARTITIONS_PER_REQUEST,
    RECORDS_PER_CHANGE,
    TOPICS_PER_REQUEST,
    Answers,
    Backoff,
    K,
    Send,
    ask,
    chunked,
    named,
)
from k2k.kafka.factory import build_admin
from k2k.kafka.faults import cluster_error

__all__ = ["ClusterSettings", "ClusterView", "TopicInfo"]


#: The all-zero topic id (base64) of brokers that have none.
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"

#: Answers about a topic the cluster has just created (or a client's metadata that has not
#: caught up yet): retried within ``timeout_s`` where the caller knows the topic exists.
#: ``_NOENT`` is librdkafka's "no leaders found" for an offsets request.
_NOT_YET_VISIBLE = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._NOENT,
    }
)


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

    def _ask(
        self,
        keys: Iterable[K],
        send: Send[K],
        doing: str,
        *,
        chunk: int | Callable[[list[K]], Iterable[list[K]]] = TOPICS_PER_REQUEST,
        answers: Collection[int] = (),
        settling: Collection[int] = (),
        retry: bool = True,
    ) -> Answers[K, Any]:
        """:func:`~k2k.kafka.bulk.ask` within this cluster's ``timeout_s``."""
        return ask(
            keys,
            send,
            chunk=chunk,
            timeout_s=self.timeout_s,
            doing=f"{self.cluster} cluster at {self.bootstrap}: {doing}",
            answers=answers,
            settling=settling,
            retry=retry,
        )

    def _raise_failed(self, got: Answers[Any, Any], doing: str) -> None:
        """Raise the failure of ``got``'s errors, if any, naming the keys that failed."""
        if not got.errors:
            return
        first = min(got.errors)
        still = f" (nothing new answered for {self.timeout_s:g} s)" if got.gave_up else ""
        doing = f"{doing} of {named(got.errors)}{still}"
        raise self._failure(KafkaException(got.errors[first]), doing)

    def topic_ids(self, names: Iterable[str], retry: bool = True) -> dict[str, str]:
        """The topic id of each of ``names`` that exists (a name deleted and created again
        gets a new id, so an id tells a re-created topic from the old one); "" where the
        cluster keeps none. ``retry`` False asks once (a check that must not block)."""
        unknown = (KafkaError.UNKNOWN_TOPIC_OR_PART,)
        got = self._describe_topics(names, answers=unknown, retry=retry)
        got.errors = {
            t: e for t, e in got.errors.items() if e.code() != KafkaError.UNKNOWN_TOPIC_OR_PART
        }  # unknown: deleted, absent from the answer
        self._raise_failed(got, "describing topics")
        ids = {name: str(desc.topic_id) for name, desc in got.values.items()}
        # Brokers without topic ids answer all zeros: "" (unknown).
        return {name: "" if i == _NO_TOPIC_ID else i for name, i in ids.items()}

    def _describe_topics(
        self, names: Iterable[str], *, answers: Collection[int] = (), retry: bool = True
    ) -> Answers[str, Any]:
        """Each topic's description (partitions, topic id), in chunks."""

        def send(chunk: list[str], timeout_s: float) -> Mapping[str, Future[Any]]:
            return self.admin.describe_topics(TopicCollection(chunk), request_timeout=timeout_s)

        names = sorted(set(names))
        return self._ask(names, send, "describing topics", answers=answers, retry=retry)

    def offsets(
        self,
        partitions: Iterable[tuple[str, int]],
        which: str,
        committed_only: bool = True,
        retry: bool = True,
    ) -> dict[tuple[str, int], int]:
        """Earliest or latest offset per partition; ``latest`` under read_committed is the
        last stable offset (an open transaction holds it back). Partitions whose leader is
        not known yet are asked again within ``timeout_s`` (once only with ``retry`` False:
        a caller that must not block on a settling cluster)."""
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        level = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
        return self._list_offsets(partitions, spec, f"listing {which} offsets", level, retry)

    def offsets_at(self, partitions: Iterable[tuple[str, int]], timestamp_ms: int) -> dict[TP, int]:
        """Per partition, the first offset whose record timestamp is at or after
        ``timestamp_ms``; -1 where no record is that recent (Kafka's answer)."""
        spec = OffsetSpec.for_timestamp(timestamp_ms)
        doing = "looking up offsets by timestamp"
        return self._list_offsets(partitions, spec, doing, IsolationLevel.READ_UNCOMMITTED)

    def _list_offsets(
        self,
        partitions: Iterable[TP],
        spec: OffsetSpec,
        doing: str,
        level: IsolationLevel,
        retry: bool = True,
    ) -> dict[TP, int]:
        def send(chunk: list[TP], timeout_s: float) -> Mapping[TP, Future[Any]]:
            request = {TopicPartition(t, p): spec for t, p in chunk}
            futures = self.admin.list_offsets(
                request, isolation_level=level, request_timeout=timeout_s
            )
            return {(tp.topic, tp.partition): f for tp, f in futures.items()}

        got = self._ask(
            partitions,
            send,
            doing,
            chunk=PARTITIONS_PER_REQUEST,
            settling=_NOT_YET_VISIBLE,
            retry=retry,
        )
        self._raise_failed(got, doing)
        return {tp: info.offset for tp, info in got.values.items()}

    def delete_records(self, below: Mapping[TP, int]) -> None:
        """Delete every record below ``below[tp]`` in each partition (DeleteRecords: the
        partition's log start moves there), batched like the offset listings."""

        def send(chunk: list[TP], timeout_s: float) -> Mapping[TP, Future[Any]]:
            request = [TopicPartition(t, p, below[(t, p)]) for t, p in chunk]
            futures = self.admin.delete_records(request, request_timeout=timeout_s)
            return {(tp.topic, tp.partition): f for tp, f in futures.items()}

        doing = "deleting records"
        got = self._ask(
            sorted(below), send, doing, chunk=PARTITIONS_PER_REQUEST, settling=_NOT_YET_VISIBLE
        )
        self._raise_failed(got, doing)

    def configs(
        self, topics: Iterable[str], *, own_only: bool = False, retry: bool = True
    ) -> dict[str, dict[str, str]]:
        """Each topic's effective config values (defaults included), or with ``own_only``
        its own (dynamic) configs only: what a copy of the topic should carry. ``retry``
        False asks once."""

        def send(chunk: list[str], timeout_s: float) -> Mapping[str, Future[Any]]:
            resources = [ConfigResource(ResourceType.TOPIC, name) for name in chunk]
            futures = self.admin.describe_configs(resources, request_timeout=timeout_s)
            return {resource.name: future for resource, future in futures.items()}

        got = self._ask(sorted(set(topics)), send, "describing topic configs", retry=retry)
        self._raise_failed(got, "describing the configs of topics")
        own = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {
            topic: {
                name: entry.value
                for name, entry in entries.items()
                if entry.value is not None and (not own_only or entry.source == own)
            }
            for topic, entries in got.values.items()
        }

    def topic_config(self, topic: str) -> dict[str, str]:
        """Every effective config value of ``topic`` (defaults included)."""
        return self.configs([topic])[topic]

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

    def create_topics(self, topics: Iterable[NewTopic]) -> dict[str, int]:
        """Create ``topics`` and wait until the cluster shows each with its partitions
        (:meth:`wait_for_topics`); returns the partition counts seen. A topic that already
        exists (a concurrent creator) is fine. Raises :class:`~k2k.errors.TopicError`
        naming the topics the cluster refused (e.g. a replication factor above its broker
        count). As few requests as the controller takes (:data:`RECORDS_PER_CHANGE`), sent
        together."""
        new = {topic.topic: topic for topic in topics}

        def send(names: list[str], timeout_s: float) -> Mapping[str, Future[Any]]:
            return self.admin.create_topics([new[n] for n in names], request_timeout=timeout_s)

        def split(names: list[str]) -> Iterable[list[str]]:
            return chunked(names, len(names), RECORDS_PER_CHANGE, lambda n: _records(new[n]))

        exists = KafkaError.TOPIC_ALREADY_EXISTS
        got = self._ask(sorted(new), send, "creating topics", chunk=split, answers=(exists,))
        existed = {n for n, e in got.errors.items() if e.code() == exists}
        got.errors = {n: e for n, e in got.errors.items() if n not in existed}
        self._raise_refused(got, "creating topics", "create topic")
        # A topic that existed is waited for until visible: its count is checked where used.
        return self.wait_for_topics(
            {n: 1 if n in existed else max(t.num_partitions, 1) for n, t in new.items()}
        )

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> int:
        """Create ``name`` (:meth:`create_topics`); returns its partition count."""
        topic = NewTopic(name, partitions, replication_factor, config=dict(configs))
        return self.create_topics([topic])[name]

    def add_partitions(self, totals: Mapping[str, int]) -> None:
        """Grow each topic of ``totals`` to its partition count and wait until the cluster
        shows them, in requests as :meth:`create_topics` makes them; a topic that already
        has them (a concurrent grower) is fine."""

        def send(names: list[str], timeout_s: float) -> Mapping[str, Future[Any]]:
            grow = [NewPartitions(name, totals[name]) for name in names]
            return self.admin.create_partitions(grow, request_timeout=timeout_s)

        def split(names: list[str]) -> Iterable[list[str]]:
            return chunked(names, len(names), RECORDS_PER_CHANGE, totals.__getitem__)

        invalid = KafkaError.INVALID_PARTITIONS
        got = self._ask(sorted(totals), send, "adding partitions", chunk=split, answers=(invalid,))
        if any(e.code() == invalid for e in got.errors.values()):
            have = self.topics()
            got.errors = {
                n: e
                for n, e in got.errors.items()
                if e.code() != invalid or have.get(n, TopicInfo(n, 0)).partitions < totals[n]
            }
        to = {name: f" to {total} partitions" for name, total in totals.items()}
        self._raise_refused(got, "adding partitions", "grow topic", to)
        self.wait_for_topics(totals)

    def _raise_refused(
        self, got: Answers[str, Any], doing: str, verb: str, detail: Mapping[str, str] | None = None
    ) -> None:
        """Raise for ``got``'s errors: an outage's failure when one is retriable (it outlasted
        ``timeout_s``), else a :class:`~k2k.errors.TopicError` naming the refused topics."""
        if not got.errors:
            return
        if got.gave_up:
            self._raise_failed(got, doing)
        name = min(got.errors)
        err = got.errors[name]
        more = f" (and {len(got.errors) - 1} more topics)" if len(got.errors) > 1 else ""
        raise TopicError(
            f"{self.cluster} cluster at {self.bootstrap}: cannot {verb} {name!r}{(detail or {}).get(name, '')}: "
            f"{err.str() or err.name()}{more}"
        )

    def wait_for_topics(self, expected: Mapping[str, int]) -> dict[str, int]:
        """Poll until every topic of ``expected``, just created or grown, shows at least its
        partition count (changes reach the brokers' metadata caches asynchronously); returns
        the counts seen. A busy cluster is waited for while it makes progress, shown
        partitions or partitions whose leader answers (a broker shows the topics of one
        request only after it created the logs of the one before): this fails only when
        neither grew for ``timeout_s``."""
        waiting = _Visibility(expected)
        backoff = Backoff()
        deadline = time.monotonic() + self.timeout_s
        while waiting.pending:
            got = self._describe_topics(
                waiting.pending, answers=(KafkaError.UNKNOWN_TOPIC_OR_PART,)
            )
            got.errors = {
                t: e for t, e in got.errors.items() if e.code() != KafkaError.UNKNOWN_TOPIC_OR_PART
            }
            self._raise_failed(got, "describing topics")
            shown = waiting.shown({name: len(desc.partitions) for name, desc in got.values.items()})
            if shown or (waiting.pending and self._more_ready(waiting)):
                deadline = time.monotonic() + self.timeout_s  # progress: wait on
            if waiting.pending and time.monotonic() >= deadline:
                raise self._not_visible(waiting.pending, waiting.seen)
            if waiting.pending:
                time.sleep(backoff.next())  # the metadata poll interval, growing
        return waiting.seen

    def _more_ready(self, waiting: _Visibility) -> bool:
        """Whether more shown partitions answer for their leader than before (asked once
        each round: only progress counts here, not the answer)."""
        unready = waiting.unready()
        if not unready:
            return False

        def send(chunk: list[TP], timeout_s: float) -> Mapping[TP, Future[Any]]:
            request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in chunk}
            futures = self.admin.list_offsets(request, request_timeout=timeout_s)
            return {(tp.topic, tp.partition): f for tp, f in futures.items()}

        doing = "checking partition leaders"
        got = self._ask(unready, send, doing, chunk=PARTITIONS_PER_REQUEST, retry=False)
        waiting.ready.update(got.values)
        return bool(got.values)

    def _not_visible(self, pending: Mapping[str, int], seen: Mapping[str, int]) -> TopicError:
        name = min(pending)
        shows = f"it shows {seen[name]}" if seen[name] else "it is not visible at all"
        more = f" (and {len(pending) - 1} more topics)" if len(pending) > 1 else ""
        return TopicError(
            f"{self.cluster} cluster at {self.bootstrap}: topic {name!r} was created (or "
            f"grown) to {pending[name]} partitions but {shows} after waiting "
            f"{self.timeout_s:g} s without progress{more}; the controller may be overloaded "
            f"({self.cluster}.connectTimeout bounds the wait)"
        )


def _records(topic: NewTopic) -> int:
    """The metadata records creating ``topic`` takes: the topic, its partitions, its configs
    (a topic of the broker's default partition count counted as one)."""
    return 1 + max(topic.num_partitions, 1) + len(topic.config or {})


class _Visibility:
    """What :meth:`ClusterView.wait_for_topics` has seen: partitions shown per topic, the
    topics still short of the count expected, and the partitions whose leader answered.

    >>> v = _Visibility({"a": 2, "b": 3})
    >>> v.shown({"a": 2}), v.pending, v.unready()
    (True, {'b': 3}, [('a', 0), ('a', 1)])
    >>> v.ready.add(("a", 0)); v.shown({"a": 2}), v.unready()
    (False, [('a', 1)])
    """

    def __init__(self, expected: Mapping[str, int]) -> None:
        self.expected = dict(expected)
        self.seen = dict.fromkeys(expected, 0)
        self.pending = dict(expected)
        self.ready: set[TP] = set()

    def shown(self, now: Mapping[str, int]) -> bool:
        """Take the counts shown ``now``; True when they grew."""
        grew = any(count > self.seen[name] for name, count in now.items())
        self.seen.update({name: max(count, self.seen[name]) for name, count in now.items()})
        self.pending = {n: want for n, want in self.pending.items() if self.seen[n] < want}
        return grew

    def unready(self) -> list[TP]:
        """The partitions shown whose leader has not answered yet."""
        shown = ((t, p) for t, count in self.seen.items() for p in range(count))
        return [tp for tp in shown if tp not in self.ready]
