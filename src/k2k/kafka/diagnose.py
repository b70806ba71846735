"""Step-by-step connection diagnostics of the source and target clusters
(``features.checkKafkaConnectionOnStartup``, ``k2k validate --check``).

Per cluster, in order, stopping at the first failing step:

1. DNS — every bootstrap host resolves;
2. TCP connect — a bootstrap address accepts a connection;
3. TLS — with SSL/SASL_SSL a handshake with the configured CA and client certificate, else a
   check that the listener answers plaintext Kafka requests (not a TLS listener);
4. SASL authentication — with SASL_*, a librdkafka metadata request authenticates;
5. metadata — the cluster answers, and every broker it advertises accepts connections;
6. topics — the needed topics exist, or will be created and the principal may (a
   ``validate_only`` creation, which creates nothing), and the principal holds the needed
   operations on them (Describe and Read on the source; Describe, Read and Write on control
   topics, Describe and Write on replicated topics on the target).

A step passes when at least one bootstrap address passes it. Nothing is ever written, to
either cluster: topic checks only describe. Each step is one line (:meth:`Step.line`) naming
what to fix; secrets never appear (errors come from OpenSSL and librdkafka, which do not
quote them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, ClusterMetadata, NewTopic

from k2k.errors import ClusterError
from k2k.kafka.factory import build_admin
from k2k.kafka.faults import AUTH_FAILURES, describe
from k2k.kafka.probe import (
    Failure,
    kafka_answers,
    parse_bootstrap,
    resolve,
    tcp_connect,
    tls_context,
    tls_handshake,
    uses_sasl,
    uses_tls,
)

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = [
    "Diagnosis",
    "Step",
    "TopicNeeds",
    "diagnose",
    "diagnose_cluster",
    "diagnosed_on_failure",
    "report",
    "summary",
]

_SOURCE_OPS = frozenset({AclOperation.DESCRIBE, AclOperation.READ})
_CONTROL_OPS = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE})
_TARGET_OPS = frozenset({AclOperation.DESCRIBE, AclOperation.WRITE})


@dataclass(frozen=True)
class Step:
    """One step's outcome for one cluster: passed (``fix`` is None) or failed."""

    cluster: str
    name: str
    detail: str
    fix: str | None = None

    @property
    def ok(self) -> bool:
        return self.fix is None

    def line(self) -> str:
        """``source TCP connect: ok (...)`` or ``target SASL authentication: FAILED ...``."""
        if self.fix is None:
            return f"{self.cluster} {self.name}: ok ({self.detail})"
        return f"{self.cluster} {self.name}: FAILED: {self.detail}; {self.fix}"


@dataclass
class Diagnosis:
    """The steps one cluster went through; the last one failed when :attr:`failed` is set."""

    cluster: str
    bootstrap: str
    steps: list[Step] = field(default_factory=list)
    metadata: ClusterMetadata | None = None

    @property
    def failed(self) -> Step | None:
        return next((s for s in self.steps if not s.ok), None)


@dataclass(frozen=True)
class TopicNeeds:
    """Topics one cluster must serve: ``topics`` -> the operations needed on each, where a
    missing topic is fine when ``creatable`` says so (auto-creation), else ``missing_fix``."""

    topics: Mapping[str, frozenset[AclOperation]]
    creatable: Callable[[str], bool] = lambda _t: False
    missing_fix: Callable[[str], str] = lambda t: f"create topic {t!r}"


def diagnose(cfg: PipelineConfig) -> list[Diagnosis]:
    """Run the steps on the source, then on the target (whose topic needs follow from the
    source topics the source step saw)."""
    source_conf = cfg.source_client("admin")
    source = diagnose_cluster(
        "source", source_conf, cfg.source.connect_timeout.total_seconds(), _source_needs(cfg)
    )
    target = diagnose_cluster(
        "target",
        cfg.target_client("admin"),
        cfg.target.connect_timeout.total_seconds(),
        _target_needs(cfg, source.metadata),
    )
    return [source, target]


def summary(diagnoses: Iterable[Diagnosis]) -> str | None:
    """One line naming every cluster's failing step; None when all passed."""
    failed = [
        f"{d.cluster} cluster at {d.bootstrap} failed the connection check at {s.name}: "
        f"{s.detail}; {s.fix} ({d.cluster}.kafka.common)"
        for d in diagnoses
        if (s := d.failed) is not None
    ]
    return "; ".join(failed) or None


