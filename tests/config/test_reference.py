"""docs/config.md is generated from the model and must not drift from it."""

from __future__ import annotations

from pathlib import Path

import yaml

from k2k.config.loader import build_pipeline
from k2k.config.model import PipelineConfig
from k2k.config.reference import EXAMPLE, generate

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"


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
            if isinstance(field.annotation, type) and hasattr(field.annotation, "model_fields"):
                visit(field.annotation, f"{prefix}{name}.")

    visit(PipelineConfig, "")
    assert missing == []


def test_the_documented_example_is_a_valid_pipeline() -> None:
    cfg = build_pipeline(yaml.safe_load(EXAMPLE), {"SOURCE_PASSWORD": "pw"})
    assert cfg.source_client("consumer")["sasl.username"] == "k2k"
    assert cfg.source_client("consumer")["ssl.ca.location"] == "/etc/k2k/ca.pem"
