"""``features``: the pipeline's switches, including which tracing headers are added
(``features.tracingHeaders``).

Every switch is ``enabled`` / ``disabled`` as in K2K; what a switch needs from other sections is
checked by :class:`k2k.config.model.PipelineConfig`, which sees them all.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_serializer, model_validator

from k2k.config.base import K2KModel
from k2k.config.fields import Flag, parse_flag
from k2k.config.hints import FieldDoc
from k2k.config.inert import Inert

__all__ = ["Features", "TracingToggles"]


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
    optimize_offset_commit_partition: Annotated[
        Flag,
        Inert(
            "k2k places progress records by their key (docs/operations.md#commit-topic-partitions)"
        ),
    ] = Field(
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
        description="Check at start that existing control topics are compacted (and the "
        "assignment topic keeps the broker's clock, `message.timestamp.type=LogAppendTime`); "
        "refuse to start otherwise.",
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
    sync_group_offsets: Flag = Field(
        False,
        description="Commit the selected source groups' translated offsets to the target's "
        "groups of the same name every `syncGroupOffsets.interval`, from the pipeline's "
        "driver, as the Offset Mapping app would (MirrorMaker 2's "
        "`sync.group.offsets.enabled`; needs `features.offsetMapping`). A group with members "
        "on the target is skipped and logged (docs/offset-mapping.md#group-offset-sync).",
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
