"""The typed pipeline model: K2K's YAML layout (camelCase keys) as snake_case Python attributes.

This module, with the sections it shares with the Offset Mapping app (:mod:`k2k.config.topics`,
:mod:`k2k.config.mapping`; the app's own model is :mod:`k2k.config.offset_mapping`), is the
single home of every default and of every field's description; ``docs/config.md`` is generated
from them (``python -m k2k.config.reference``). Models are frozen: the configuration is read by
the planner and shipped to Spark tasks, and nothing may change it on the way. Cross-field rules live in ``model_validator(mode="after")`` methods of the smallest
model that sees all fields involved, so that problems are reported under the right key path.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    PlainSerializer,
    SecretStr,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from k2k.config import clients
from k2k.config.base import K2KModel, Policy, license_field
from k2k.config.base import raise_problems as _raise
from k2k.config.bidirectional import Bidirectional
from k2k.config.checkpoints import Checkpoints, checkpoints_topic
from k2k.config.durations import format_duration
from k2k.config.errors import Problem, describe, problems_error, suggest_key
from k2k.config.fields import (
    Count,
    Duration,
    Flag,
    FreeMapping,
    StrMap,
    TopicName,
    check_topic_name,
    parse_flag,
    regex_or_names,
)
from k2k.config.heartbeats import Heartbeats
from k2k.config.hints import FieldDoc
from k2k.config.mapping import OffsetMappingSettings
from k2k.config.metrics import PipelineMetrics
from k2k.config.routing import (
    FORMS,
    ExplicitTopicMap,
    PolicyRule,
    SameTopicName,
    SinkTopic,
    parse_sink_topic,
    routing_to_yaml,
)
from k2k.config.schema_mapping import (
    RegistryConnection,
    SchemaMapping,
    schema_mapping_problems,
)
from k2k.config.topics import TopicCreation
from k2k.errors import ConfigError
from k2k.stages.policies import DEFAULT_SEPARATOR, ReplicationPolicy
from k2k.stages.routing import TopicRouter
from k2k.stages.selection import TopicSelection

__all__ = [
    "NAME_DOC",
    "NAME_PATTERN",
    "AssignmentSettings",
    "CommitSettings",
    "Coordination",
    "CoordinationKafka",
    "ErrorHandling",
    "Features",
    "PipelineConfig",
    "Replication",
    "SinkStage",
    "SourceCluster",
    "SourceKafka",
    "SourceStage",
    "Spark",
    "TargetCluster",
    "TargetKafka",
    "TopicCreation",
    "Tracing",
    "TracingHeaderNames",
    "TracingToggles",
]

KafkaProperties = Annotated[
    dict[str, str | SecretStr],
    FieldDoc(
        "map of Kafka client properties",
        "a mapping of Kafka client property names (Java or librdkafka spelling) to values",
    ),
]

# --- features and tracing ---------------------------------------------------------------------


class TracingToggles(K2KModel):
    """Which tracing headers the sink stage adds to every replicated record.

    YAML ``features.tracingHeaders`` is ``enabled`` / ``disabled`` (all four) or a mapping of
    the four names to ``enabled`` / ``disabled`` (missing ones are disabled).
    """

    topic: Flag = Field(
        False, description="Add the source topic name (header `tracing.headers.topic`)."
    )
    partition: Flag = Field(
        False, description="Add the source partition number (header `tracing.headers.partition`)."
    )
    offset: Flag = Field(
        False, description="Add the source offset (header `tracing.headers.offset`)."
    )
    pipeline: Flag = Field(
        False, description="Add the pipeline name (header `tracing.headers.pipeline`)."
    )

    @model_validator(mode="before")
    @classmethod
    def _all_at_once(cls, data: Any) -> Any:
        if isinstance(data, str | bool):
            return dict.fromkeys(cls.model_fields, parse_flag(data))
        return data

    @model_serializer(mode="wrap")
    def _k2k_form(self, handler: Any) -> Any:
        values = handler(self)
        distinct = set(values.values())
        return distinct.pop() if len(distinct) == 1 else values

    @property
    def any(self) -> bool:
        """True when at least one tracing header is added."""
        return self.topic or self.partition or self.offset or self.pipeline


class Features(K2KModel):
    """Feature switches, ``enabled`` / ``disabled`` as in K2K (YAML booleans also accepted)."""

    exactly_once: Flag = Field(
        False,
        description="Exactly-once replication: each commit batch of records and the progress "
        "of its source partitions are one transaction on the target, and owners are fenced "
        "(see docs/exactly-once.md). When disabled, replication is at-least-once.",
    )
    keep_record_creation_timestamp: Flag = Field(
        True,
        description="Keep each record's source timestamp; when disabled the target broker or "
        "producer assigns a new one.",
    )
    check_kafka_connection_on_startup: Flag = Field(
        False,
        description="When `k2k start` cannot list the source's topics or check the control "
        "topics on the target (within `connectTimeout`), check both clusters step by step "
        "before exiting: DNS of each bootstrap host, TCP connect, TLS handshake (or, without "
        "TLS, that the listener answers plaintext Kafka requests), SASL authentication, "
        "metadata (and the advertised brokers), then existence and ACLs of the needed topics "
        "(writes nothing). One log line per step naming what to fix; the first failing step "
        "per cluster ends its checks and becomes the one-line error. When disabled, the error "
        "is the client's last one. `k2k validate --check` runs the same checks on demand "
        "(docs/operations.md#startup-connection-checks).",
    )
    header_replication: Flag = Field(
        False, description="Copy the source records' headers to the target records."
    )
    schema_mapping: Flag = Field(
        False,
        description="Rewrite the schema ids of wire-format keys and values from the source "
        "registry's to the target registry's, registering schemas there (`schemaMapping`, "
        "`source.registry`, `target.registry`; docs/schema-mapping.md).",
    )
    optimize_offset_commit_partition: Flag = Field(
        True,
        description="Accepted for K2K compatibility; the value changes nothing. (In K2K, "
        "`enabled` sends all of an instance's commit messages to one partition of the commit "
        "topic.) k2k's progress records are compacted, keyed by (commit group, source topic, "
        "source partition) and placed by Kafka's murmur2 hash of that key, so a source "
        "partition's progress always lives in the same commit-topic partition, whichever "
        "instance owns it: readers keep the newest record per key and compaction drops the "
        "older ones. Pinning an instance's records to one partition would put a key in "
        "another partition whenever its source partition changes owner, leaving the old "
        "record there for ever and making the newest one a guess across partitions "
        "(docs/operations.md#commit-topic-partitions).",
    )
    auto_create_control_topics: Flag = Field(
        False,
        description="Create the control topics on the target when missing (settings from "
        "`topicCreation.control`); when disabled a missing control topic stops the pipeline.",
    )
    auto_create_topics: Flag = Field(
        False,
        description="Create missing replicated topics on the target (settings from "
        "`topicCreation.replicated`); when disabled a missing target topic stops the pipeline.",
    )
    validate_control_topic_settings: Flag = Field(
        True,
        description="Check at start that existing control topics are compacted; refuse to "
        "start otherwise.",
    )
    tracing_headers: Annotated[
        TracingToggles,
        FieldDoc(
            "enabled | disabled | {topic, partition, offset, pipeline}",
            "enabled, disabled, or a mapping of topic/partition/offset/pipeline to "
            "enabled/disabled",
        ),
    ] = Field(
        default_factory=TracingToggles,
        description="Add tracing headers to replicated records: `enabled` (all four), "
        "`disabled`, or per header, e.g. `{topic: enabled, offset: enabled}` (missing ones "
        "disabled). Header names come from `tracing.headers`.",
    )
    bidirectional_replication: Flag = Field(
        False,
        description="Loop prevention for two pipelines replicating between two clusters in "
        "both directions (A -> B and B -> A, e.g. with `topic: source`): every replicated record "
        "gets the marker header `bidirectional.headers.bidirectional`, and source records "
        "marked by the other direction are not replicated (their offsets still count as "
        "replicated). See `bidirectional` and docs/operations.md#bidirectional-replication.",
    )
    heartbeats: Flag = Field(
        False,
        description="Emit MirrorMaker 2 heartbeats into the target's `heartbeats` topic every "
        "`heartbeats.interval` (needs `source.alias` and `target.alias`; docs/mm2.md). MM2 "
        "emits them by default; k2k only when enabled.",
    )
    checkpoints: Flag = Field(
        False,
        description="Emit MirrorMaker 2 checkpoints into the target's `<source "
        "alias>.checkpoints.internal` every `checkpoints.interval`: the selected source "
        "groups' committed offsets translated through this pipeline's offset mappings, for "
        "MM2's `RemoteClusterUtils.translateOffsets` (needs `features.offsetMapping`, "
        "`source.alias` and `target.alias`; docs/mm2.md#checkpoints). MM2 emits them by "
        "default (`emit.checkpoints.enabled`); k2k only when enabled.",
    )
    offset_mapping: Flag = Field(
        False,
        description="Write source->target offset mappings (one record per contiguous run of "
        "replicated records) to `offsetMapping.topic` on the target, for `k2k offset-mapping "
        "start` to translate consumer groups. Exactly-once: written in the batch's transaction; "
        "at-least-once: written after the batch's records are acknowledged.",
    )


class TracingHeaderNames(K2KModel):
    """Names of the tracing headers (which ones are added: ``features.tracingHeaders``)."""

    topic: str = Field("k2k_topic", min_length=1, description="Header carrying the source topic.")
    partition: str = Field(
        "k2k_partition", min_length=1, description="Header carrying the source partition."
    )
    offset: str = Field(
        "k2k_offset", min_length=1, description="Header carrying the source offset."
    )
    pipeline: str = Field(
        "k2k_pipeline", min_length=1, description="Header carrying the pipeline name."
    )

    @model_validator(mode="after")
    def _distinct(self) -> TracingHeaderNames:
        problems: list[Problem] = []
        seen: dict[str, str] = {}
        for name in type(self).model_fields:
            header = getattr(self, name)
            if header in seen:
                what = f"same header name as tracing.headers.{seen[header]}"
                problems.append(
                    ((name,), describe(what, got=header, expected="four different header names"))
                )
            else:
                seen[header] = name
        _raise(problems)
        return self


class Tracing(K2KModel):
    """Record tracing settings."""

    headers: TracingHeaderNames = Field(
        default_factory=TracingHeaderNames, description="Tracing header names."
    )


# --- clusters ---------------------------------------------------------------------------------


class _KafkaRoles(K2KModel):
    """Property maps per client role, checked together (see :func:`clients.check_cluster`).

    One before-validator checks the whole ``kafka`` section, so a file with a JKS truststore, a
    Java-only property and a missing ``bootstrap.servers`` gets all three reported at once.
    """

    @model_validator(mode="before")
    @classmethod
    def _check_clients(cls, data: Any) -> Any:
        if data is not None and not isinstance(data, Mapping):
            return data  # pydantic reports the wrong type
        roles = tuple(name for name in cls.model_fields if name != "common")
        maps, problems = clients.check_cluster(data or {}, roles)
        _raise(problems)
        return maps


_COMMON = "Kafka client properties shared by every client of this cluster (a role's map wins)."


class SourceKafka(_KafkaRoles):
    """Kafka client properties for the source cluster (read only: k2k never writes to it)."""

    common: KafkaProperties = Field(default_factory=dict, description=_COMMON)
    consumer: KafkaProperties = Field(
        default_factory=dict, description="Properties of the consumers reading replicated topics."
    )
    admin: KafkaProperties = Field(
        default_factory=dict, description="Properties of the admin client (topic discovery)."
    )


class TargetKafka(_KafkaRoles):
    """Kafka client properties for the target cluster."""

    common: KafkaProperties = Field(default_factory=dict, description=_COMMON)
    producer: KafkaProperties = Field(
        default_factory=dict,
        description="Properties of the producers writing replicated records and progress records.",
    )
    consumer: KafkaProperties = Field(
        default_factory=dict, description="Properties of the consumers reading the control topics."
    )
    admin: KafkaProperties = Field(
        default_factory=dict, description="Properties of the admin client (topic creation, checks)."
    )


_ALIAS_DOC = FieldDoc(
    "string | null", "a name made of letters, digits, '.', '_' and '-' (it is used in topic names)"
)


class _Cluster(K2KModel):
    """Behaviour shared by the source and target sections."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    CLUSTER: ClassVar[str] = ""
    kafka: Any
    alias: Annotated[str | None, _ALIAS_DOC] = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The cluster's name in MirrorMaker 2 terms (MM2's `clusters` entries): "
        "used by `replication.sink.topic: {policy: ...}` and heartbeats. Null: unnamed.",
    )

    def _layers(self, role: str) -> list[tuple[str, clients.Properties]]:
        return [("common", self.kafka.common), (role, getattr(self.kafka, role))]

    def client(self, role: str) -> dict[str, str]:
        """A new dict of librdkafka properties for ``role``: common merged with the role's map."""
        if role not in self.ROLES:
            raise ValueError(
                f"unknown {self.CLUSTER} client role {role!r}; expected one of {self.ROLES}"
            )
        props, problems = clients.translate(self._layers(role))
        if problems:  # pragma: no cover - validation refused these already
            raise ConfigError(
                [f"{self.CLUSTER}.kafka.{'.'.join(map(str, p))}: {t}" for p, t in problems]
            )
        return props

    def bootstrap_servers(self) -> frozenset[str]:
        """The set of bootstrap addresses of this cluster, for comparing clusters."""
        values = [self.client(role).get("bootstrap.servers", "") for role in self.ROLES]
        return frozenset(a.strip().lower() for v in values for a in v.split(",") if a.strip())


