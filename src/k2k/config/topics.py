"""Topic creation on the target (``topicCreation``): control topics and replicated topics.

Control topics are read in two layouts. K2K 1.x's flat keys (``partitions``,
``replicationFactor``, ``configs``) configure every control topic alike; K2K 2.x's blocks
``common``, ``offsetMapping`` and ``metrics`` (each ``{partitions, replication, config}``)
configure them per kind. :meth:`ControlTopicCreation.coordination`,
:meth:`~ControlTopicCreation.offset_mapping` and :meth:`~ControlTopicCreation.metrics` resolve
one kind's settings: its own block over ``common`` over the flat keys. The commit and
assignment topics are compacted; the offset-mapping and metrics topics are not compacted-only,
because old records there are deleted by age or by the Offset Mapping app's cleaner.

Replicated topics (``topicCreation.replicated``) mirror their source topic (partitions,
replication factor, the topic's own configs) under the same two layouts: k2k's flat keys and
K2K 2.x's ``common`` block, which wins (:meth:`ReplicatedTopicCreation.resolve`). The source
topic's configs pass a property filter first: MirrorMaker 2's default exclusions
(:data:`MM2_CONFIG_EXCLUSIONS`) unless ``configExclusions`` says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, AliasChoices, Field, field_validator, model_validator

from k2k.config.base import K2KModel, one_spelling, raise_problems
from k2k.config.errors import Problem, describe, problems_error
from k2k.config.fields import Count, Duration, Flag, StrMap
from k2k.config.hints import FieldDoc

__all__ = [
    "MM2_CONFIG_EXCLUSIONS",
    "ControlTopicCreation",
    "ReplicatedTopicCreation",
    "ReplicationFactor",
    "TopicBlock",
    "TopicCreation",
    "TopicSettings",
]

_POLICY = "cleanup.policy"

#: MirrorMaker 2's default ``config.properties.exclude`` (DefaultConfigPropertyFilter):
#: properties that describe the source cluster's operation (throttles, durability and leader
#: election settings sized for its brokers, timestamp rules its producers were checked
#: against), not the data; copying them could make the target refuse or weaken writes.
MM2_CONFIG_EXCLUSIONS = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


def _replication_factor(value: int) -> int:
    if value == -1 or value >= 1:
        return value
    expected = "-1 (the broker's default) or a number >= 1"
    raise problems_error(
        [((), describe("invalid replication factor", got=value, expected=expected))]
    )


ReplicationFactor = Annotated[
    Count,
    AfterValidator(_replication_factor),
    FieldDoc("integer", "-1 (the broker's default) or a number >= 1"),
]


def _policies(value: str) -> set[str]:
    """The policies of a ``cleanup.policy`` value: ``"compact, delete"`` -> both."""
    return {part.strip() for part in value.split(",") if part.strip()}


@dataclass(frozen=True)
class TopicSettings:
    """How to create one topic: a kind of control topic (``topicCreation.control``) or a
    replicated topic (``topicCreation.replicated``)."""

    partitions: int
    replication_factor: int
    configs: dict[str, str]


_SETTINGS_SPELLINGS = {
    "replication": ("replication", "replicationFactor", "replication_factor"),
    "config": ("config", "configs"),
}


class TopicBlock(K2KModel):
    """One ``{partitions, replication, config}`` block of K2K 2.x's ``topicCreation`` layout
    (``control.common``, ``control.offsetMapping``, ``control.metrics``, ``replicated.common``);
    unset keys fall back to the next layer (see the module doc)."""

    partitions: Count | None = Field(
        None,
        ge=1,
        description="Partitions; null falls back to the next layer (`common`, then the flat "
        "`partitions`; for replicated topics then the source topic's count).",
    )
    replication: ReplicationFactor | None = Field(
        None,
        validation_alias=AliasChoices(*_SETTINGS_SPELLINGS["replication"]),
        description="Replication factor, -1 for the target broker's "
        "`default.replication.factor` (`replicationFactor` is also read); null falls back to "
        "the next layer (`common`, then the flat `replicationFactor`; for replicated topics "
        "then the source topic's).",
    )
    config: StrMap = Field(
        default_factory=dict,
        validation_alias=AliasChoices(*_SETTINGS_SPELLINGS["config"]),
        description="Topic configs (`configs` is also read), applied over those of the layers "
        "below (`common`, the flat `configs`; for replicated topics the source topic's).",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        one_spelling(data, _SETTINGS_SPELLINGS)
        return data


_BLOCK = FieldDoc(
    "{partitions, replication, config}", "a mapping with partitions, replication, config"
)


def _refused(path: tuple[str, ...], policy: str, expected: str) -> Problem:
    return (path, describe("refused", got=policy, expected=expected))


class ControlTopicCreation(K2KModel):
    """Settings of control topics k2k creates (``features.autoCreateControlTopics``).

    Two layouts are read, alone or together: K2K 1.x's flat keys (``partitions``,
    ``replicationFactor``, ``configs``) for every control topic, and K2K 2.x's blocks ``common``,
    ``offsetMapping`` and ``metrics``. A topic's own block wins over ``common``, which wins over
    the flat keys.
    """

    partitions: Count = Field(
        1,
        ge=1,
        description="Partitions of each control topic (K2K 1.x layout); `common.partitions` and "
        "a topic's own block win.",
    )
    replication_factor: ReplicationFactor = Field(
        -1,
        description="Replication factor of each control topic; -1 uses the broker's "
        "`default.replication.factor`. `common.replication` and a topic's own block win.",
    )
    configs: StrMap = Field(
        default_factory=dict,
        description="Topic configs of each control topic, e.g. `min.insync.replicas: 2`. "
        "`cleanup.policy` is `compact` for the commit and assignment topics (another value is "
        "refused) and is not passed on to the offset-mapping and metrics topics. The compacted "
        "ones get `segment.ms: 300000` and `segment.bytes: 16777216` unless set here: "
        "compaction never shortens a log's open segment, and every start reads what is left.",
    )
    common: Annotated[TopicBlock | None, _BLOCK] = Field(
        None,
        description="K2K 2.x layout: `{partitions, replication, config}` for every control topic, "
        "over the flat keys (`replicationFactor` and `configs` are also read in a block). A "
        "`cleanup.policy` here must be `compact`; it reaches the commit and assignment topics only.",
    )
    offset_mapping_block: Annotated[TopicBlock | None, _BLOCK] = Field(
        None,
        alias="offsetMapping",
        validation_alias=AliasChoices("offsetMapping", "offset_mapping"),
        description="The offset-mapping topic (`offsetMapping.topic`), over `common`. "
        "`cleanup.policy` is `delete` unless set here, and must include `delete`: the Offset "
        "Mapping app trims old mappings with DeleteRecords.",
    )
    metrics_block: Annotated[TopicBlock | None, _BLOCK] = Field(
        None,
        alias="metrics",
        validation_alias=AliasChoices("metrics"),
        description="The metrics topic (`metrics.kafka.topic`), over `common`. `cleanup.policy` "
        "is `delete` unless set here; `compact` is refused (metrics must expire).",
    )

    @field_validator("configs")
    @classmethod
    def _compacted(cls, configs: dict[str, str]) -> dict[str, str]:
        policy = configs.get(_POLICY)
        if policy is not None and "compact" not in _policies(policy):
            expected = "compact (control topics must be compacted)"
            raise_problems([_refused((_POLICY,), policy, expected)])
        return configs

    @model_validator(mode="after")
    def _cleanup_policies(self) -> ControlTopicCreation:
        problems: list[Problem] = []
        common_policy = self.common.config.get(_POLICY) if self.common else None
        if common_policy is not None and "compact" not in _policies(common_policy):
            expected = (
                "compact (it applies to the commit and assignment topics, which must be compacted)"
            )
            problems.append(_refused(("common", "config", _POLICY), common_policy, expected))
        mapping_policy = self.offset_mapping().configs[_POLICY]
        if "delete" not in _policies(mapping_policy):
            expected = (
                "delete (the Offset Mapping app trims old mappings with DeleteRecords, which a "
                "compacted-only topic refuses)"
            )
            problems.append(
                _refused(("offsetMapping", "config", _POLICY), mapping_policy, expected)
            )
        metrics_policy = self.metrics().configs[_POLICY]
        if "compact" in _policies(metrics_policy):
            expected = "delete (the metrics topic must not be compacted)"
            problems.append(_refused(("metrics", "config", _POLICY), metrics_policy, expected))
        raise_problems(problems)
        return self

    def _sizes(self, block: TopicBlock | None) -> tuple[int, int]:
        partitions, replication_factor = self.partitions, self.replication_factor
        for layer in (self.common, block):
            if layer is None:
                continue
            if layer.partitions is not None:
                partitions = layer.partitions
            if layer.replication is not None:
                replication_factor = layer.replication
        return partitions, replication_factor

    def _common_configs(self) -> dict[str, str]:
        return {**self.configs, **(self.common.config if self.common else {})}

    def coordination(self) -> TopicSettings:
        """The commit and assignment topics: ``common`` over the flat keys, compacted."""
        partitions, replication_factor = self._sizes(None)
        configs = {_POLICY: "compact", **_SHORT_SEGMENTS, **self._common_configs()}
        return TopicSettings(partitions, replication_factor, configs)

    def _expiring(self, block: TopicBlock | None) -> TopicSettings:
        partitions, replication_factor = self._sizes(block)
        inherited = {k: v for k, v in self._common_configs().items() if k != _POLICY}
        configs = {_POLICY: "delete", **inherited, **(block.config if block else {})}
        return TopicSettings(partitions, replication_factor, configs)

    def offset_mapping(self) -> TopicSettings:
        """The offset-mapping topic: its block over ``common`` over the flat keys; ``delete``."""
        return self._expiring(self.offset_mapping_block)

    def metrics(self) -> TopicSettings:
        """The metrics topic: its block over ``common`` over the flat keys; never compacted."""
        return self._expiring(self.metrics_block)


#: Segments of the compacted control topics: compaction never shortens a log's open segment
#: (by default 1 GiB or 7 days), and a starting driver and each runner read the topic whole.
_SHORT_SEGMENTS = {"segment.ms": "300000", "segment.bytes": "16777216"}

_FLAT_SPELLINGS = {
    "replication_factor": ("replicationFactor", "replication_factor", "replication"),
    "configs": ("configs", "config"),
}


def _patterns(value: list[str]) -> list[str]:
    problems: list[Problem] = []
    for index, pattern in enumerate(value):
        try:
            re.compile(pattern)
        except re.error as exc:
            what = f"invalid regular expression ({exc})"
            expected = r"a Python regular expression such as 'segment\..*'"
            problems.append(((index,), describe(what, got=pattern, expected=expected)))
    raise_problems(problems)
    return value


Patterns = Annotated[
    list[str],
    AfterValidator(_patterns),
    FieldDoc("list of regular expressions", "a list of regular expressions"),
]


class ReplicatedTopicCreation(K2KModel):
    """Settings of target topics k2k creates (``features.autoCreateTopics``).

    A created topic mirrors its source topic: partition count, replication factor and the
    topic's own configs. Two layouts override that, alone or together: k2k's flat keys
    (``partitions``, ``replicationFactor``, ``configs``; ``replication`` and ``config`` are
    also read) and K2K 2.x's ``common`` block (``{partitions, replication, config}``), which
    wins over the flat keys. :meth:`resolve` applies them to one source topic. The source's
    configs are copied through :meth:`copies_config` (``configExclusions``), and re-synced
    every ``configSyncInterval`` while ``configSync`` is enabled.
    """

    partitions: Count | None = Field(
        None,
        ge=1,
        description="Partitions of each created topic; null means as many as the source topic. "
        "`common.partitions` wins.",
    )
    replication_factor: ReplicationFactor | None = Field(
        None,
        validation_alias=AliasChoices(*_FLAT_SPELLINGS["replication_factor"]),
        description="Replication factor (`replication` is also read); null mirrors the source "
        "topic's, -1 uses the target broker's `default.replication.factor`. "
        "`common.replication` wins.",
    )
    configs: StrMap = Field(
        default_factory=dict,
        validation_alias=AliasChoices(*_FLAT_SPELLINGS["configs"]),
        description="Overrides applied on top of the source topic's configs, which are copied "
        "through `configExclusions` (`config` is also read); `common.config` wins. Applied "
        "whatever `configExclusions` says.",
    )
    common: Annotated[TopicBlock | None, _BLOCK] = Field(
        None,
        description="K2K 2.x layout: `{partitions, replication, config}` for every created "
        "topic, over the flat keys; unset keys fall back to them, then to the source topic "
        "(`replicationFactor` and `configs` are also read here).",
    )
    config_exclusions: Patterns = Field(
        default_factory=lambda: list(MM2_CONFIG_EXCLUSIONS),
        description="Source topic configs never copied to the target: regular expressions "
        "matched against the whole property name. The default is MirrorMaker 2's "
        "`config.properties.exclude` default (throttled replicas, `message.timestamp.type`, "
        "`message.timestamp.difference.max.ms`, `unclean.leader.election.enable`, "
        "`min.insync.replicas`); `[]` copies every config the source topic sets itself. "
        "`configs` and `common.config` are applied regardless.",
    )
    config_sync: Flag = Field(
        True,
        description="While the pipeline runs, re-apply the source topics' configs (filtered by "
        "`configExclusions`, with `configs` and `common.config` over them) to their target "
        "topics every `configSyncInterval`, as MirrorMaker 2's `sync.topic.configs.enabled`: "
        "changed values are set, and a copied config the source no longer sets is removed "
        "from the target so the target's default applies. With `features.autoCreateTopics` "
        "only (k2k manages the target topics then).",
    )
    config_sync_interval: Duration = Field(
        timedelta(minutes=10),
        description="How often `configSync` compares configs (MirrorMaker 2's "
        "`sync.topic.configs.interval.seconds`, 600 s by default); checked every "
        "`replication[].source.discoveryInterval`.",
    )

    acl_sync: Flag = Field(
        True,
        description="While the pipeline runs, add the source topics' literal ACLs that let a "
        "principal read (READ, DESCRIBE, DESCRIBE_CONFIGS; ALL is copied as READ) or deny "
        "anything to their target topics every `aclSyncInterval`, as MirrorMaker 2's "
        "`sync.topic.acls.enabled`; ACLs that grant writing or changing a target topic are "
        "never copied, and none are removed. Skipped (said once) when the target cluster has no "
        "authorizer. With `features.autoCreateTopics` only.",
    )
    acl_sync_interval: Duration = Field(
        timedelta(minutes=10),
        description="How often `aclSync` compares ACLs (MirrorMaker 2's "
        "`sync.topic.acls.interval.seconds`, 600 s by default); checked every "
        "`replication[].source.discoveryInterval`, first at the first check.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        one_spelling(data, _FLAT_SPELLINGS)
        return data

    def resolve(
        self, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicSettings:
        """The settings of a target topic for a source topic of ``partitions`` partitions,
        ``replication_factor`` replicas and ``configs`` (its own configs): ``common`` over the
        flat keys over the source's, whose configs are filtered by ``configExclusions``.

        >>> own = {"retention.ms": "1", "min.insync.replicas": "2"}  # the second is excluded
        >>> ReplicatedTopicCreation().resolve(6, 3, own)
        TopicSettings(partitions=6, replication_factor=3, configs={'retention.ms': '1'})
        >>> creation = ReplicatedTopicCreation(
        ...     replication_factor=2, common={"partitions": 4, "config": {"a": "b"}}
        ... )
        >>> creation.resolve(6, 3, {})
        TopicSettings(partitions=4, replication_factor=2, configs={'a': 'b'})
        """
        common = self.common or TopicBlock()
        copied = {k: v for k, v in configs.items() if self.copies_config(k)}
        chosen_partitions = common.partitions or self.partitions or partitions
        chosen_rf = next(
            rf
            for rf in (common.replication, self.replication_factor, replication_factor)
            if rf is not None
        )
        return TopicSettings(chosen_partitions, chosen_rf, self.overrides(copied))

    def overrides(self, copied: dict[str, str]) -> dict[str, str]:
        """The configs a target topic carries: ``copied`` (the source's, already filtered)
        under ``configs`` under ``common.config``."""
        return {**copied, **self.configs, **(self.common.config if self.common else {})}

    def copies_config(self, name: str) -> bool:
        """True when a source topic's config ``name`` is copied (no ``configExclusions``
        pattern matches the whole name).

        >>> creation = ReplicatedTopicCreation()
        >>> creation.copies_config("retention.ms"), creation.copies_config("min.insync.replicas")
        (True, False)
        """
        return not any(re.fullmatch(p, name) for p in self.config_exclusions)

    def mirrors_replication_factor(self) -> bool:
        """True when created topics take the source topic's replication factor."""
        common = self.common.replication if self.common else None
        return common is None and self.replication_factor is None


class TopicCreation(K2KModel):
    """How k2k creates topics on the target."""

    control: ControlTopicCreation = Field(
        default_factory=ControlTopicCreation, description="Control topics."
    )
    replicated: ReplicatedTopicCreation = Field(
        default_factory=ReplicatedTopicCreation, description="Replicated (data) topics."
    )
