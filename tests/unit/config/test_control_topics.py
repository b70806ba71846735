"""topicCreation.control in both layouts, and the replicator's offsetMapping section."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml

from k2k.config import render_effective
from k2k.config.loader import build_pipeline
from k2k.config.mapping import MappingRetention, OffsetMappingSettings
from k2k.config.topics import ControlTopicCreation, TopicSettings

NESTED = """
control:
  common: {partitions: 3, replication: 3, config: {"min.insync.replicas": "2"}}
  offsetMapping:
    partitions: 6
    replication: 3
    config: {"cleanup.policy": "delete", "retention.ms": "604800000"}
  metrics:
    partitions: 3
    replication: 3
    config: {"cleanup.policy": "delete", "retention.ms": "2592000000"}
"""

SEGMENTS = {"segment.ms": "300000", "segment.bytes": "16777216"}


def test_flat_layout_works_as_before(build: Any) -> None:
    control = build(
        {
            "topicCreation": {
                "control": {
                    "partitions": 2,
                    "replicationFactor": 3,
                    "configs": {"min.insync.replicas": 2, "cleanup.policy": "compact"},
                }
            }
        }
    ).topic_creation.control
    assert (control.partitions, control.replication_factor) == (2, 3)
    assert control.configs == {"min.insync.replicas": "2", "cleanup.policy": "compact"}
    assert control.common is None
    assert control.coordination() == TopicSettings(
        2, 3, {"cleanup.policy": "compact", **SEGMENTS, "min.insync.replicas": "2"}
    )
    # The flat keys reach the other control topics too, except their cleanup.policy.
    assert control.offset_mapping() == TopicSettings(
        2, 3, {"cleanup.policy": "delete", "min.insync.replicas": "2"}
    )
    assert control.metrics() == control.offset_mapping()


def test_defaults_resolve() -> None:
    control = ControlTopicCreation()
    # Short segments: compaction never shortens the open one, and every start reads the rest.
    assert control.coordination() == TopicSettings(1, -1, {"cleanup.policy": "compact", **SEGMENTS})
    assert control.offset_mapping() == TopicSettings(1, -1, {"cleanup.policy": "delete"})
    assert control.metrics() == TopicSettings(1, -1, {"cleanup.policy": "delete"})


def test_nested_layout_resolves_per_topic(build: Any) -> None:
    control = build({"topicCreation": yaml.safe_load(NESTED)}).topic_creation.control
    assert control.coordination() == TopicSettings(
        3, 3, {"cleanup.policy": "compact", **SEGMENTS, "min.insync.replicas": "2"}
    )
    assert control.offset_mapping() == TopicSettings(
        6,
        3,
        {"cleanup.policy": "delete", "min.insync.replicas": "2", "retention.ms": "604800000"},
    )
    assert control.metrics() == TopicSettings(
        3,
        3,
        {"cleanup.policy": "delete", "min.insync.replicas": "2", "retention.ms": "2592000000"},
    )


def test_blocks_fall_back_to_common_then_flat(build: Any) -> None:
    control = build(
        {
            "topicCreation": {
                "control": {
                    "partitions": 2,
                    "replicationFactor": 2,
                    "configs": {"segment.ms": "1000", "cleanup.policy": "compact"},
                    "common": {"replicationFactor": 3, "configs": {"cleanup.policy": "compact"}},
                    "offsetMapping": {"config": {"cleanup.policy": "compact,delete"}},
                }
            }
        }
    ).topic_creation.control
    assert control.coordination() == TopicSettings(
        2, 3, {"cleanup.policy": "compact", "segment.bytes": "16777216", "segment.ms": "1000"}
    )
    assert control.offset_mapping() == TopicSettings(
        2, 3, {"cleanup.policy": "compact,delete", "segment.ms": "1000"}
    )
    assert control.metrics() == TopicSettings(
        2, 3, {"cleanup.policy": "delete", "segment.ms": "1000"}
    )


def test_snake_case_block_names_are_read(build: Any) -> None:
    control = build(
        {"topic_creation": {"control": {"offset_mapping": {"replication_factor": 5}}}}
    ).topic_creation.control
    assert control.offset_mapping().replication_factor == 5
    assert control.coordination().replication_factor == -1


def test_nested_layout_renders_and_loads_back(build: Any) -> None:
    cfg = build({"topicCreation": yaml.safe_load(NESTED)})
    data = yaml.safe_load(render_effective(cfg))
    control = data["topicCreation"]["control"]
    assert control["offsetMapping"]["replication"] == 3
    assert control["metrics"]["config"]["retention.ms"] == "2592000000"
    assert build_pipeline(data, {}) == cfg


def test_offset_mapping_feature_is_supported(build: Any) -> None:
    cfg = build({"features": {"offsetMapping": "enabled"}})
    assert cfg.features.offset_mapping is True
    assert cfg.offset_mapping == OffsetMappingSettings()


def test_offset_mapping_defaults(build: Any) -> None:
    settings = build().offset_mapping
    assert settings.topic == "__k2k_offset_mappings"
    retention = settings.retention
    assert (retention.time, retention.count) == ("topic", 1000)
    assert retention.schedule == timedelta(minutes=5)
    assert retention.max_age() is None


@pytest.mark.parametrize(
    ("written", "age"),
    [("7 days", timedelta(days=7)), ("90 minutes", timedelta(minutes=90)), ("Topic", None)],
)
def test_retention_time_is_topic_or_a_duration(written: str, age: timedelta | None) -> None:
    retention = MappingRetention.model_validate({"time": written})
    assert retention.max_age() == age


def test_offset_mapping_section_round_trips(build: Any) -> None:
    cfg = build(
        {
            "features": {"offsetMapping": "enabled"},
            "offsetMapping": {
                "topic": "mappings",
                "retention": {"time": "2 days", "count": 50, "schedule": "30 seconds"},
            },
        }
    )
    data = yaml.safe_load(render_effective(cfg))
    assert data["features"]["offsetMapping"] == "enabled"
    assert data["offsetMapping"] == {
        "topic": "mappings",
        "retention": {"time": "2 days", "count": 50, "schedule": "30 seconds"},
    }
    assert build_pipeline(data, {}) == cfg


# --- topicCreation.replicated: mirrors the source, K2K's common block over k2k's flat keys ---


def test_replicated_topics_mirror_the_source_by_default(build: Any) -> None:
    replicated = build().topic_creation.replicated
    assert replicated.mirrors_replication_factor()
    assert replicated.resolve(6, 3, {"retention.ms": "5"}) == TopicSettings(
        6, 3, {"retention.ms": "5"}
    )


def test_replicated_k2k_common_block_wins_over_flat_keys(build: Any) -> None:
    replicated = build(
        {
            "topicCreation": {
                "replicated": {
                    "partitions": 2,
                    "replicationFactor": 2,
                    "configs": {"retention.ms": "1", "segment.ms": "2"},
                    "common": {"partitions": 4, "replication": -1, "config": {"segment.ms": "3"}},
                }
            }
        }
    ).topic_creation.replicated
    assert not replicated.mirrors_replication_factor()
    assert replicated.resolve(6, 3, {"retention.ms": "0", "x": "y"}) == TopicSettings(
        4, -1, {"retention.ms": "1", "segment.ms": "3", "x": "y"}
    )


@pytest.mark.parametrize(
    "flat",
    [
        {"replicationFactor": 2, "configs": {"a": "b"}},
        {"replication": 2, "config": {"a": "b"}},
        {"replication_factor": 2, "configs": {"a": "b"}},
    ],
)
def test_replicated_flat_keys_in_either_spelling(build: Any, flat: dict) -> None:
    replicated = build({"topicCreation": {"replicated": flat}}).topic_creation.replicated
    assert replicated.resolve(3, 1, {}) == TopicSettings(3, 2, {"a": "b"})


def test_replicated_k2k_layout_renders_and_loads_back(build: Any) -> None:
    layout = {"common": {"partitions": 4, "replication": 1, "config": {"retention.ms": "9"}}}
    cfg = build({"topicCreation": {"replicated": layout}})
    data = yaml.safe_load(render_effective(cfg))
    assert data["topicCreation"]["replicated"]["common"]["replication"] == 1
    assert build_pipeline(data, {}) == cfg


@pytest.mark.parametrize(
    "coordination",
    [
        {"kafka": {"assignment": {"topic": "__k2k_consumer-offsets"}}},
        {"commit": {"topic": "__k2k_control"}, "assignment": {"topic": "__k2k_control"}},
    ],
    ids=["helm-spelling", "flat-spelling"],
)
def test_commit_and_assignment_may_share_one_topic(build: Any, coordination: dict) -> None:
    """K2K allows one control topic for both: readers skip the other family's records."""
    cfg = build({"coordination": coordination})
    assert cfg.coordination.commit.topic == cfg.coordination.assignment.topic
    assert cfg.topic_selection().should_replicate(cfg.coordination.commit.topic) is False