_REGISTRY = (
    "The cluster's schema registry (`config: {schema.registry.url: ...}`), used by "
    "`features.schemaMapping`."
)


class SourceCluster(_Cluster):
    """The cluster records are read from."""

    ROLES: ClassVar[tuple[str, ...]] = clients.SOURCE_ROLES
    CLUSTER: ClassVar[str] = "source"

    kafka: Annotated[
        SourceKafka, FieldDoc("mapping", "a mapping with common, consumer and admin property maps")
    ] = Field(
        default_factory=dict,
        validate_default=True,
        description="Kafka clients of the source cluster.",
    )
    registry: RegistryConnection = Field(default_factory=RegistryConnection, description=_REGISTRY)
    connect_timeout: Duration = Field(
        timedelta(seconds=15),
        description="How long k2k waits for the source cluster to answer at start and for "
        "admin calls.",
    )


class TargetCluster(_Cluster):
    """The cluster records are written to; it also holds k2k's control topics."""

    ROLES: ClassVar[tuple[str, ...]] = clients.TARGET_ROLES
    CLUSTER: ClassVar[str] = "target"

    kafka: Annotated[
        TargetKafka,
        FieldDoc("mapping", "a mapping with common, producer, consumer and admin property maps"),
    ] = Field(
        default_factory=dict,
        validate_default=True,
        description="Kafka clients of the target cluster.",
    )
    registry: RegistryConnection = Field(default_factory=RegistryConnection, description=_REGISTRY)
    connect_timeout: Duration = Field(
        timedelta(seconds=15),
        description="How long k2k waits for the target cluster to answer at start and for "
        "admin calls.",
    )


