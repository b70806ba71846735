"""A lease spec for runners the tests run in-process (no Spark, no planner): what the
planner would build for one pipeline between the session's clusters."""

from __future__ import annotations

from typing import Any

from k2k.kafka.factory import consumer_settings, producer_settings
from k2k.pipeline.plan import LeaseSpec
from k2k.stages import TopicPlan
from tests.helpers.kafka import create_topic, list_topics


def inprocess_spec(
    clusters: Any,
    name: str,
    plans: dict[str, TopicPlan],
    *,
    spreads: bool = False,
    exactly_once: bool = False,
    **fields: Any,
) -> LeaseSpec:
    """Pipeline ``name`` copying ``plans`` from the source to the target, its progress in
    ``<name>-progress`` (created when missing); ``spreads``: a partitioner places records
    (``partition: hash``); ``fields`` override the spec's other settings."""
    commit_topic = f"{name}-progress"
    if commit_topic not in list_topics(clusters.target):
        create_topic(clusters.target, commit_topic, 1, {"cleanup.policy": "compact"})
    settings: dict[str, Any] = {
        "batch_size": 500,
        "batch_timeout_s": 0.2,
        "lease_s": 120,
        "control_consumer": {"bootstrap.servers": clusters.target},
        **fields,
    }
    return LeaseSpec(
        lease_id=1,
        pipeline=name,
        commit_group=name,
        commit_topic=commit_topic,
        commit_partitions=1,
        source_consumer=consumer_settings({"bootstrap.servers": clusters.source}, name),
        target_producer=producer_settings(
            {"bootstrap.servers": clusters.target}, spreads, exactly_once=exactly_once
        ),
        topics=plans,
        exactly_once=exactly_once,
        **settings,
    )
