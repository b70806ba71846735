"""render_effective: K2K layout, human durations, secrets masked, loadable again."""

from __future__ import annotations

from typing import Any

import yaml

from k2k.config import render_effective
from k2k.config.loader import build_pipeline
from tests.helpers.config import pipeline


def test_renders_k2k_layout(build: Any) -> None:
    cfg = build(
        {
            "features": {"tracingHeaders": {"topic": "enabled", "offset": "enabled"}},
            "replication": [
                {"source": {"topic": ["orders", "payments"]}},
                {"sink": {"topic": {"map": {"orders": "o", "payments": "p"}}, "partition": "key"}},
            ],
            "coordination": {"commit": {"batchTimeout": "1.5 seconds"}},
            "license": {"acceptEula": True},
        }
    )
    data = yaml.safe_load(render_effective(cfg))
    assert list(data) == [
        "name",
        "features",
        "source",
        "target",
        "replication",
        "coordination",
        "tracing",
        "schemaMapping",
        "bidirectional",
        "offsetMapping",
        "heartbeats",
        "checkpoints",
        "syncGroupOffsets",
        "errorHandling",
        "metrics",
        "topicCreation",
        "spark",
    ]
    assert data["features"]["exactlyOnce"] == "disabled"
    assert data["features"]["keepRecordCreationTimestamp"] == "enabled"
    assert data["features"]["tracingHeaders"] == {
        "topic": "enabled",
        "partition": "disabled",
        "offset": "enabled",
        "pipeline": "disabled",
    }
    assert data["replication"] == [
        {
            "source": {
                "name": "source",
                "topic": ["orders", "payments"],
                "discoveryInterval": "30 seconds",
                "exclude": None,
            }
        },
        {
            "sink": {
                "name": "sink",
                "topic": {"map": {"orders": "o", "payments": "p"}},
                "partition": "hash",
                "offsets": {"mode": "assigned", "maxFill": 1_000_000},
            }
        },
    ]
    assert data["coordination"]["kafka"]["commit"] == {
        "topic": "__k2k_consumer-offsets",
        "batchSize": 1000,
        "batchTimeout": "1500 milliseconds",
        "syncTimeout": "30 seconds",
        "group": None,
    }
    assert data["spark"]["leaseDuration"] == "5 minutes"
    assert data["source"]["connectTimeout"] == "15 seconds"


def test_tracing_headers_all_or_nothing_render_as_one_word(build: Any) -> None:
    on = yaml.safe_load(render_effective(build({"features": {"tracingHeaders": "enabled"}})))
    off = yaml.safe_load(render_effective(build()))
    assert on["features"]["tracingHeaders"] == "enabled"
    assert off["features"]["tracingHeaders"] == "disabled"


def test_routing_forms_render_as_written(build: Any) -> None:
    for written in ("source", "all-events", {"prefix": "eu.", "suffix": ""}):
        cfg = build({"replication": [{"source": {"topic": "a"}}, {"sink": {"topic": written}}]})
        data = yaml.safe_load(render_effective(cfg))
        assert data["replication"][1]["sink"]["topic"] == written


def test_rendered_config_loads_back_to_the_same_config(build: Any) -> None:
    cfg = build(
        {
            "features": {"tracingHeaders": {"pipeline": "enabled"}, "headerReplication": "enabled"},
            "replication": [
                {"source": {"topic": "orders.*", "discoveryInterval": "1 minute"}},
                {"sink": {"topic": {"prefix": "dr."}}},
            ],
            "coordination": {"kafka": {"assignment": {"graceWindow": "20s"}}},
            "target": {"kafka": {"producer": {"max.request.size": 2000000}}},
            "spark": {"conf": {"spark.ui.enabled": False}, "parallelism": 4},
            "topicCreation": {"replicated": {"partitions": 6}},
        }
    )
    again = build_pipeline(yaml.safe_load(render_effective(cfg)), {})
    assert again == cfg


def test_secrets_render_masked(build: Any) -> None:
    cfg = build(
        {"target": {"kafka": {"common": {"sasl.username": "u", "sasl.password": "pw-123"}}}}
    )
    text = render_effective(cfg)
    assert "pw-123" not in text
    assert yaml.safe_load(text)["target"]["kafka"]["common"]["sasl.password"] == "******"


def test_license_is_left_out(build: Any) -> None:
    data = yaml.safe_load(render_effective(build({"license": {"token": "t"}})))
    assert "license" not in data


def test_render_is_valid_for_the_minimal_pipeline() -> None:
    cfg = build_pipeline(pipeline(), {})
    assert build_pipeline(yaml.safe_load(render_effective(cfg)), {}) == cfg