# --- replication stages -----------------------------------------------------------------------

_SELECTION_EXPECTED = (
    "a regular expression matched against whole topic names, or a list of exact topic names"
)


class SourceStage(K2KModel):
    """Which source topics are replicated."""

    name: str = Field("source", min_length=1, description="Label of the stage (logs, metrics).")
    topic: Annotated[
        str | list[str], FieldDoc("regex string | list of topic names", _SELECTION_EXPECTED)
    ] = Field(
        description="A regular expression (Python `re` syntax, which agrees with Java's for the "
        "usual patterns) matched against the whole topic name, e.g. `orders\\..*`; or a list of "
        "exact topic names. Internal topics (`__*`, `.*`, `*.internal`) and k2k's control topics "
        "are never replicated, nor are those `exclude` names. With a replication policy "
        "(`replication.sink.topic: {policy: ...}`) MM2's rules apply on top: also `*-internal` "
        "never, cycles never, heartbeats topics always (docs/mm2.md)."
    )
    discovery_interval: Duration = Field(
        timedelta(seconds=30),
        description="How often, while a lease runs, the source is checked for new matching "
        "topics, added partitions, and deleted or re-created topics (and the target topics "
        "for deletion); a change ends the lease early (docs/operations.md#topic-lifecycle). "
        "Not with `--until-caught-up`, which checks at lease boundaries only.",
    )

    exclude: Annotated[
        str | list[str] | None,
        FieldDoc("regex string | list of topic names | null", _SELECTION_EXPECTED),
    ] = Field(
        None,
        description="Source topics not to replicate although `topic` selects them: a regular "
        "expression matched against the whole topic name, or a list of exact topic names. "
        "Exclude wins over `topic`, e.g. `topic: 'orders\\..*'` with `exclude: "
        "'orders\\.test.*'`; null excludes nothing.",
    )

    @field_validator("topic", mode="before")
    @classmethod
    def _selection(cls, value: Any) -> str | list[str]:
        return _topic_names(value)

    @field_validator("exclude", mode="before")
    @classmethod
    def _exclusion(cls, value: Any) -> str | list[str] | None:
        return None if value is None else _topic_names(value)