def diagnose_cluster(
    cluster: str,
    conf: Mapping[str, str],
    timeout_s: float,
    needs: Callable[[ClusterMetadata], TopicNeeds],
) -> Diagnosis:
    """The steps of one cluster with librdkafka settings ``conf``, each bounded by
    ``timeout_s``; ``needs`` names the topics to check from the cluster's metadata."""
    run = _Run(Diagnosis(cluster, conf.get("bootstrap.servers", "?")), conf, timeout_s)
    for step in (run.dns, run.tcp, run.tls, run.sasl_and_metadata, lambda: run.topics(needs)):
        if not step():
            break
    return run.diagnosis


class _Run:
    """One cluster's pass: each step method records its lines and says whether to go on."""

    def __init__(self, diagnosis: Diagnosis, conf: Mapping[str, str], timeout_s: float):
        self.diagnosis = diagnosis
        self.conf = conf
        self.timeout_s = timeout_s
        self.addresses = parse_bootstrap(diagnosis.bootstrap)
        self.admin: AdminClient | None = None

    def _record(self, name: str, detail: str, fix: str | None = None) -> bool:
        self.diagnosis.steps.append(Step(self.diagnosis.cluster, name, detail, fix))
        return fix is None

    def _each(self, name: str, probe: Callable[[str, int], str | Failure]) -> bool:
        """Run ``probe`` on every address left; keep those that pass; fail when none does."""
        passed, failures = [], []
        for host, port in self.addresses:
            outcome = probe(host, port)
            if isinstance(outcome, Failure):
                failures.append(outcome)
            else:
                passed.append(((host, port), outcome))
        if not passed:
            return self._record(name, failures[0].what, failures[0].fix)
        self.addresses = [address for address, _ in passed]
        notes = [f"{a[0]}:{a[1]} {detail}" for a, detail in passed]
        notes += [f"but {f.what}" for f in failures]
        return self._record(name, "; ".join(notes))

    def dns(self) -> bool:
        def probe(host: str, port: int) -> str | Failure:
            found = resolve(host, port)
            return found if isinstance(found, Failure) else f"resolves to {', '.join(found)}"

        return self._each("DNS", probe)

    def tcp(self) -> bool:
        def probe(host: str, port: int) -> str | Failure:
            sock = tcp_connect(host, port, self.timeout_s)
            if isinstance(sock, Failure):
                return sock
            sock.close()
            return "accepts connections"

        return self._each("TCP connect", probe)

    def tls(self) -> bool:
        protocol = self.conf.get("security.protocol", "PLAINTEXT").upper()
        if not uses_tls(self.conf):
            return self._each("TLS", lambda h, p: self._plaintext(h, p, protocol))
        context = tls_context(self.conf)
        if isinstance(context, Failure):
            return self._record("TLS handshake", context.what, context.fix)

        trust = "certificate trusted" if context.verify_mode else "certificate not verified"

        def probe(host: str, port: int) -> str | Failure:
            version = tls_handshake(context, host, port, self.timeout_s)
            return version if isinstance(version, Failure) else f"{version}, {trust}"

        return self._each("TLS handshake", probe)

    def _plaintext(self, host: str, port: int, protocol: str) -> str | Failure:
        sock = tcp_connect(host, port, self.timeout_s)
        if isinstance(sock, Failure):
            return sock
        with sock:
            if kafka_answers(sock):
                return f"not used ({protocol}): answers Kafka requests in plaintext"
        return Failure(
            f"{host}:{port} does not answer a plaintext Kafka request (a TLS listener?)",
            "set security.protocol to SSL (or SASL_SSL) with ssl.truststore.location, or use "
            "the port of a plaintext listener",
        )

    def sasl_and_metadata(self) -> bool:
        sasl = uses_sasl(self.conf)
        servers = ",".join(f"{h}:{p}" for h, p in self.addresses)
        self.admin, metadata, error = _metadata(
            {**self.conf, "bootstrap.servers": servers}, self.timeout_s
        )
        if sasl and error is not None and error.code() in AUTH_FAILURES:
            return self._record(
                "SASL authentication",
                error.str(),
                "check sasl.mechanism and the username and password in sasl.jaas.config "
                "(or sasl.username / sasl.password)",
            )
        if sasl and metadata is not None:
            self._record("SASL authentication", f"{self.conf.get('sasl.mechanism', 'GSSAPI')}")
        if metadata is None:
            what = describe(error) if error is not None else "no answer"
            return self._record("metadata", what, "check the brokers' logs and listeners")
        self.diagnosis.metadata = metadata
        return self._advertised(metadata)

    def _advertised(self, metadata: ClusterMetadata) -> bool:
        """The brokers a client talks to after bootstrap are the advertised ones."""
        brokers = sorted((b.id, str(b.host), b.port) for b in metadata.brokers.values())
        for broker_id, host, port in brokers:
            sock = tcp_connect(host, port, self.timeout_s)
            if isinstance(sock, Failure):
                return self._record(
                    "metadata",
                    f"broker {broker_id} advertises {host}:{port}, which {sock.what}",
                    "fix advertised.listeners on that broker, or the network and DNS to it",
                )
            sock.close()
        where = ", ".join(f"{h}:{p}" for _, h, p in brokers)
        return self._record(
            "metadata", f"cluster {metadata.cluster_id}, {len(brokers)} broker(s): {where}"
        )

    def topics(self, needs: Callable[[ClusterMetadata], TopicNeeds]) -> bool:
        assert self.admin is not None and self.diagnosis.metadata is not None
        wanted = needs(self.diagnosis.metadata)
        if not wanted.topics:
            return self._record("topics", "no topic to check")
        problems = _topic_problems(self.admin, wanted, self.timeout_s)
        if problems:
            return self._record("topics", problems[0][0], problems[0][1])
        return self._record("topics", f"{len(wanted.topics)} checked: {_names(wanted.topics)}")


