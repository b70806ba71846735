"""The Offset Mapping app's configuration (``k2k offset-mapping start``), in K2K's layout.

The app reads the committed offsets of consumer groups on the source cluster, translates them
with the mappings the replicator writes to ``offsetMapping.topic`` and commits the result to
the same-named groups on the target. Its file shares most sections with the replicator's
(``source``, ``target``, ``offsetMapping``, ``topicCreation``), so ``-f pipeline.yaml -f
offset-mapping.yaml`` works: :func:`k2k.config.loader.load_offset_mapping_app` drops the
replicator-only keys before validation (:func:`app_keys_only`).

::

    from k2k.config import load_offset_mapping_app
    app = load_offset_mapping_app(["pipeline.yaml", "offset-mapping.yaml"])
    app.groups.selects("my-app-1")           # True when the group is translated
    app.topic_creation.control.offset_mapping()   # how to create the mapping topic
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator

from k2k.config.base import K2KModel, Policy, license_field, one_spelling, raise_problems
from k2k.config.checkpoints import GROUPS_EXPECTED as _GROUPS_EXPECTED
from k2k.config.checkpoints import group_selection as _group_selection
from k2k.config.clusters import SourceCluster, TargetCluster
from k2k.config.error_handling import ErrorHandling
from k2k.config.errors import describe
from k2k.config.features import Features
from k2k.config.fields import Count, Duration, Flag, FreeMapping
from k2k.config.hints import FieldDoc
from k2k.config.inert import LICENSE, Inert, inert_keys
from k2k.config.mapping import OffsetMappingSettings
from k2k.config.metrics import AppMetricPrefixes, AppMetrics, MetricsKafka
from k2k.config.model import NAME_DOC, NAME_PATTERN, PipelineConfig
from k2k.config.topics import TopicCreation
from k2k.stages.selection import NameSelection

__all__ = [
    "AppConfiguration",
    "AppErrorHandling",
    "AppFeatures",
    "AppMetricPrefixes",
    "AppMetrics",
    "Groups",
    "MetricsKafka",
    "OffsetMappingAppConfig",
    "app_keys_only",
    "group_sync_app",
    "pipeline_keys_only",
]

_GUARD_SPELLINGS = {
    "apply_mappings_guard": (
        "applyMappingsGuard",
        "applyMappingsGuards",
        "apply_mappings_guard",
        "apply_mappings_guards",
    )
}


class AppFeatures(K2KModel):
    """Feature switches of the app, ``enabled`` / ``disabled`` (YAML booleans also accepted)."""

    auto_create_control_topics: Flag = Field(
        False,
        description="Create `offsetMapping.topic` on the target when missing (settings from "
        "`topicCreation.control.offsetMapping`); when disabled a missing topic stops the app.",
    )
    apply_mappings_guard: Flag = Field(
        True,
        validation_alias=AliasChoices(*_GUARD_SPELLINGS["apply_mappings_guard"]),
        description="Rewind protection: every commit carries a guard in its offset-commit "
        "metadata (under `groups.offsetGuardPrefix`), and the app never moves a target group "
        "backwards unless the source group itself moved backwards. Disable only to force a "
        "reset. K2K's spelling `applyMappingsGuards` is also read.",
    )
    validate_control_topic_settings: Flag = Field(
        True,
        description="Check at start that an existing `offsetMapping.topic` is not "
        "compacted-only (its `cleanup.policy` includes `delete`); refuse to start otherwise.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        one_spelling(data, _GUARD_SPELLINGS)
        return data


class Groups(K2KModel):
    """Which consumer groups are translated, and how often."""

    poll_interval: Duration = Field(
        timedelta(seconds=5),
        description="How often the app reads the source groups' committed offsets (fresher "
        "target positions against more load on the source cluster).",
    )
    consumer_groups: Annotated[
        str | list[str], FieldDoc("regex string | list of group names", _GROUPS_EXPECTED)
    ] = Field(
        ".*",
        description="A regular expression (Python `re` syntax) matched against the whole group "
        "name, e.g. `my-app-.*`, or a list of exact group names. Selected source groups are "
        "translated into the same-named groups on the target.",
    )
    offset_guard_prefix: str = Field(
        "k2k_",
        min_length=1,
        description="Prefix of the guard the app writes into the offset-commit metadata of "
        "every commit (see `features.applyMappingsGuard`).",
    )

    @field_validator("consumer_groups", mode="before")
    @classmethod
    def _selection(cls, value: Any) -> str | list[str]:
        return _group_selection(value)

    def selects(self, name: str) -> bool:
        """True when group ``name`` is translated (the whole name matches, or is listed)."""
        return NameSelection(self.consumer_groups).match(name)


_WAITS_ITSELF = Inert(
    "k2k checks a control topic it created until it is ready, for up to target.connectTimeout"
)


class AppConfiguration(K2KModel):
    """How the app waits for a control topic it created."""

    auto_control_topic_creation_check_delay: Annotated[Duration, _WAITS_ITSELF] = Field(
        timedelta(milliseconds=750),
        description="Accepted for K2K compatibility; no effect: k2k checks a control topic it "
        "created until it is ready, for up to `target.connectTimeout`.",
    )
    auto_control_topic_creation_max_attempts: Annotated[Count, _WAITS_ITSELF] = Field(
        10,
        ge=1,
        description="Accepted for K2K compatibility; no effect (see "
        "`autoControlTopicCreationCheckDelay`).",
    )


class AppErrorHandling(K2KModel):
    """What the app does when a group cannot be translated."""

    on_multiple_target_committed_offsets: Policy = Field(
        "fail",
        description="A source partition's records went to more than one target partition "
        "(`partition: hash`, or two pipelines replicating the same topic): `fail` stops the app "
        "with a one-line error naming the group, the source partition and the targets; `ignore` "
        "leaves that group's partition untranslated on the target and logs a warning once.",
    )
    on_active_consumer_group_commit: Policy = Field(
        "fail",
        description="The target group has active members (the app never moves a live group): "
        "`fail` stops the app with a one-line error; `ignore` skips that group this pass, logs "
        "a warning and retries it next pass.",
    )


_SAME_AS_REPLICATOR = "Same keys as the replicator's `{key}` (see above)."


class OffsetMappingAppConfig(K2KModel):
    """The Offset Mapping app, as loaded from one or more YAML files."""

    name: Annotated[str, NAME_DOC] = Field(
        min_length=1,
        pattern=NAME_PATTERN,
        description="The app's identity (required), named in its logs. Several instances "
        "each do every pass; the guard (`features.applyMappingsGuard`) keeps them from "
        "undoing each other's commits.",
    )
    license: Annotated[FreeMapping | None, LICENSE] = license_field()
    features: AppFeatures = Field(default_factory=AppFeatures, description="Feature switches.")
    source: Annotated[
        SourceCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(
        description="The cluster whose consumer groups are translated (required). The app "
        "reads their committed offsets with the `admin` client; `kafka.consumer` is accepted "
        "and ignored. " + _SAME_AS_REPLICATOR.format(key="source")
    )
    target: Annotated[
        TargetCluster, FieldDoc("mapping", "a mapping with kafka.common.bootstrap.servers")
    ] = Field(
        description="The cluster holding `offsetMapping.topic` and the groups the app positions "
        "(required). " + _SAME_AS_REPLICATOR.format(key="target")
    )
    groups: Groups = Field(default_factory=Groups, description="The groups to translate.")
    offset_mapping: OffsetMappingSettings = Field(
        default_factory=OffsetMappingSettings,
        description="The offset-mapping topic the replicator writes, and its retention.",
    )
    metrics: AppMetrics = Field(default_factory=AppMetrics, description="Metrics.")
    topic_creation: Annotated[TopicCreation, FieldDoc("mapping", "a mapping")] = Field(
        default_factory=TopicCreation,
        description="How the app creates `offsetMapping.topic` when it is missing: "
        "`control.offsetMapping` over `control.common` over the flat `control` keys; "
        "`replicated` is accepted and not used. " + _SAME_AS_REPLICATOR.format(key="topicCreation"),
    )
    configuration: AppConfiguration = Field(
        default_factory=AppConfiguration, description="Control-topic creation timing."
    )
    error_handling: AppErrorHandling = Field(
        default_factory=AppErrorHandling, description="Failure policies."
    )

    @model_validator(mode="after")
    def _distinct_topics(self) -> OffsetMappingAppConfig:
        if self.metrics.kafka.topic == self.offset_mapping.topic:
            what = "same topic as offsetMapping.topic"
            expected = "a topic of its own (the record formats differ)"
            raise_problems(
                [
                    (
                        ("metrics", "kafka", "topic"),
                        describe(what, got=self.metrics.kafka.topic, expected=expected),
                    )
                ]
            )
        return self

    def inert_keys(self) -> list[tuple[str, str]]:
        """(key path, why) for each key this file sets that has no effect in the app."""
        found = inert_keys(self)
        if self.source.kafka.consumer:
            found.append(("source.kafka.consumer", "the app reads groups with the admin client"))
        if "replicated" in self.topic_creation.model_fields_set:
            found.append(("topicCreation.replicated", "the app creates no replicated topics"))
        return found

    def source_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a source client; ``role`` is ``consumer`` or ``admin``."""
        return self.source.client(role)

    def target_client(self, role: str) -> dict[str, str]:
        """librdkafka properties for a target client: ``producer``, ``consumer`` or ``admin``."""
        return self.target.client(role)