def _topic_names(value: Any) -> str | list[str]:
    """A topic selection's value: a valid regex string, or a non-empty list of topic names."""
    return regex_or_names(value, _SELECTION_EXPECTED, check_topic_name)


_PARTITION_SPELLINGS = {
    "source": "source",
    "hash": "hash",
    "key": "hash",
    "murmur2": "hash",
    "producer": "producer",
}
_PARTITION_EXPECTED = "one of: source, hash, producer (also accepted: key, murmur2 for hash)"


class SinkStage(K2KModel):
    """Where replicated records go on the target."""

    name: str = Field("sink", min_length=1, description="Label of the stage (logs, metrics).")
    topic: Annotated[
        SinkTopic,
        PlainSerializer(routing_to_yaml),
        FieldDoc(
            "`source` | topic name | {prefix, suffix} | {map: {...}} | {policy, separator}", FORMS
        ),
    ] = Field(
        default_factory=SameTopicName,
        description="Target topic naming: `source` keeps the source name; `{prefix: 'eu.', "
        "suffix: '.copy'}` wraps it; any other string sends every record to that one topic; "
        "`{map: {orders: orders-dr}}` names each target explicitly (selected topics missing from "
        "the map are not replicated); `{policy: alias, separator: '.'}` names it as "
        "MirrorMaker 2's DefaultReplicationPolicy does (`<source.alias>.<topic>`, cycles "
        "detected by name) and `{policy: identity}` as its IdentityReplicationPolicy (the "
        "source name; cannot detect cycles); both need `source.alias` and `target.alias` and "
        "apply MM2's internal-topic and heartbeats rules to the selection (docs/mm2.md).",
    )
    partition: Annotated[
        Literal["source", "hash", "producer"],
        FieldDoc("source | hash | producer", _PARTITION_EXPECTED),
    ] = Field(
        "source",
        description="`source`: the record keeps its partition number (the target topic needs at "
        "least as many partitions). `hash`: the partition is chosen from the key with Kafka's "
        "murmur2 hash, as a Java producer would (`key` and `murmur2` are accepted spellings). "
        "`producer` (K2K's producer-defined partitioning): the target producer places each "
        "record with its partitioner, librdkafka's `partitioner` in `target.kafka.producer` "
        "(default `murmur2_random`, the Java producer's default placement, so keyed records "
        "land as with `hash`; also `consistent_random`, `random`, `fnv1a_random`, ...; Java's "
        "`partitioner.class` cannot run and is refused). With `hash` and `producer`, null keys "
        "go to a partition chosen at random and kept for `sticky.partitioning.linger.ms` "
        "(librdkafka's sticky partitioning, like the Java producer's): null-keyed records of "
        "one source partition spread over the target partitions and lose their relative order "
        "across them. `k2k verify` expects the murmur2 placement of keyed records.",
    )

    @field_validator("topic", mode="before")
    @classmethod
    def _routing(cls, value: Any) -> SinkTopic:
        return parse_sink_topic(value)

    @field_validator("partition", mode="before")
    @classmethod
    def _partition(cls, value: Any) -> str:
        spelling = (
            _PARTITION_SPELLINGS.get(value.strip().lower()) if isinstance(value, str) else None
        )
        if spelling is None:
            raise problems_error(
                [((), describe("invalid value", got=value, expected=_PARTITION_EXPECTED))]
            )
        return spelling


_STAGES_EXPECTED = "a list with one '- source: {...}' item and one '- sink: {...}' item"


class Replication(K2KModel):
    """The replication stages. YAML: a list of single-key items, ``- source: {...}`` and
    ``- sink: {...}``, exactly one of each (a mapping ``{source: ..., sink: ...}`` is also read).
    """

    source: Annotated[
        SourceStage, FieldDoc("mapping", "one '- source: {...}' item in the replication list")
    ] = Field(description="The source stage.")
    sink: Annotated[
        SinkStage, FieldDoc("mapping", "one '- sink: {...}' item in the replication list")
    ] = Field(description="The sink stage.")

    @model_validator(mode="before")
    @classmethod
    def _from_stage_list(cls, data: Any) -> Any:
        if data is None or isinstance(data, Mapping):
            return data
        if not isinstance(data, list):
            raise problems_error(
                [((), describe("wrong type", got=data, expected=_STAGES_EXPECTED))]
            )
        stages: dict[str, Any] = {}
        problems: list[Problem] = []
        for index, item in enumerate(data):
            if not isinstance(item, Mapping) or len(item) != 1:
                what = "not a single-key stage item"
                problems.append(((index,), describe(what, got=item, expected=_STAGES_EXPECTED)))
                continue
            ((kind, body),) = item.items()
            if kind not in ("source", "sink"):
                problems.append(((index, str(kind)), suggest_key(str(kind), ["source", "sink"])))
            elif kind in stages:
                what = f"a second {kind!r} stage"
                problems.append(
                    ((index, kind), describe(what, got=body, expected=f"exactly one {kind} item"))
                )
            else:
                stages[kind] = body
        _raise(problems)
        return stages

    @model_serializer(mode="wrap")
    def _stage_list(self, handler: Any) -> Any:
        stages = handler(self)
        return [{"source": stages["source"]}, {"sink": stages["sink"]}]


