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
        2, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    )
    # The flat keys reach the other control topics too, except their cleanup.policy.
    assert control.offset_mapping() == TopicSettings(
        2, 3, {"cleanup.policy": "delete", "min.insync.replicas": "2"}
    )
    assert control.metrics() == control.offset_mapping()


def test_defaults_resolve() -> None:
    control = ControlTopicCreation()
    assert control.coordination() == TopicSettings(1, -1, {"cleanup.policy": "compact"})
    assert control.offset_mapping() == TopicSettings(1, -1, {"cleanup.policy": "delete"})
    assert control.metrics() == TopicSettings(1, -1, {"cleanup.policy": "delete"})


def test_nested_layout_resolves_per_topic(build: Any) -> None:
    control = build({"topicCreation": yaml.safe_load(NESTED)}).topic_creation.control
    assert control.coordination() == TopicSettings(
        3, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"}
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
        2, 3, {"cleanup.policy": "compact", "segment.ms": "1000"}
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
