"""``coordination``: the control topics on the target, progress (commit) and ownership
(assignment), in both spellings K2K accepts (``coordination.commit`` and the Helm chart's
``coordination.kafka.commit``).
"""

from __future__ import annotations

import codecs
from datetime import timedelta
from typing import Annotated, Any

from pydantic import (
    Field,
    SecretStr,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from k2k.config import clients
from k2k.config.base import K2KModel
from k2k.config.base import raise_problems as _raise
from k2k.config.clusters import KafkaProperties
from k2k.config.durations import format_duration
from k2k.config.errors import Problem, describe, problems_error
from k2k.config.fields import Count, Duration, TopicName
from k2k.config.hints import FieldDoc

__all__ = [
    "EXACTLY_ONCE_BATCH_SIZE",
    "AssignmentSettings",
    "CommitSettings",
    "Coordination",
    "CoordinationKafka",
]

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
        "`errorHandling.onCommitSyncTimeout` applies). When not set, a runner taking "
        "partitions on under exactly-once waits for other runners' open transactions up to "
        "the producer's `transaction.timeout.ms` plus 10 s instead (a transaction over "
        "thousands of partitions can stay open longer than 30 s; "
        "docs/architecture.md#taking-partitions-on).",
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
        description="The control records' character set: UTF-8 only (any spelling), which k2k "
        "writes and reads them in; another one is refused rather than ignored.",
    )
    consumer: KafkaProperties = Field(
        default_factory=dict,
        description="Properties of the consumers reading the control topics (progress, "
        "assignment, offset mappings, checkpoints), over `target.kafka.consumer`.",
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
            name = codecs.lookup(value).name
        except LookupError:
            name = None
        if name != "utf-8":
            what = "unknown charset" if name is None else "unsupported charset"
            raise problems_error(
                [((), describe(what, got=value, expected="UTF-8 (k2k's control records)"))]
            )
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