# --- coordination -----------------------------------------------------------------------------


#: ``coordination.commit.batchSize`` when exactly-once and unset: transactions of K2K's 1000
#: records per partition leave a backlog bound by the brokers' transaction work
#: (docs/exactly-once.md#batch-size).
EXACTLY_ONCE_BATCH_SIZE = 10_000


class CommitSettings(K2KModel):
    """Progress records (the commit control topic)."""

    topic: TopicName = Field(
        "__k2k_consumer-offsets",
        description="Compacted control topic on the target holding one progress record per "
        "(commit group, source topic, partition).",
    )
    batch_size: Count = Field(
        1000,
        ge=1,
        description="Records replicated per partition between two progress records. With "
        f"`features.exactlyOnce` and no value given, {EXACTLY_ONCE_BATCH_SIZE} where K2K uses "
        "1000: each batch is one transaction (docs/exactly-once.md#batch-size).",
    )
    batch_timeout: Duration = Field(
        timedelta(seconds=2),
        description="Longest time between two progress records while records flow.",
    )
    sync_timeout: Duration = Field(
        timedelta(seconds=30),
        description="How long reading the progress records at start may take (then "
        "`errorHandling.onCommitSyncTimeout` applies).",
    )
    group: str | None = Field(
        None,
        min_length=1,
        description="Commit group under which progress is recorded; null means the pipeline "
        "`name`. Pipelines sharing a commit group share progress.",
    )


class AssignmentSettings(K2KModel):
    """Ownership of source partitions (the assignment control topic)."""

    topic: TopicName = Field(
        "__k2k_assignment",
        description="Compacted control topic on the target recording which runner owns which "
        "source partitions.",
    )
    grace_window: Duration = Field(
        timedelta(seconds=15),
        description="How long a new owner waits for the previous owner of a partition to "
        "release it before fencing that owner.",
    )
    fencing_max_parallelism: Count = Field(
        5, ge=1, description="Most previous owners fenced at the same time."
    )


_SAME_KEYS_COMMIT = (
    "Same keys as `coordination.commit` (the Helm chart's spelling); giving a key in both "
    "places with different values is an error."
)
_SAME_KEYS_ASSIGNMENT = (
    "Same keys as `coordination.assignment` (the Helm chart's spelling); giving a key in both "
    "places with different values is an error."
)


