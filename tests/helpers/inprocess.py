"""A lease spec for runners the tests run in-process (no Spark, no planner): what the
planner would build for one pipeline between the session's clusters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from k2k.kafka.factory import consumer_settings, producer_settings
from k2k.pipeline.plan import ClientSpec, CommitSpec, ControlTopicSpec, LeaseSpec, PolicySpec
from k2k.pipeline.task.commit import CommitStrategy
from k2k.pipeline.task.observe import RunObserver
from k2k.stages import TopicPlan
from tests.helpers.kafka import create_topic, list_topics

#: A pipeline's ``errorHandling`` when it sets none.
POLICIES = PolicySpec(
    on_sync_timeout="fail",
    on_bad_record="fail",
    on_records_lost="fail",
    on_foreign_writes="warn",
    on_offset_gap="fail",
)
#: The delivery timeout of a target producer without ``message.timeout.ms``.
ACK_TIMEOUT_S = 300.0


def control_topics(name: str, commit_topic: str) -> ControlTopicSpec:
    """Pipeline ``name``'s progress in ``commit_topic`` (one partition), under commit group
    ``name``; no member, no assignment topic."""
    return ControlTopicSpec(
        pipeline=name,
        member="",
        commit_group=name,
        commit_topic=commit_topic,
        commit_partitions=1,
        assignment_topic="",
        assignment_partitions=1,
        sync_timeout_s=30.0,
        open_transaction_s=0.0,  # a runner's read waits at most sync_timeout_s
    )


def inprocess_spec(
    clusters: Any,
    name: str,
    plans: dict[str, TopicPlan],
    *,
    spreads: bool = False,
    exactly_once: bool = False,
    batch_timeout_s: float = 0.2,
    lease_s: float = 120,
    control: tuple[str, int, str] | None = None,
    observer: Callable[[CommitStrategy], RunObserver] | None = None,
) -> LeaseSpec:
    """Pipeline ``name`` copying ``plans`` from the source to the target, its progress in
    ``<name>-progress`` (created when missing); ``spreads``: a partitioner places records
    (``partition: hash``); ``control``: the lease channel's address, ``observer``: the
    runners' observer factory."""
    commit_topic = f"{name}-progress"
    if commit_topic not in list_topics(clusters.target):
        create_topic(clusters.target, commit_topic, 1, {"cleanup.policy": "compact"})
    return LeaseSpec(
        lease_id=1,
        topics=plans,
        topic_ids={},
        lease_s=lease_s,
        live=False,
        control=control,
        observer=observer,
        telemetry=False,
        clients=ClientSpec(
            source_consumer=consumer_settings({"bootstrap.servers": clusters.source}, name),
            target_producer=producer_settings(
                {"bootstrap.servers": clusters.target}, spreads, exactly_once=exactly_once
            ),
            control_consumer={"bootstrap.servers": clusters.target},
            statistics_interval_ms=None,
        ),
        commit=CommitSpec(
            exactly_once=exactly_once,
            batch_size=500,
            batch_timeout_s=batch_timeout_s,
            ack_timeout_s=ACK_TIMEOUT_S,
            identical_offsets=False,
        ),
        control_topics=control_topics(name, commit_topic),
        policies=POLICIES,
    )