def _names(topics: Iterable[str], most: int = 5) -> str:
    names = sorted(topics)
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _metadata(
    conf: Mapping[str, str], timeout_s: float
) -> tuple[AdminClient, ClusterMetadata | None, KafkaError | None]:
    """librdkafka's metadata answer, or its last error; returns early on an authentication or
    TLS error (those do not heal by waiting)."""
    errors: list[KafkaError] = []
    admin = build_admin(conf, on_error=errors.append)
    deadline = time.monotonic() + timeout_s
    last: KafkaError | None = None
    while time.monotonic() < deadline:
        try:
            return admin, admin.list_topics(timeout=min(1.0, timeout_s)), None
        except KafkaException as exc:
            last = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else last
        admin.poll(0)  # serves error_cb: the cause of a failed connection is only said there
        if any(e.code() in AUTH_FAILURES or e.code() == KafkaError._SSL for e in errors):
            break
    causes = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
    return admin, None, (causes[-1] if causes else last)


def _topic_problems(
    admin: AdminClient, needs: TopicNeeds, timeout_s: float
) -> list[tuple[str, str]]:
    """(what, fix) per topic that is missing and not creatable, or lacks an operation."""
    futures = admin.describe_topics(
        TopicCollection(sorted(needs.topics)),
        request_timeout=timeout_s,
        include_authorized_operations=True,
    )
    problems, to_create = [], []
    for name, future in futures.items():
        try:
            description = future.result()
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                if needs.creatable(name):
                    to_create.append(name)
                else:
                    problems.append((f"topic {name!r} does not exist", needs.missing_fix(name)))
            elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                problems.append(_denied(name, {AclOperation.DESCRIBE}))
            else:
                problems.append((f"cannot describe topic {name!r}: {describe(err)}", "retry"))
            continue
        granted = set(description.authorized_operations or needs.topics[name])
        lacking = needs.topics[name] - granted - {AclOperation.ALL}
        if lacking and AclOperation.ALL not in granted:
            problems.append(_denied(name, lacking))
    return problems + _creation_problems(admin, to_create, timeout_s)


