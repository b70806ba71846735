"""The typed pipeline model: K2K's YAML layout (camelCase keys) as snake_case Python attributes.

This module holds the top-level :class:`PipelineConfig` and the rules that need several of its
sections at once. Each section has its own module (:mod:`~k2k.config.features`,
:mod:`~k2k.config.clusters`, :mod:`~k2k.config.replication`, :mod:`~k2k.config.coordination`,
:mod:`~k2k.config.tracing`, :mod:`~k2k.config.error_handling`, :mod:`~k2k.config.spark`, and
those shared with the Offset Mapping app, :mod:`~k2k.config.topics` and
:mod:`~k2k.config.mapping`); together they are the single home of every default and of every
field's description, from which ``docs/config.md`` is generated (``python -m
k2k.config.reference``). Models are frozen: the configuration is read by the planner and shipped
to Spark tasks, and nothing may change it on the way. Cross-field rules live in
``model_validator(mode="after")`` methods of the smallest model that sees all fields involved,
so that problems are reported under the right key path.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from k2k.config.base import K2KModel, license_field
from k2k.config.base import raise_problems as _raise
from k2k.config.bidirectional import Bidirectional
from k2k.config.checkpoints import Checkpoints, SyncGroupOffsets, checkpoints_topic
from k2k.config.clusters import SourceCluster, TargetCluster
from k2k.config.coordination import EXACTLY_ONCE_BATCH_SIZE, Coordination
from k2k.config.durations import format_duration
from k2k.config.error_handling import ErrorHandling
from k2k.config.errors import Problem, describe
from k2k.config.features import Features
from k2k.config.fields import FreeMapping
from k2k.config.heartbeats import Heartbeats
from k2k.config.hints import FieldDoc
from k2k.config.identical import identical_offsets_problems
from k2k.config.inert import LICENSE, inert_keys
from k2k.config.mapping import OffsetMappingSettings
from k2k.config.metrics import PipelineMetrics
from k2k.config.replication import STAGES_EXPECTED, Replication
from k2k.config.routing import ExplicitTopicMap, PolicyRule, SameTopicName, routing_to_yaml
from k2k.config.schema_mapping import SchemaMapping, schema_mapping_problems
from k2k.config.spark import Spark
from k2k.config.topics import TopicCreation
from k2k.config.tracing import Tracing
from k2k.config.transforms import JsonStep as _JsonStep
from k2k.stages.policies import DEFAULT_SEPARATOR, ReplicationPolicy
from k2k.stages.routing import TopicRouter
from k2k.stages.selection import TopicSelection

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "NAME_DOC",
    "NAME_PATTERN",
    "PipelineConfig",
]

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
    license: Annotated[FreeMapping | None, LICENSE] = license_field()
    features: Features = Field(default_factory=Features, description="Feature switches.")
    source: Annotated[
        SourceCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(description="The cluster records are read from (required).")
    target: Annotated[
        TargetCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(description="The cluster records are written to (required).")
    replication: Annotated[Replication, FieldDoc("list of stages", STAGES_EXPECTED)] = Field(
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
    sync_group_offsets: SyncGroupOffsets = Field(
        default_factory=SyncGroupOffsets,
        description="Group offset sync (`features.syncGroupOffsets`): interval and groups.",
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
                self.transaction_timeout_ms() if self.features.exactly_once else None,
            )
        )
        problems.extend(self._partitioner_problems())
        problems.extend(identical_offsets_problems(self))
        problems.extend(self._transform_problems())
        if self.features.bidirectional_replication:
            problems.extend(self._bidirectional_problems())
        problems.extend(self._alias_problems())
        if self.features.sync_group_offsets and not self.features.offset_mapping:
            what = "needs features.offsetMapping: enabled (groups move through the mappings)"
            expected = "features.offsetMapping: enabled, or features.syncGroupOffsets: disabled"
            problems.append(
                (("features", "syncGroupOffsets"), describe(what, got="enabled", expected=expected))
            )
        if self.features.checkpoints and not self.features.offset_mapping:
            what = "needs features.offsetMapping: enabled (checkpoints are translated offsets)"
            expected = "features.offsetMapping: enabled, or features.checkpoints: disabled"
            problems.append(
                (("features", "checkpoints"), describe(what, got="enabled", expected=expected))
            )
        _raise(problems)
        return self

    def _transform_problems(self) -> list[Problem]:
        """Transform steps that cannot work with the rest of the pipeline."""
        if not self.features.schema_mapping:
            return []
        return [
            (
                ("replication", "transforms", i),
                describe(
                    f"{item.step.kind} rewrites JSON, and schema mapping's records are "
                    "Schema Registry framed, not JSON",
                    expected="header steps and filters with features.schemaMapping",
                ),
            )
            for i, item in enumerate(self.replication.transforms)
            if isinstance(item.step, _JsonStep)
        ]

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
        txn_ms = self.transaction_timeout_ms()
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

    def transaction_timeout_ms(self) -> int:
        """The target producer's ``transaction.timeout.ms`` (its default when not set)."""
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

    def inert_keys(self) -> list[tuple[str, str]]:
        """(key path, why) for each key this file sets that has no effect in k2k."""
        return inert_keys(self)

    def source_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a source client; ``role`` is ``consumer`` or ``admin``."""
        return self.source.client(role)

    def target_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a target client: ``producer``, ``consumer`` or ``admin``."""
        return self.target.client(role)

    def control_consumer(self) -> dict[str, str]:
        """librdkafka properties for the readers of the control topics (progress, assignment,
        offset mappings, checkpoints): the target's consumer, with ``coordination.kafka.consumer``
        over it."""
        own = self.coordination.kafka.consumer
        return self.target.client("consumer", [("coordination.kafka.consumer", own)])
