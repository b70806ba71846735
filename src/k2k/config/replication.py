"""``replication``: the source stage (which topics) and the sink stage (where records go).

The sink's topic forms are parsed by :mod:`k2k.config.routing`; checks that also need the
clusters (every listed topic mapped, no copy onto itself) live in
:class:`k2k.config.model.PipelineConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PlainSerializer,
    field_validator,
    model_serializer,
    model_validator,
)

from k2k.config.base import K2KModel
from k2k.config.base import raise_problems as _raise
from k2k.config.errors import Problem, describe, problems_error, suggest_key
from k2k.config.fields import Duration, check_topic_name, regex_or_names
from k2k.config.hints import FieldDoc
from k2k.config.routing import FORMS, SameTopicName, SinkTopic, parse_sink_topic, routing_to_yaml
from k2k.config.transforms import STEP_KINDS, TransformStep

__all__ = ["STAGES_EXPECTED", "Replication", "SinkOffsets", "SinkStage", "SourceStage"]

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


_OFFSETS_EXPECTED = "assigned or identical, or a mapping {mode: assigned | identical, maxFill: N}"

#: The default bound on filler records that align an empty target partition.
DEFAULT_MAX_FILL = 1_000_000


class SinkOffsets(K2KModel):
    """Which offsets replicated records get on the target (``offsets: identical`` is short
    for ``offsets: {mode: identical}``)."""

    mode: Annotated[
        Literal["assigned", "identical"], FieldDoc("assigned | identical", _OFFSETS_EXPECTED)
    ] = Field(
        "assigned",
        description="`offsets: identical` is short for `offsets: {mode: identical}`. "
        "`assigned`: the target assigns offsets as records arrive (offset "
        "mappings translate them). `identical`: every record keeps its source offset on the "
        "target, for consumers that keep offsets outside Kafka (docs/offset-mapping.md"
        "#identical-offsets). Needs `partition: source`, a topic route that gives each source "
        "topic a target topic of its own, and target partitions written by this pipeline "
        "alone; not with `features.exactlyOnce` (each transaction's commit marker takes an "
        "offset on the target) or bidirectional replication (it leaves records out). A gap "
        "in the source offsets is `errorHandling.onOffsetGap`'s.",
    )
    max_fill: int = Field(
        DEFAULT_MAX_FILL,
        ge=0,
        description="`identical` only: an empty target partition is aligned at the first "
        "start by writing filler records up to the first source offset to copy and deleting "
        "them (DeleteRecords), so that its start and end offsets equal the source's; at most "
        "this many per partition, else the start fails naming the partition and how long "
        "the fill would take.",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"mode": data.strip().lower()}
        return data

    @property
    def identical(self) -> bool:
        return self.mode == "identical"


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

    offsets: Annotated[
        SinkOffsets, FieldDoc("assigned | identical | {mode, maxFill}", _OFFSETS_EXPECTED)
    ] = Field(
        default_factory=SinkOffsets,
        description="The offsets records get on the target: `assigned` (the default) or "
        "`identical` (the source offset); see `offsets.mode`.",
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


STAGES_EXPECTED = (
    "a list with one '- source: {...}' item, an optional '- transforms: [...]' item and one "
    "'- sink: {...}' item"
)
_STAGE_KINDS = ("source", "transforms", "sink")


class Replication(K2KModel):
    """The replication stages. YAML: a list of single-key items, ``- source: {...}``,
    optionally ``- transforms: [...]``, and ``- sink: {...}``, at most one of each (a mapping
    ``{source: ..., sink: ...}`` is also read). Transform steps are listed under "Transforms".
    """

    source: Annotated[
        SourceStage, FieldDoc("mapping", "one '- source: {...}' item in the replication list")
    ] = Field(description="The source stage.")
    sink: Annotated[
        SinkStage, FieldDoc("mapping", "one '- sink: {...}' item in the replication list")
    ] = Field(description="The sink stage.")
    transforms: Annotated[
        tuple[TransformStep, ...],
        FieldDoc("list of steps", "a list of single-key steps, e.g. '- filter: {drop: ...}'"),
    ] = Field(
        (),
        description="Steps applied to every record between source and sink, in order: "
        "filters, header and JSON-field rewrites (see Transforms below, and "
        "docs/transforms.md). Empty: records are copied unchanged.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_stage_list(cls, data: Any) -> Any:
        if data is None or isinstance(data, Mapping):
            return data
        if not isinstance(data, list):
            raise problems_error([((), describe("wrong type", got=data, expected=STAGES_EXPECTED))])
        stages: dict[str, Any] = {}
        problems: list[Problem] = []
        for index, item in enumerate(data):
            if not isinstance(item, Mapping) or len(item) != 1:
                what = "not a single-key stage item"
                problems.append(((index,), describe(what, got=item, expected=STAGES_EXPECTED)))
                continue
            ((kind, body),) = item.items()
            if kind in STEP_KINDS:
                what = "a transform step, not a stage"
                expected = "it inside a '- transforms: [...]' item"
                problems.append(((index, str(kind)), describe(what, expected=expected)))
            elif kind not in _STAGE_KINDS:
                problems.append(((index, str(kind)), suggest_key(str(kind), _STAGE_KINDS)))
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
        steps = stages.get("transforms") or []
        transforms = [{"transforms": steps}] if steps else []
        return [{"source": stages["source"]}, *transforms, {"sink": stages["sink"]}]
