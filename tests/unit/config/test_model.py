"""Good-path behaviour of the model: defaults, routing variants, flags, coordination spellings."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from k2k.config import (
    ExplicitTopicMap,
    PipelineConfig,
    PrefixSuffixTopicName,
    SameTopicName,
    StaticTopicName,
    TracingToggles,
)
from k2k.config.coordination import EXACTLY_ONCE_BATCH_SIZE
from tests.helpers.config import MINIMAL


def test_defaults_match_the_contract(build: Any) -> None:
    cfg: PipelineConfig = build()
    features = cfg.features
    assert features.exactly_once is False
    assert features.keep_record_creation_timestamp is True
    assert features.header_replication is False
    assert features.auto_create_topics is False
    assert features.auto_create_control_topics is False
    assert features.validate_control_topic_settings is True
    assert features.tracing_headers == TracingToggles()
    assert not features.tracing_headers.any
    headers = cfg.tracing.headers
    assert (headers.topic, headers.partition, headers.offset, headers.pipeline) == (
        "k2k_topic",
        "k2k_partition",
        "k2k_offset",
        "k2k_pipeline",
    )
    assert cfg.source.connect_timeout == timedelta(seconds=15)
    assert cfg.target.connect_timeout == timedelta(seconds=15)
    assert cfg.replication.source.name == "source"
    assert cfg.replication.source.discovery_interval == timedelta(seconds=30)
    assert cfg.replication.sink.name == "sink"
    assert cfg.replication.sink.topic == SameTopicName()
    assert cfg.replication.sink.partition == "source"
    commit = cfg.coordination.commit
    assert (commit.topic, commit.batch_size, commit.group) == ("__k2k_consumer-offsets", 1000, None)
    assert commit.batch_timeout == timedelta(seconds=2)
    assert commit.sync_timeout == timedelta(seconds=30)
    assert cfg.commit_group == "orders-dr"
    assignment = cfg.coordination.assignment
    assert assignment.topic == "__k2k_assignment"
    assert assignment.grace_window == timedelta(seconds=15)
    assert assignment.fencing_max_parallelism == 5
    assert cfg.error_handling.on_commit_sync_timeout == "fail"
    assert cfg.error_handling.on_control_message_deserialization_error == "fail"
    control, replicated = cfg.topic_creation.control, cfg.topic_creation.replicated
    assert (control.partitions, control.replication_factor, control.configs) == (1, -1, {})
    assert (replicated.partitions, replicated.replication_factor, replicated.configs) == (
        None,
        None,  # mirrors the source topic's
        {},
    )
    assert replicated.common is None
    assert (cfg.spark.master, cfg.spark.conf, cfg.spark.parallelism) == ("local[*]", {}, None)
    assert cfg.spark.lease_duration == timedelta(minutes=5)
    assert cfg.license is None


@pytest.mark.parametrize(
    ("yaml_value", "expected"),
    [
        ("source", SameTopicName()),
        (None, SameTopicName()),
        ({"prefix": "eu."}, PrefixSuffixTopicName("eu.", "")),
        ({"suffix": ".copy"}, PrefixSuffixTopicName("", ".copy")),
        ({"prefix": "eu.", "suffix": ".copy"}, PrefixSuffixTopicName("eu.", ".copy")),
        ("all-events", StaticTopicName("all-events")),
        (
            {"map": {"orders": "orders-dr", "pay": "pay"}},
            ExplicitTopicMap({"orders": "orders-dr", "pay": "pay"}),
        ),
    ],
)
def test_every_routing_variant_parses_to_its_class(
    build: Any, yaml_value: Any, expected: Any
) -> None:
    cfg = build({"replication": [{"source": {"topic": "orders"}}, {"sink": {"topic": yaml_value}}]})
    assert cfg.replication.sink.topic == expected
    assert type(cfg.replication.sink.topic) is type(expected)


def test_routing_values_are_frozen_and_positional() -> None:
    routing = PrefixSuffixTopicName("eu.", ".copy")
    assert (routing.prefix, routing.suffix) == ("eu.", ".copy")
    with pytest.raises(AttributeError):
        routing.prefix = "us."  # type: ignore[misc]


def test_sink_stage_defaults_when_the_item_is_empty(build: Any) -> None:
    cfg = build({"replication": [{"source": {"topic": ["orders"]}}, {"sink": None}]})
    assert cfg.replication.sink.topic == SameTopicName()
    assert cfg.replication.source.topic == ["orders"]


def test_same_cluster_is_fine_with_renaming(build: Any) -> None:
    cfg = build(
        {
            "target": {"kafka": {"common": {"bootstrap.servers": "src:9092"}}},
            "replication": [{"source": {"topic": "a"}}, {"sink": {"topic": {"suffix": ".copy"}}}],
        }
    )
    assert cfg.replication.sink.topic == PrefixSuffixTopicName("", ".copy")


def test_replication_also_reads_the_mapping_form(build: Any) -> None:
    cfg = build(replication={"source": {"topic": "a"}, "sink": {"topic": "b"}})
    assert cfg.replication.sink.topic == StaticTopicName("b")


@pytest.mark.parametrize(
    ("spelling", "normalised"),
    [
        ("source", "source"),
        ("hash", "hash"),
        ("key", "hash"),
        ("murmur2", "hash"),
        ("Murmur2", "hash"),
        ("producer", "producer"),
        ("Producer", "producer"),
    ],
)
def test_partition_spellings(build: Any, spelling: str, normalised: str) -> None:
    cfg = build({"replication": [{"source": {"topic": "a"}}, {"sink": {"partition": spelling}}]})
    assert cfg.replication.sink.partition == normalised


@pytest.mark.parametrize("value", ["enabled", "Enabled", True])
def test_flags_read_strings_and_yaml_booleans(build: Any, value: Any) -> None:
    assert build({"features": {"headerReplication": value}}).features.header_replication is True


def test_feature_flags_accepted_without_effect(build: Any) -> None:
    cfg = build(
        {
            "features": {
                "checkKafkaConnectionOnStartup": "enabled",
                "optimizeOffsetCommitPartition": "disabled",
                "exactlyOnce": False,
                "schemaMapping": "disabled",
            }
        }
    )
    assert cfg.features.check_kafka_connection_on_startup is True
    assert cfg.features.optimize_offset_commit_partition is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("enabled", TracingToggles(topic=True, partition=True, offset=True, pipeline=True)),
        ("disabled", TracingToggles()),
        ({"topic": "enabled", "offset": "enabled"}, TracingToggles(topic=True, offset=True)),
        ({"pipeline": True}, TracingToggles(pipeline=True)),
    ],
)
def test_tracing_headers_forms(build: Any, value: Any, expected: TracingToggles) -> None:
    toggles = build({"features": {"tracingHeaders": value}}).features.tracing_headers
    assert toggles == expected
    assert toggles.any is (expected != TracingToggles())


def test_tracing_header_names_can_be_renamed(build: Any) -> None:
    headers = build({"tracing": {"headers": {"topic": "src_topic"}}}).tracing.headers
    assert (headers.topic, headers.offset) == ("src_topic", "k2k_offset")


def test_both_coordination_spellings_merge(build: Any) -> None:
    cfg = build(
        {
            "coordination": {
                "commit": {"batchSize": 10, "topic": "ctl.commit"},
                "kafka": {
                    "charset": "UTF-8",
                    "consumer": {},
                    "commit": {"topic": "ctl.commit", "batchTimeout": "500 ms", "group": "g"},
                    "assignment": {"fencingMaxParallelism": 2},
                },
            }
        }
    )
    commit = cfg.coordination.commit
    assert (commit.topic, commit.batch_size, commit.group) == ("ctl.commit", 10, "g")
    assert commit.batch_timeout == timedelta(milliseconds=500)
    assert cfg.coordination.assignment.fencing_max_parallelism == 2
    assert cfg.coordination.assignment.topic == "__k2k_assignment"
    assert cfg.commit_group == "g"


@pytest.mark.parametrize(
    ("coordination", "expected"),
    [
        ({}, EXACTLY_ONCE_BATCH_SIZE),
        ({"commit": {"batchTimeout": "1 second"}}, EXACTLY_ONCE_BATCH_SIZE),
        ({"commit": {"batchSize": 1000}}, 1000),
        ({"kafka": {"commit": {"batchSize": 1000}}}, 1000),
        ({"commit": {"batchSize": 50_000}}, 50_000),
    ],
)
def test_exactly_once_batches_are_larger_unless_batch_size_is_given(
    build: Any, coordination: dict[str, Any], expected: int
) -> None:
    cfg = build({"features": {"exactlyOnce": "enabled"}, "coordination": coordination})
    assert cfg.coordination.commit.batch_size == expected
    # The rendered configuration, read again, keeps the size it resolved to.
    again = PipelineConfig.model_validate(cfg.model_dump(by_alias=True, mode="json"))
    assert again.coordination.commit.batch_size == expected


def test_snake_case_keys_are_read_too(build: Any) -> None:
    cfg = build(
        {
            "coordination": {"commit": {"batch_size": 7}},
            "error_handling": {"on_commit_sync_timeout": "ignore"},
        }
    )
    assert cfg.coordination.commit.batch_size == 7
    assert cfg.error_handling.on_commit_sync_timeout == "ignore"


def test_string_maps_are_stringified(build: Any) -> None:
    cfg = build(
        {
            "spark": {"conf": {"spark.ui.enabled": False, "spark.executor.cores": 2}},
            "topicCreation": {"replicated": {"configs": {"retention.ms": 86400000}}},
        }
    )
    assert cfg.spark.conf == {"spark.ui.enabled": "false", "spark.executor.cores": "2"}
    assert cfg.topic_creation.replicated.configs == {"retention.ms": "86400000"}


def test_empty_sections_mean_defaults(build: Any) -> None:
    cfg = build({"features": None, "spark": None, "topicCreation": {}})
    assert cfg.features.keep_record_creation_timestamp is True
    assert cfg.spark.master == "local[*]"


def test_metrics_block_sets_the_topic_and_the_prefix(build: Any) -> None:
    cfg = build({"metrics": {"kafka": {"topic": "ops.metrics"}, "prefix": {"replicator": "dr."}}})
    assert (cfg.metrics.kafka.topic, cfg.metrics.prefix.replicator) == ("ops.metrics", "dr.")
    assert build({}).metrics.prefix.replicator == "k2k."


def test_config_is_frozen_and_picklable(build: Any) -> None:
    cfg = build({"source": {"kafka": {"common": {"sasl.password": "pw", "sasl.username": "u"}}}})
    with pytest.raises(ValidationError):
        cfg.name = "other"  # type: ignore[misc]
    copy = pickle.loads(pickle.dumps(cfg))
    assert copy == cfg
    assert copy.source_client("consumer")["sasl.password"] == "pw"


def test_model_validate_is_the_same_rules() -> None:
    with pytest.raises(ValidationError):
        PipelineConfig.model_validate({**MINIMAL, "name": ""})


@pytest.mark.parametrize("exclude", ["orders\\.test.*", ["orders.test1", "orders.test2"]])
def test_source_exclude_wins_over_topic(build: Any, exclude: Any) -> None:
    cfg = build(
        {"replication": [{"source": {"topic": "orders.*", "exclude": exclude}}, {"sink": {}}]}
    )
    assert cfg.replication.source.exclude == exclude
    selection = cfg.topic_selection()
    chosen = [
        t
        for t in ["orders", "orders.test1", "orders.test2", "orders.eu"]
        if selection.should_replicate(t)
    ]
    assert chosen == ["orders", "orders.eu"]
    assert build().replication.source.exclude is None


def test_excluded_listed_topics_need_no_map_entry(build: Any) -> None:
    cfg = build(
        {
            "replication": [
                {"source": {"topic": ["orders", "payments"], "exclude": ["payments"]}},
                {"sink": {"topic": {"map": {"orders": "o2"}}}},
            ]
        }
    )
    assert not cfg.topic_selection().should_replicate("payments")


def test_coordination_kafka_consumer_configures_the_control_readers(build: Any) -> None:
    """``coordination.kafka.consumer`` (K2K's spelling) goes over ``target.kafka.consumer``
    for the readers of the control topics, translated like any client map; the readers of
    replicated data keep the target's own settings."""
    cfg = build(
        {
            "target": {
                "kafka": {
                    "common": {"bootstrap.servers": "t:9092"},
                    "consumer": {"fetch.max.wait.ms": "100", "client.id": "target-reader"},
                }
            },
            "coordination": {
                "kafka": {"consumer": {"fetch.max.wait.ms": "250", "receive.buffer.bytes": "-1"}}
            },
        }
    )
    control = cfg.control_consumer()
    assert control["fetch.wait.max.ms"] == "250"
    assert control["socket.receive.buffer.bytes"] == "0"  # the Java spelling, translated
    assert control["client.id"] == "target-reader"
    assert cfg.target_client("consumer")["fetch.wait.max.ms"] == "100"
