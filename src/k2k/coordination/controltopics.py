"""The pipeline's control topics on the target: created or checked before anything uses them,
and the assignment client built from the pipeline's settings.

Runs on: driver. One place for what ``k2k start`` and the position commands (``k2k offsets``)
both need: the commit topic, the assignment topic (on the broker's clock: liveness compares
its record timestamps only) and, with ``features.offsetMapping``, the mapping topic; and a
member's :class:`~k2k.coordination.assignment.Assignment`.
"""

from __future__ import annotations

from typing import NamedTuple

from k2k.config import PipelineConfig
from k2k.config.topics import TopicCreation
from k2k.coordination.assignment import Assignment
from k2k.coordination.topics import ensure_control_topic
from k2k.kafka.admin import ClusterView
from k2k.kafka.factory import producer_settings

__all__ = ["ControlTopics", "assignment_member", "ensure_control_topics", "ensure_metrics_topic"]


class ControlTopics(NamedTuple):
    """Partition counts of the control topics (``mappings`` is 0 when not used)."""

    commit: int
    assignment: int
    mappings: int


def ensure_control_topics(
    cfg: PipelineConfig, target: ClusterView, *, mappings: bool = True
) -> ControlTopics:
    """Create or check the commit and assignment topics and, when ``mappings`` and
    ``features.offsetMapping``, the mapping topic; returns their partition counts.

    The commit and assignment topics may be one topic (K2K allows it): it is created once,
    with the assignment topic's settings (broker timestamps), and holds both families of
    records (docs/formats.md#sharing-one-topic)."""
    creation = cfg.topic_creation.control

    def control_topic(
        name: str, key_path: str, extra: dict[str, str] | None = None, mapping: bool = False
    ) -> int:
        settings = creation.offset_mapping() if mapping else creation.coordination()
        return ensure_control_topic(
            target,
            name,
            key_path,
            auto_create=cfg.features.auto_create_control_topics,
            validate=cfg.features.validate_control_topic_settings,
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            configs={**settings.configs, **(extra or {})},
            policy="delete" if mapping else "compact",
            must_have={key: (value, _BROKER_CLOCK_WHY) for key, value in (extra or {}).items()},
        )

    # Liveness compares assignment records' timestamps: they must be the broker's.
    broker_clock = {"message.timestamp.type": "LogAppendTime"}
    coordination = cfg.coordination
    shared = coordination.commit.topic == coordination.assignment.topic
    commit = control_topic(
        coordination.commit.topic,
        "coordination.commit.topic",
        broker_clock if shared else None,
    )
    assignment = (
        commit
        if shared
        else control_topic(
            coordination.assignment.topic, "coordination.assignment.topic", broker_clock
        )
    )
    mapping_partitions = 0
    if mappings and cfg.features.offset_mapping:
        mapping_partitions = control_topic(
            cfg.offset_mapping.topic, "offsetMapping.topic", mapping=True
        )
    return ControlTopics(commit, assignment, mapping_partitions)


def assignment_member(
    cfg: PipelineConfig, member: str, *, standby: bool, partitions: int
) -> Assignment:
    """Member ``member`` of the pipeline's commit group in its assignment topic (of
    ``partitions`` partitions); heartbeats start with its first ``catch_up``."""
    commit, assign = cfg.coordination.commit, cfg.coordination.assignment
    return Assignment(
        producer_conf=producer_settings(cfg.target_client("producer"), False, exactly_once=True),
        consumer_conf=cfg.control_consumer(),
        topic=assign.topic,
        partitions=partitions,
        group=cfg.commit_group,
        member=member,
        standby=standby,
        grace_s=assign.grace_window.total_seconds(),
        fencing_parallelism=assign.fencing_max_parallelism,
        sync_timeout_s=commit.sync_timeout.total_seconds(),
        on_bad_record=cfg.error_handling.on_control_message_deserialization_error,
    )


_BROKER_CLOCK_WHY = (
    "members' liveness compares the assignment records' timestamps, which must all be the "
    "broker's clock"
)


def ensure_metrics_topic(
    name: str, creation: TopicCreation, *, validate: bool, target: ClusterView
) -> str:
    """Create or check the metrics topic of the ``kafka`` exporter (``metrics.kafka.topic``):
    always created when missing, since the operator asked for this exporter; never
    compacted. Returns its name (checked as a topic name when the file was loaded)."""
    settings = creation.control.metrics()
    ensure_control_topic(
        target,
        name,
        "metrics.kafka.topic",
        auto_create=True,
        validate=validate,
        partitions=settings.partitions,
        replication_factor=settings.replication_factor,
        configs=settings.configs,
        policy="delete",
        why="metrics must expire",
    )
    return name