class CoordinationKafka(K2KModel):
    """``coordination.kafka``: the K2K Helm chart's level, accepted as an alternative spelling."""

    charset: str = Field(
        "UTF-8",
        description="Accepted for K2K compatibility; k2k writes its control records in UTF-8.",
    )
    consumer: KafkaProperties = Field(
        default_factory=dict,
        description="Accepted for K2K compatibility and checked like other property maps; the "
        "control consumers use `target.kafka.consumer`.",
    )
    commit: Annotated[CommitSettings | None, FieldDoc("mapping", "a mapping")] = Field(
        None, description=_SAME_KEYS_COMMIT
    )
    assignment: Annotated[AssignmentSettings | None, FieldDoc("mapping", "a mapping")] = Field(
        None, description=_SAME_KEYS_ASSIGNMENT
    )

    @field_validator("charset")
    @classmethod
    def _known_charset(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise problems_error(
                [((), describe("unknown charset", got=value, expected="UTF-8"))]
            ) from None
        return value

    @field_validator("consumer", mode="before")
    @classmethod
    def _check_properties(cls, value: Any) -> dict[str, str | SecretStr]:
        props, problems = clients.check_map(value)
        _raise(problems)
        return props


def _shown(value: Any) -> Any:
    return format_duration(value) if isinstance(value, timedelta) else value


class Coordination(K2KModel):
    """Control topics on the target: progress (commit) and partition ownership (assignment).

    The two may be one topic (as K2K allows): the key layouts are disjoint and each reader
    skips the other's records (docs/formats.md#sharing-one-topic).

    Both spellings are read: ``coordination.commit`` and the Helm chart's
    ``coordination.kafka.commit`` (likewise ``assignment``); the effective configuration shows
    the latter. In Python the merged settings are ``coordination.commit`` / ``.assignment``.
    """

    commit: CommitSettings = Field(default_factory=CommitSettings, description="Progress records.")
    assignment: AssignmentSettings = Field(
        default_factory=AssignmentSettings, description="Partition ownership and fencing."
    )
    kafka: CoordinationKafka = Field(
        default_factory=CoordinationKafka,
        description="The Helm chart's spelling (`coordination.kafka.commit` ...).",
    )

    @model_validator(mode="after")
    def _merge_spellings(self) -> Coordination:
        problems: list[Problem] = []
        written_under_kafka: dict[str, set[str]] = {}
        for section in ("commit", "assignment"):
            flat: K2KModel = getattr(self, section)
            nested: K2KModel | None = getattr(self.kafka, section)
            if nested is None:
                continue
            written_under_kafka[section] = set(nested.model_fields_set)
            update: dict[str, Any] = {}
            for name in type(nested).model_fields:
                if name not in nested.model_fields_set:
                    continue
                key = to_camel(name)
                mine, theirs = getattr(flat, name), getattr(nested, name)
                if name in flat.model_fields_set and mine != theirs:
                    other = f"coordination.kafka.{section}.{key}"
                    what = f"conflicts with {other} (set to {_shown(theirs)!r})"
                    expected = "one of the two spellings, or the same value in both"
                    problems.append(
                        ((section, key), describe(what, got=_shown(mine), expected=expected))
                    )
                update[name] = theirs
            object.__setattr__(self, section, flat.model_copy(update=update))
        _raise(problems)
        if written_under_kafka:
            object.__setattr__(
                self, "kafka", self.kafka.model_copy(update={"commit": None, "assignment": None})
            )
        return self

    @model_serializer(mode="wrap")
    def _helm_layout(self, handler: Any) -> Any:
        data = handler(self)
        kafka = {k: v for k, v in data["kafka"].items() if k not in ("commit", "assignment")}
        return {"kafka": {**kafka, "commit": data["commit"], "assignment": data["assignment"]}}


class ErrorHandling(K2KModel):
    """What to do when a control-topic operation fails."""

    on_commit_sync_timeout: Policy = Field(
        "fail",
        description="Progress records could not be read within `coordination.commit.syncTimeout`: "
        "`fail` stops the pipeline (unless a cluster does not answer at that moment: an "
        "outage is waited out, `errorHandling.maxOutage`); `ignore` logs it and continues "
        "with the progress read so far (partitions whose progress was not read may "
        "replicate records again).",
    )
    on_control_message_deserialization_error: Policy = Field(
        "fail",
        description="A control-topic record cannot be decoded (corrupt, or written by an "
        "incompatible version): `fail` stops the pipeline; `ignore` skips the record.",
    )
    on_source_records_lost: Literal["fail", "continue"] = Field(
        "fail",
        description="Source records were deleted before they were replicated, by retention "
        "or with their topic (deleted, or deleted and created again): `fail` stops, naming the "
        "lost range and how to go on (for retention the `k2k offsets reset` command); "
        "`continue` moves on (to the earliest offset still there, or without the topic) and "
        "logs the lost range as a warning, counted in `k2k.source.records.lost` with `-t`. A "
        "committed position past a partition's end without a topic id to explain it always "
        "stops.",
    )
    max_outage: Duration | None = Field(
        None,
        description="How long a running pipeline waits for a cluster that does not answer "
        "(down, restarting, no leader) before it stops with an error; null waits as long "
        "as it takes. At start-up an unreachable cluster fails within `connectTimeout`. "
        "See docs/operations.md#outages.",
    )


# --- Spark ------------------------------------------------------------------------------------


class Spark(K2KModel):
    """Where and how wide the replication job runs."""

    master: str = Field(
        "local[*]",
        min_length=1,
        description="Spark master URL when `k2k start` starts Spark itself: `local[*]` "
        "(embedded), `spark://host:7077`, `yarn`, `k8s://...`. Ignored under `spark-submit` "
        "(its `--master` and `spark-defaults.conf` decide; see docs/spark.md).",
    )
    conf: StrMap = Field(
        default_factory=dict,
        description="Extra Spark configuration, e.g. `spark.executor.memory: 2g` (values are "
        "passed as strings). Under `spark-submit`, its own settings win over these.",
    )
    parallelism: Count | None = Field(
        None,
        ge=1,
        description="Most runner groups (concurrent Spark tasks); null means Spark's default "
        "parallelism. With a local master at most its cores (a group beyond them would wait "
        "for a free core until the lease ends).",
    )
    lease_duration: Duration = Field(
        timedelta(minutes=5),
        description="How long one Spark job (lease) runs before the planner re-plans; new topics "
        "and a new task layout take effect at lease boundaries.",
    )
    control_host: str | None = Field(
        None,
        min_length=1,
        description="Address executors connect to for the lease channel (the driver's small "
        "TCP service that tells runners to end a lease; `k2k verify`'s tasks report their "
        "progress over it). Null: `127.0.0.1` for a local master, "
        "else `spark.driver.host`. With a non-local master the channel listens on every "
        "interface.",
    )
    control_port: Count | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of the lease channel on the driver. Null: any free port; set it when "
        "a firewall between executors and driver must allow it (like `spark.driver.port`).",
    )


# --- the pipeline -----------------------------------------------------------------------------

#: The rule for ``name`` (also the Offset Mapping app's): it ends up in Kafka ids.
NAME_PATTERN = r"^[A-Za-z0-9._-]+$"
NAME_DOC = FieldDoc(
    "string", "a name made of letters, digits, '.', '_' and '-' (it is used in Kafka ids)"
)


#: librdkafka's and the Java client's default ``transaction.timeout.ms``.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


