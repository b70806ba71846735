"""docs/config.md is generated from the model and must not drift from it."""

from __future__ import annotations

from typing import get_args

import yaml

from k2k.config.loader import build_offset_mapping_app, build_pipeline
from k2k.config.model import PipelineConfig
from k2k.config.offset_mapping import OffsetMappingAppConfig
from k2k.config.reference import APP_EXAMPLE, EXAMPLE, generate
from tests.helpers.paths import REPO

DOCS = REPO / "docs" / "config.md"


def test_docs_config_md_is_up_to_date() -> None:
    assert DOCS.read_text(encoding="utf-8") == generate(), (
        "docs/config.md is out of date with src/k2k/config/; regenerate it with:\n"
        "    .venv/bin/python -m k2k.config.reference > docs/config.md"
    )


def _paths(model: type, prefix: str = "") -> list[str]:
    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}.{field.alias or name}" if prefix else field.alias or name
        paths.append(path)
        annotation = field.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            paths.extend(_paths(annotation, path))
    return paths


def test_every_key_and_description_is_documented() -> None:
    text = generate()
    leaves = [p for p in _paths(PipelineConfig) if f"`{p}`" in text]
    assert "`coordination.commit.batchSize`" in text
    assert "`replication.sink.topic`" in text
    assert "`features.tracingHeaders`" in text
    assert len(leaves) >= 60


def test_every_field_has_a_description() -> None:
    missing = []

    def visit(model: type, prefix: str) -> None:
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(f"{prefix}{name}")
            # Sections, including optional ones (`TopicBlock | None`).
            for annotation in (field.annotation, *get_args(field.annotation)):
                if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                    visit(annotation, f"{prefix}{name}.")

    visit(PipelineConfig, "")
    visit(OffsetMappingAppConfig, "app:")
    assert missing == []


def test_the_documented_example_is_a_valid_pipeline() -> None:
    cfg = build_pipeline(yaml.safe_load(EXAMPLE), {"SOURCE_PASSWORD": "pw"})
    assert cfg.source_client("consumer")["sasl.username"] == "k2k"
    assert cfg.source_client("consumer")["ssl.ca.location"] == "/etc/k2k/ca.pem"


def test_the_offset_mapping_app_is_documented() -> None:
    text = generate()
    app = text.split("# Offset Mapping app configuration (`k2k offset-mapping start`)", 1)[1]
    for key in (
        "groups.consumerGroups",
        "features.applyMappingsGuard",
        "offsetMapping.retention.time",
        "metrics.prefix.offsetMappingApp",
        "configuration.autoControlTopicCreationMaxAttempts",
        "errorHandling.onActiveConsumerGroupCommit",
        "topicCreation",
    ):
        assert f"| `{key}` |" in app, key
    assert "`topicCreation.control.offsetMapping`" in text.split(app)[0]
    assert APP_EXAMPLE.strip() in app


def test_the_documented_app_example_is_valid() -> None:
    cfg = build_offset_mapping_app(yaml.safe_load(APP_EXAMPLE), {})
    assert cfg.topic_creation.control.offset_mapping().partitions == 6