# --- reading a replicator's file ------------------------------------------------------------


def _spellings(model: type[BaseModel]) -> set[str]:
    """Every key that sets a field of ``model``: name, alias and alias choices."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        keys.update({name, field.alias or name})
        if isinstance(field.validation_alias, AliasChoices):
            keys.update(c for c in field.validation_alias.choices if isinstance(c, str))
    return keys


#: The sections both files have, each model's class of it, and both spellings of its key.
_SHARED_SECTIONS: tuple[tuple[type[BaseModel], type[BaseModel], tuple[str, ...]], ...] = (
    (Features, AppFeatures, ("features",)),
    (ErrorHandling, AppErrorHandling, ("errorHandling", "error_handling")),
)


def _only_in(first: int) -> dict[str, frozenset[str]]:
    """Per shared section, the keys only the replicator (``first`` 0) or the app (1) reads."""
    return {
        section: frozenset(_spellings(models[first]) - _spellings(models[1 - first]))
        for *models, sections in _SHARED_SECTIONS
        for section in sections
    }


#: Top-level keys of the replicator's file that the app does not read, and keys inside
#: shared sections that only the replicator reads.
_REPLICATOR_SECTIONS = frozenset(_spellings(PipelineConfig) - _spellings(OffsetMappingAppConfig))
_REPLICATOR_KEYS_IN = _only_in(0)
#: The same the other way round: what only the app reads (``k2k cutover`` reads both).
_APP_SECTIONS = frozenset(_spellings(OffsetMappingAppConfig) - _spellings(PipelineConfig))
_APP_KEYS_IN = _only_in(1)


def app_keys_only(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the replicator-only keys, so a pipeline file serves the app too.

    Only keys that the replicator reads and the app does not are dropped (top level:
    ``replication``, ``coordination``, ``tracing``, ``schemaMapping``, ``bidirectional``,
    ``spark``; the replicator's features and error policies); a key neither reads stays and
    is reported as unknown.

    >>> app_keys_only({"name": "a", "spark": {}, "features": {"exactlyOnce": True, "x": 1}})
    {'name': 'a', 'features': {'x': 1}}
    """
    return _without(data, _REPLICATOR_SECTIONS, _REPLICATOR_KEYS_IN)