class PipelineConfig(K2KModel):
    """One replication pipeline, as loaded from one or more YAML files."""

    name: Annotated[str, NAME_DOC] = Field(
        min_length=1,
        pattern=NAME_PATTERN,
        description="Pipeline identity (required). Used in transactional ids, the default commit "
        "group and tracing headers.",
    )
    license: FreeMapping | None = license_field()
    features: Features = Field(default_factory=Features, description="Feature switches.")
    source: Annotated[
        SourceCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(description="The cluster records are read from (required).")
    target: Annotated[
        TargetCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(description="The cluster records are written to (required).")
    replication: Annotated[Replication, FieldDoc("list of stages", _STAGES_EXPECTED)] = Field(
        description="The source and sink stages (required)."
    )
    coordination: Coordination = Field(
        default_factory=Coordination, description="Control topics on the target."
    )
    tracing: Tracing = Field(default_factory=Tracing, description="Record tracing.")
    schema_mapping: SchemaMapping = Field(
        default_factory=SchemaMapping,
        description="Which topics' keys and values get their schema ids rewritten "
        "(`features.schemaMapping`), subjects and failure policies.",
    )
    bidirectional: Bidirectional = Field(
        default_factory=Bidirectional,
        description="The marker of bidirectional replication (`features.bidirectionalReplication`).",
    )
    offset_mapping: OffsetMappingSettings = Field(
        default_factory=OffsetMappingSettings,
        description="The offset-mapping topic (`features.offsetMapping`) and its retention.",
    )
    heartbeats: Heartbeats = Field(
        default_factory=Heartbeats,
        description="MirrorMaker 2 heartbeats: emitted (`features.heartbeats`) and replicated.",
    )
    checkpoints: Checkpoints = Field(
        default_factory=Checkpoints,
        description="MirrorMaker 2 checkpoints (`features.checkpoints`): interval and groups.",
    )
    error_handling: ErrorHandling = Field(
        default_factory=ErrorHandling, description="Failure policies."
    )
    metrics: PipelineMetrics = Field(
        default_factory=PipelineMetrics,
        description="Metric name prefixes and the metrics topic (`-t/--telemetry`).",
    )
    topic_creation: TopicCreation = Field(
        default_factory=TopicCreation, description="Topic creation on the target."
    )
    spark: Spark = Field(default_factory=Spark, description="The Spark job.")

    @model_validator(mode="after")
    def _exactly_once_batch_size(self) -> PipelineConfig:
        commit = self.coordination.commit
        if self.features.exactly_once and "batch_size" not in commit.model_fields_set:
            larger = commit.model_copy(update={"batch_size": EXACTLY_ONCE_BATCH_SIZE})
            coordination = self.coordination.model_copy(update={"commit": larger})
            object.__setattr__(self, "coordination", coordination)
        return self

    @model_validator(mode="after")
    def _cross_checks(self) -> PipelineConfig:
        problems = self._routing_problems()
        if self.offset_mapping.topic in (
            self.coordination.commit.topic,
            self.coordination.assignment.topic,
        ):
            what = "same topic as a coordination topic"
            expected = (
                "a topic of its own (mappings are trimmed, coordination topics are compacted)"
            )
            problems.append(
                (
                    ("offsetMapping", "topic"),
                    describe(what, got=self.offset_mapping.topic, expected=expected),
                )
            )
        if self.features.exactly_once:
            problems.extend(self._exactly_once_problems())
        problems.extend(
            schema_mapping_problems(
                self.features.schema_mapping,
                self.source.registry,
                self.target.registry,
                self.schema_mapping,
                self._transaction_timeout_ms() if self.features.exactly_once else None,
            )
        )
        problems.extend(self._partitioner_problems())
        if self.features.bidirectional_replication:
            problems.extend(self._bidirectional_problems())
        problems.extend(self._alias_problems())
        if self.features.checkpoints and not self.features.offset_mapping:
            what = "needs features.offsetMapping: enabled (checkpoints are translated offsets)"
            expected = "features.offsetMapping: enabled, or features.checkpoints: disabled"
            problems.append(
                (("features", "checkpoints"), describe(what, got="enabled", expected=expected))
            )
        _raise(problems)
        return self

    def _routing_problems(self) -> list[Problem]:
        """The sink's topic routing against the source selection and the clusters: every
        listed topic mapped, and no record written back into the topic it came from."""
        problems: list[Problem] = []
        routing, selection = self.replication.sink.topic, self.replication.source.topic
        if isinstance(routing, ExplicitTopicMap) and isinstance(selection, list):
            chosen = self.topic_selection()
            for index, name in enumerate(selection):
                if name not in routing.mapping and chosen.should_replicate(name):
                    what = "selected topic missing from replication.sink.topic.map"
                    expected = (
                        "an entry for every listed topic (unmapped topics are not replicated)"
                    )
                    problems.append(
                        (
                            ("replication", "source", "topic", index),
                            describe(what, got=name, expected=expected),
                        )
                    )
        if (
            isinstance(routing, SameTopicName)
            and self.source.bootstrap_servers() & self.target.bootstrap_servers()
        ):
            what = (
                "would write every record back into the topic it was read from (source and "
                "target share bootstrap.servers)"
            )
            expected = "a prefix/suffix, a static topic or a map while both clusters are the same"
            problems.append(
                (
                    ("replication", "sink", "topic"),
                    describe(what, got=routing_to_yaml(routing), expected=expected),
                )
            )
        return problems

    def _alias_problems(self) -> list[Problem]:
        """A replication policy and heartbeats name both clusters, by two different aliases
        that the policy can read back out of topic names."""
        routing = self.replication.sink.topic
        needs = (
            "replication.sink.topic: {policy: ...}"
            if isinstance(routing, PolicyRule)
            else "features.heartbeats: enabled"
            if self.features.heartbeats
            else "features.checkpoints: enabled"
            if self.features.checkpoints
            else None
        )
        if needs is None:
            return []
        separator = routing.separator if isinstance(routing, PolicyRule) else None
        problems: list[Problem] = []
        for side in ("source", "target"):
            alias = getattr(self, side).alias
            if alias is None:
                what = f"missing (required by {needs})"
                expected = "the cluster's alias, e.g. the name MM2's `clusters` gives it"
                problems.append(((side, "alias"), describe(what, got=alias, expected=expected)))
            elif separator is not None and separator in alias:
                what = f"contains the policy's separator {separator!r}"
                expected = "an alias without it (topic names could not be read back)"
                problems.append(((side, "alias"), describe(what, got=alias, expected=expected)))
        if not problems and self.source.alias == self.target.alias:
            what = "same alias as source.alias"
            expected = "a different alias for each cluster"
            problems.append(
                (("target", "alias"), describe(what, got=self.target.alias, expected=expected))
            )
        return problems

    def _bidirectional_problems(self) -> list[Problem]:
        """The marker header must not be a tracing header: each would overwrite the other."""
        marker = self.bidirectional.headers.bidirectional
        on, names = self.features.tracing_headers, self.tracing.headers
        return [
            (
                ("bidirectional", "headers", "bidirectional"),
                describe(
                    f"same header name as tracing.headers.{which}",
                    got=marker,
                    expected="a header name of its own",
                ),
            )
            for which in ("topic", "partition", "offset", "pipeline")
            if getattr(on, which) and getattr(names, which) == marker
        ]

    def _partitioner_problems(self) -> list[Problem]:
        """librdkafka's ``partitioner`` decides only with ``partition: producer``: elsewhere
        it would be silently overridden (``hash``) or unused (``source``)."""
        partition = self.replication.sink.partition
        if partition == "producer":
            return []
        kafka = self.target.kafka
        what = f"has no effect with replication.sink.partition: {partition}"
        expected = "partition: producer, to let the target producer's partitioner place records"
        return [
            (
                ("target", "kafka", layer, "partitioner"),
                describe(what, got=props[key], expected=expected),
            )
            for layer, props in (("common", kafka.common), ("producer", kafka.producer))
            for key in props
            if key == "partitioner"
        ]

    def _exactly_once_problems(self) -> list[Problem]:
        """Transactions must outlive a commit batch, and records must not outlive them."""
        props = self.target.client("producer")
        path = ("target", "kafka", "producer")
        txn_ms = self._transaction_timeout_ms()
        out: list[Problem] = []
        batch_ms = self.coordination.commit.batch_timeout.total_seconds() * 1000
        if batch_ms * 2 > txn_ms:
            out.append(
                (
                    ("coordination", "commit", "batchTimeout"),
                    describe(
                        f"too long for exactly-once: a transaction lasts up to one batch and "
                        f"the producer's transaction.timeout.ms is {txn_ms}",
                        got=format_duration(self.coordination.commit.batch_timeout),
                        expected="at most half of transaction.timeout.ms (default 60000)",
                    ),
                )
            )
        msg_ms = props.get("message.timeout.ms")
        if msg_ms is not None and int(msg_ms) > txn_ms:
            out.append(
                (
                    (*path, "delivery.timeout.ms"),
                    describe(
                        "longer than transaction.timeout.ms (exactly-once)",
                        got=msg_ms,
                        expected=f"at most {txn_ms}",
                    ),
                )
            )
        return out

    def _transaction_timeout_ms(self) -> int:
        props = self.target.client("producer")
        return int(props.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))

    @property
    def commit_group(self) -> str:
        """The group progress is recorded under: ``coordination.commit.group`` or the name."""
        return self.coordination.commit.group or self.name

    def topic_selection(self) -> TopicSelection:
        """The source topics this pipeline replicates: the selection, never its own control
        topics."""
        source = self.replication.source
        return TopicSelection(
            source.topic,
            excluded=[self.coordination.commit.topic, self.coordination.assignment.topic],
            exclude=source.exclude,
            policy=self.replication_policy(),
            replicate_heartbeats=self.heartbeats.replicate,
        )

    def replication_policy(self) -> ReplicationPolicy | None:
        """The MM2 replication policy of ``replication.sink.topic`` between the two
        aliases; None when the sink names topics another way."""
        rule = self.replication.sink.topic
        if not isinstance(rule, PolicyRule):
            return None
        assert self.source.alias is not None and self.target.alias is not None  # validated
        return rule.bind(self.source.alias, self.target.alias)

    def checkpoints_topic(self) -> str:
        """The target topic MM2 checkpoints go to: ``<source alias>.checkpoints.internal``,
        with the policy's separator when it has one (MM2's internal-topic naming)."""
        assert self.source.alias is not None  # validated with features.checkpoints
        routing = self.replication.sink.topic
        separator = routing.separator if isinstance(routing, PolicyRule) else DEFAULT_SEPARATOR
        return checkpoints_topic(self.source.alias, separator)

    def topic_router(self) -> TopicRouter:
        """What maps each source topic to its target topic (``replication.sink.topic``)."""
        routing = self.replication.sink.topic
        if isinstance(routing, PolicyRule):
            policy = self.replication_policy()
            assert policy is not None
            return policy
        return routing

    def start_offset_kind(self) -> Literal["earliest", "latest"]:
        """Where a partition without progress starts: the source consumer's
        ``auto.offset.reset``, earliest unless it says latest."""
        reset = self.source_client("consumer").get("auto.offset.reset", "earliest")
        return "latest" if reset in ("latest", "largest", "end") else "earliest"

    def source_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a source client; ``role`` is ``consumer`` or ``admin``."""
        return self.source.client(role)

    def target_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a target client: ``producer``, ``consumer`` or ``admin``."""
        return self.target.client(role)
