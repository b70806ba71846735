"""The Offset Mapping app's configuration: K2K's layout, defaults, errors, a pipeline overlay."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from k2k.config import OffsetMappingAppConfig, load_offset_mapping_app, render_effective
from k2k.config.loader import build_offset_mapping_app, deep_merge
from k2k.config.offset_mapping import app_keys_only
from k2k.config.reference import APP_EXAMPLE
from k2k.config.topics import TopicSettings
from k2k.errors import ConfigError
from tests.helpers.paths import REPO

DATA = Path(__file__).parent / "data"

MINIMAL_APP: dict[str, Any] = {
    "name": "mapper",
    "source": {"kafka": {"common": {"bootstrap.servers": "src:9092"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "tgt:9092"}}},
}

GROUPS_OVERLAY = """\
groups:
  consumerGroups: ["orders-app", "billing"]
  pollInterval: 2 seconds
"""


def app(overrides: dict[str, Any] | None = None) -> OffsetMappingAppConfig:
    return build_offset_mapping_app(deep_merge(copy.deepcopy(MINIMAL_APP), overrides or {}), {})


def app_problems(overrides: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        app(overrides)
    lines = caught.value.problems
    assert all("\n" not in line and "pydantic" not in line for line in lines)
    return lines


# --- the K2K sample ------------------------------------------------------------------------


def test_the_k2k_sample_validates_as_is(tmp_path: Path) -> None:
    path = tmp_path / "offset-mapping.yaml"
    path.write_text(APP_EXAMPLE, encoding="utf-8")
    cfg = load_offset_mapping_app(path, env={})
    assert cfg.name == "offset-mapping-production"
    assert cfg.license is not None and cfg.license["acceptEula"] is True
    assert cfg.features.auto_create_control_topics is True
    assert cfg.features.apply_mappings_guard is True
    assert cfg.source_client("admin") == {"bootstrap.servers": "source-kafka:9092"}
    assert cfg.target_client("consumer") == {"bootstrap.servers": "target-kafka:9093"}
    assert cfg.groups.poll_interval == timedelta(seconds=5)
    assert cfg.groups.consumer_groups == "^my-app-.*"
    assert cfg.offset_mapping.retention.max_age() is None
    assert cfg.metrics.kafka.topic == "__k2k_metrics"
    assert cfg.metrics.prefix.offset_mapping_app == "k2k.offsetmapping."
    control = cfg.topic_creation.control
    assert control.offset_mapping() == TopicSettings(
        6,
        3,
        {"cleanup.policy": "delete", "min.insync.replicas": "2", "retention.ms": "604800000"},
    )
    assert control.metrics().configs["retention.ms"] == "2592000000"
    assert cfg.configuration.auto_control_topic_creation_check_delay == timedelta(milliseconds=750)
    assert cfg.configuration.auto_control_topic_creation_max_attempts == 10
    assert cfg.error_handling.on_multiple_target_committed_offsets == "fail"
    assert cfg.error_handling.on_active_consumer_group_commit == "fail"


def test_defaults() -> None:
    cfg = app()
    assert cfg.license is None
    features = cfg.features
    assert features.auto_create_control_topics is False
    assert features.apply_mappings_guard is True
    assert features.validate_control_topic_settings is True
    groups = cfg.groups
    assert (groups.poll_interval, groups.consumer_groups) == (timedelta(seconds=5), ".*")
    assert groups.offset_guard_prefix == "k2k_"
    assert cfg.offset_mapping.topic == "__k2k_offset_mappings"
    retention = cfg.offset_mapping.retention
    assert (retention.time, retention.count, retention.schedule) == (
        "topic",
        1000,
        timedelta(minutes=5),
    )
    prefix = cfg.metrics.prefix
    assert (prefix.target_consumer, prefix.target_producer, prefix.offset_mapping_app) == (
        "k2k.offsetmapping.consumer.control.",
        "k2k.offsetmapping.producer.",
        "k2k.offsetmapping.",
    )
    assert cfg.metrics.kafka.topic == "__k2k-metrics"
    assert cfg.topic_creation.control.offset_mapping() == TopicSettings(
        1, -1, {"cleanup.policy": "delete"}
    )
    assert cfg.configuration.auto_control_topic_creation_check_delay == timedelta(milliseconds=750)
    assert cfg.configuration.auto_control_topic_creation_max_attempts == 10
    assert cfg.error_handling.on_multiple_target_committed_offsets == "fail"
    assert cfg.error_handling.on_active_consumer_group_commit == "fail"


def test_empty_sections_mean_defaults() -> None:
    cfg = app({"groups": None, "features": None, "metrics": None, "errorHandling": None})
    assert cfg.groups.consumer_groups == ".*"


@pytest.mark.parametrize(
    "spelling", ["applyMappingsGuard", "applyMappingsGuards", "apply_mappings_guard"]
)
def test_both_guard_spellings_are_read(spelling: str) -> None:
    assert app({"features": {spelling: "disabled"}}).features.apply_mappings_guard is False


def test_snake_case_keys_are_read() -> None:
    cfg = app(
        {
            "groups": {"poll_interval": "1 minute", "offset_guard_prefix": "g_"},
            "error_handling": {"on_active_consumer_group_commit": "ignore"},
            "offset_mapping": {"retention": {"time": "1 day"}},
        }
    )
    assert cfg.groups.poll_interval == timedelta(minutes=1)
    assert cfg.groups.offset_guard_prefix == "g_"
    assert cfg.error_handling.on_active_consumer_group_commit == "ignore"
    assert cfg.offset_mapping.retention.max_age() == timedelta(days=1)


# --- groups --------------------------------------------------------------------------------


def test_a_regex_matches_whole_group_names() -> None:
    groups = app({"groups": {"consumerGroups": "my-app-.*"}}).groups
    assert groups.selects("my-app-1")
    assert not groups.selects("old-my-app-1")
    assert not app({"groups": {"consumerGroups": "orders"}}).groups.selects("orders-2")


def test_a_list_names_exact_groups() -> None:
    groups = app({"groups": {"consumerGroups": ["orders", "my-app-.*"]}}).groups
    assert groups.selects("orders")
    assert groups.selects("my-app-.*")
    assert not groups.selects("my-app-1")


def test_the_default_selects_every_group() -> None:
    assert app().groups.selects("anything at all")


# --- render --------------------------------------------------------------------------------


def test_renders_and_loads_back() -> None:
    cfg = build_offset_mapping_app(yaml.safe_load(APP_EXAMPLE), {})
    text = render_effective(cfg)
    data = yaml.safe_load(text)
    assert "license" not in data
    assert list(data) == [
        "name",
        "features",
        "source",
        "target",
        "groups",
        "offsetMapping",
        "metrics",
        "topicCreation",
        "configuration",
        "errorHandling",
    ]
    assert data["features"]["applyMappingsGuard"] == "enabled"
    assert data["offsetMapping"]["retention"] == {
        "time": "topic",
        "count": 1000,
        "schedule": "5 minutes",
    }
    assert data["configuration"]["autoControlTopicCreationCheckDelay"] == "750 milliseconds"
    # Everything but the license (left out of the rendering) loads back the same.
    assert build_offset_mapping_app(data, {}) == cfg.model_copy(update={"license": None})


def test_a_group_list_and_an_age_round_trip() -> None:
    cfg = app(
        {
            "groups": {"consumerGroups": ["a", "b"]},
            "offsetMapping": {"retention": {"time": "12 hours"}},
        }
    )
    data = yaml.safe_load(render_effective(cfg))
    assert data["groups"]["consumerGroups"] == ["a", "b"]
    assert data["offsetMapping"]["retention"]["time"] == "12 hours"
    assert build_offset_mapping_app(data, {}) == cfg


def test_secrets_render_masked() -> None:
    cfg = app({"source": {"kafka": {"admin": {"sasl.username": "u", "sasl.password": "pw-9"}}}})
    assert cfg.source_client("admin")["sasl.password"] == "pw-9"
    assert "pw-9" not in render_effective(cfg)


# --- a replicator's file plus an overlay ---------------------------------------------------


def test_a_pipeline_file_plus_an_overlay_is_an_app_config(tmp_path: Path) -> None:
    overlay = tmp_path / "offset-mapping.yaml"
    overlay.write_text(GROUPS_OVERLAY, encoding="utf-8")
    env = {"K2K_DEMO_SOURCE": "src:9092", "K2K_DEMO_TARGET": "tgt:9092"}
    cfg = load_offset_mapping_app([REPO / "examples" / "demo-pipeline.yaml", overlay], env=env)
    assert cfg.name == "demo-dr"
    assert cfg.features.auto_create_control_topics is True  # shared with the replicator
    assert cfg.groups.selects("billing") and not cfg.groups.selects("bill")
    assert cfg.groups.poll_interval == timedelta(seconds=2)
    assert cfg.source_client("admin") == {"bootstrap.servers": "src:9092"}


def test_the_k2k_reference_pipeline_plus_an_overlay(tmp_path: Path) -> None:
    # The reference file's metrics topic is a placeholder text ("<metrics topic>").
    overlay = tmp_path / "offset-mapping.yaml"
    overlay.write_text(GROUPS_OVERLAY + "metrics: {kafka: {topic: __k2k-metrics}}\n", "utf-8")
    cfg = load_offset_mapping_app([DATA / "k2k_reference.yaml", overlay], env={})
    assert cfg.name == "my-pipeline"
    assert cfg.offset_mapping.topic == "__k2k_offset_mappings"
    assert cfg.error_handling.on_multiple_target_committed_offsets == "fail"


def test_replicator_only_keys_are_dropped_in_both_spellings() -> None:
    data = {
        "name": "n",
        "replication": [{"source": {"topic": "a"}}, {"sink": {}}],
        "coordination": {},
        "tracing": {},
        "schemaMapping": {},
        "schema_mapping": {},
        "bidirectional": {},
        "spark": {},
        "features": {"exactlyOnce": "enabled", "header_replication": True, "applyMappingsGuard": 1},
        "error_handling": {"on_commit_sync_timeout": "x", "onActiveConsumerGroupCommit": "fail"},
        "errorHandling": {"onControlMessageDeserializationError": "x"},
    }
    assert app_keys_only(data) == {
        "name": "n",
        "features": {"applyMappingsGuard": 1},
        "error_handling": {"onActiveConsumerGroupCommit": "fail"},
        "errorHandling": {},
    }


def test_placeholders_in_dropped_sections_need_not_resolve() -> None:
    cfg = app({"spark": {"conf": {"spark.secret": "${env:NOT_SET_ANYWHERE}"}}})
    assert cfg.name == "mapper"
    lines = app_problems({"groups": {"offsetGuardPrefix": "${env:NOT_SET_ANYWHERE}"}})
    assert lines[0].startswith("groups.offsetGuardPrefix: ")


# --- bad values ----------------------------------------------------------------------------

CASES = [
    pytest.param(
        {"groups": {"consumerGroups": "my-app-[("}},
        "groups.consumerGroups: invalid regular expression (unterminated character set at "
        "position 7), got 'my-app-[('; expected a regular expression matched against whole "
        "group names, or a list of exact group names",
        id="bad-regex",
    ),
    pytest.param(
        {"groups": {"consumerGroups": []}},
        "groups.consumerGroups: wrong type, got []",
        id="empty-group-list",
    ),
    pytest.param(
        {"groups": {"consumerGroups": ["ok", ""]}},
        "groups.consumerGroups[1]: not a group name, got ''; expected a non-empty string",
        id="empty-group-name",
    ),
    pytest.param(
        {"groups": {"offsetGuardPrefix": ""}},
        "groups.offsetGuardPrefix: empty, got ''; expected a non-empty value",
        id="empty-guard-prefix",
    ),
    pytest.param(
        {"groups": {"pollInterval": 5}},
        "groups.pollInterval: a bare number has no unit, got 5",
        id="bare-poll-interval",
    ),
    pytest.param(
        {"offsetMapping": {"retention": {"count": 0}}},
        "offsetMapping.retention.count: too small, got 0; expected a number >= 1",
        id="retention-count-zero",
    ),
    pytest.param(
        {"errorHandling": {"onActiveConsumerGroupCommit": "maybe"}},
        "errorHandling.onActiveConsumerGroupCommit: invalid value, got 'maybe'; "
        "expected one of: fail, ignore",
        id="bad-policy",
    ),
    pytest.param(
        {
            "topicCreation": {
                "control": {"offsetMapping": {"config": {"cleanup.policy": "compact"}}}
            }
        },
        "topicCreation.control.offsetMapping.config.cleanup.policy: refused, got 'compact'; "
        "expected delete (the Offset Mapping app trims old mappings with DeleteRecords",
        id="mapping-topic-compacted",
    ),
    pytest.param(
        {"configuration": {"autoControlTopicCreationMaxAttempts": 0}},
        "configuration.autoControlTopicCreationMaxAttempts: too small, got 0; "
        "expected a number >= 1",
        id="max-attempts-zero",
    ),
    pytest.param(
        {"features": {"applyMappingsGuard": "on"}},
        "features.applyMappingsGuard: invalid value, got 'on'; expected one of: enabled, disabled",
        id="bad-flag",
    ),
    pytest.param(
        {"features": {"applyMappingsGuards": "maybe"}},
        "features.applyMappingsGuards: invalid value, got 'maybe'; "
        "expected one of: enabled, disabled",
        id="bad-flag-other-spelling",
    ),
    pytest.param(
        {"features": {"applyMappingsGuard": "enabled", "applyMappingsGuards": "disabled"}},
        "features.applyMappingsGuards: the same setting as 'applyMappingsGuard', given twice",
        id="two-guard-spellings",
    ),
    pytest.param(
        {"metrics": {"kafka": {"topic": "__k2k_offset_mappings"}}},
        "metrics.kafka.topic: same topic as offsetMapping.topic, got '__k2k_offset_mappings'",
        id="metrics-topic-is-mapping-topic",
    ),
    pytest.param(
        {"groupz": {}},
        "groupz: unknown key; did you mean 'groups'?",
        id="unknown-top-level",
    ),
    pytest.param(
        {"features": {"aplyMappingsGuard": "enabled"}},
        "features.aplyMappingsGuard: unknown key; did you mean 'applyMappingsGuard'?",
        id="unknown-feature",
    ),
    pytest.param(
        {"errorHandling": {"onActiveGroupCommit": "fail"}},
        "errorHandling.onActiveGroupCommit: unknown key; did you mean "
        "'onActiveConsumerGroupCommit'?",
        id="unknown-policy",
    ),
    pytest.param(
        {"metrics": {"prefix": {"targetConsumr": "x"}}},
        "metrics.prefix.targetConsumr: unknown key; did you mean 'targetConsumer'?",
        id="unknown-metric-prefix",
    ),
    pytest.param(
        {"name": "my app"},
        "name: invalid characters, got 'my app'",
        id="bad-name",
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES)
def test_bad_values_name_the_key_path(overrides: dict[str, Any], expected: str) -> None:
    lines = app_problems(overrides)
    assert any(line.startswith(expected) for line in lines), lines


def test_missing_required_keys() -> None:
    with pytest.raises(ConfigError) as caught:
        build_offset_mapping_app({}, {})
    assert caught.value.problems == [
        "name: missing; expected a name made of letters, digits, '.', '_' and '-' (it is used "
        "in Kafka ids)",
        "source: missing; expected a mapping with kafka.common.bootstrap.servers",
        "target: missing; expected a mapping with kafka.common.bootstrap.servers",
    ]