def _creation_problems(
    admin: AdminClient, names: list[str], timeout_s: float
) -> list[tuple[str, str]]:
    """Create permission on topics k2k would create, asked with ``validate_only`` (the broker
    authorizes and validates, and creates nothing). Only refusals for authorization count:
    the real creation reports its other errors with the settings it uses."""
    if not names:
        return []
    topics = [NewTopic(name, num_partitions=1, replication_factor=-1) for name in names]
    futures = admin.create_topics(topics, validate_only=True, request_timeout=timeout_s)
    problems = []
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                problems.append(_denied(name, {AclOperation.CREATE}))
    return problems


def _denied(topic: str, operations: Iterable[AclOperation]) -> tuple[str, str]:
    ops = ", ".join(sorted(op.name.title() for op in operations))
    return (
        f"the principal may not {ops} topic {topic!r}",
        f"grant it ACLs for {ops} on that topic (kafka-acls --add --operation ...)",
    )


def _source_needs(cfg: PipelineConfig) -> Callable[[ClusterMetadata], TopicNeeds]:
    """The selected source topics; listed ones must exist. Read-only: Describe and Read."""
    selection, router = cfg.topic_selection(), cfg.topic_router()

    def needs(metadata: ClusterMetadata) -> TopicNeeds:
        listed = cfg.replication.source.topic
        names = set(metadata.topics) | (set() if isinstance(listed, str) else set(listed))
        chosen = [t for t in names if selection.should_replicate(t) and router.route(t)]
        return TopicNeeds(
            dict.fromkeys(chosen, _SOURCE_OPS),
            missing_fix=lambda t: (
                f"create {t!r} on the source, or remove it from replication.source.topic "
                "(the principal needs Describe on it to see it)"
            ),
        )

    return needs


def _target_needs(
    cfg: PipelineConfig, source: ClusterMetadata | None
) -> Callable[[ClusterMetadata], TopicNeeds]:
    """Control topics (read and written) and the routes of the source topics (written)."""
    control = {cfg.coordination.commit.topic, cfg.coordination.assignment.topic}
    if cfg.features.offset_mapping:
        control.add(cfg.offset_mapping.topic)
    routed: set[str] = set()
    if source is not None:
        selection, router = cfg.topic_selection(), cfg.topic_router()
        routed = {
            target
            for t in source.topics
            if selection.should_replicate(t) and (target := router.route(t)) is not None
        }

    # MM2's topics: written, and created when missing, as MM2 does.
    mm2_topics = set()
    if cfg.features.heartbeats:
        mm2_topics.add(cfg.heartbeats.topic)
    if cfg.features.checkpoints:
        mm2_topics.add(cfg.checkpoints_topic())
    routed |= mm2_topics

    def creatable(topic: str) -> bool:
        if topic in control:
            return cfg.features.auto_create_control_topics
        return cfg.features.auto_create_topics or topic in mm2_topics

    def missing_fix(topic: str) -> str:
        flag = "autoCreateControlTopics" if topic in control else "autoCreateTopics"
        return f"create it on the target, or enable features.{flag}"

    def needs(_metadata: ClusterMetadata) -> TopicNeeds:
        ops = {t: _TARGET_OPS for t in routed - control}
        ops.update(dict.fromkeys(control, _CONTROL_OPS))
        return TopicNeeds(ops, creatable, missing_fix)

    return needs


def report(diagnoses: Iterable[Diagnosis], log: logging.Logger) -> None:
    """Log each step's line: passed ones at INFO, the failing one at ERROR."""
    for diagnosis in diagnoses:
        for step in diagnosis.steps:
            log.log(logging.INFO if step.ok else logging.ERROR, "%s", step.line())


@contextmanager
def diagnosed_on_failure(cfg: PipelineConfig, log: logging.Logger) -> Iterator[None]:
    """Around the first requests of ``k2k start``: when one fails with a
    :class:`~k2k.errors.ClusterError` and ``features.checkKafkaConnectionOnStartup`` is
    enabled, log the steps of both clusters and fail with their one-line summary instead
    (the original error when every step passes: not a connection problem)."""
    try:
        yield
    except ClusterError as exc:
        if not cfg.features.check_kafka_connection_on_startup:
            raise
        log.warning("%s; checking the connections step by step", exc)
        diagnoses = diagnose(cfg)
        report(diagnoses, log)
        line = summary(diagnoses)
        if line is None:
            raise
        raise ClusterError(line) from exc