def pipeline_keys_only(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the app-only keys, so the app's overlay serves the replicator's
    model too (``k2k cutover -f pipeline.yaml -f offset-mapping.yaml``).

    >>> pipeline_keys_only({"name": "a", "groups": {}, "errorHandling": {"onActiveConsumer\
GroupCommit": "fail", "onControlMessageDeserializationError": "fail"}})
    {'name': 'a', 'errorHandling': {'onControlMessageDeserializationError': 'fail'}}
    """
    return _without(data, _APP_SECTIONS, _APP_KEYS_IN)


def _without(
    data: Mapping[str, Any], sections: frozenset[str], keys_in: Mapping[str, frozenset[str]]
) -> dict[str, Any]:
    result = {k: v for k, v in data.items() if k not in sections}
    for section, dropped in keys_in.items():
        value = result.get(section)
        if isinstance(value, Mapping):
            result[section] = {k: v for k, v in value.items() if k not in dropped}
    return result


def group_sync_app(cfg: PipelineConfig) -> OffsetMappingAppConfig:
    """The Offset Mapping app a pipeline runs for ``features.syncGroupOffsets``: its clusters,
    mapping topic and groups, a pass every ``syncGroupOffsets.interval``, and MM2's leniency:
    a group with members on the target, or spread over several target partitions, is
    skipped and logged instead of stopping the pipeline."""
    sync = cfg.sync_group_offsets
    return OffsetMappingAppConfig(
        name=cfg.name,
        source=cfg.source,
        target=cfg.target,
        features=AppFeatures(
            auto_create_control_topics=cfg.features.auto_create_control_topics,
            validate_control_topic_settings=cfg.features.validate_control_topic_settings,
        ),
        groups=Groups(poll_interval=sync.interval, consumer_groups=sync.pattern()),
        offset_mapping=cfg.offset_mapping,
        topic_creation=cfg.topic_creation,
        error_handling=AppErrorHandling(
            on_active_consumer_group_commit="ignore",
            on_multiple_target_committed_offsets="ignore",
        ),
    )
