"""``replication[].transforms`` as the file gives it: one line per bad step, the steps that
cannot work with the rest of the pipeline, and the file written back."""

from __future__ import annotations

from typing import Any

import pytest

from k2k.config.loader import build_pipeline
from k2k.config.render import render_effective
from tests.helpers.config import pipeline


def with_steps(*items: Any, sink: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "replication": [
            {"source": {"topic": "orders.*"}},
            {"transforms": list(items)},
            {"sink": sink or {"topic": "source"}},
        ]
    }


CASES = [
    pytest.param(
        with_steps({"filtr": {"drop": "true"}}),
        "replication.transforms[0].filtr: unknown key; did you mean 'filter'?",
        id="unknown-step",
    ),
    pytest.param(
        with_steps({"filter": {"drop": "true"}}, {"filter": {"drop": "headers.env =="}}),
        "replication.transforms[1].filter.drop: expression does not compile: 1:15: Syntax error",
        id="bad-expression",
    ),
    pytest.param(
        with_steps({"filter": {"keep": "amount > 3"}}),
        "replication.transforms[0].filter.keep: expression names unknown 'amount'; expected a "
        "CEL expression over topic, targetTopic, partition, offset, timestamp, key, value, headers, "
        "keyJson, valueJson",
        id="unknown-name",
    ),
    pytest.param(
        with_steps({"filter": {"drop": "true", "keep": "true"}}),
        "replication.transforms[0].filter: needs a condition; expected either drop: EXPR or "
        "keep: EXPR, not both",
        id="filter-both",
    ),
    pytest.param(
        with_steps({"maskFields": {"fields": ["email"]}}),
        "replication.transforms[0].maskFields.fields[0]: not a field path, got 'email'",
        id="field-path",
    ),
    pytest.param(
        with_steps({"insertHeader": {"name": "a", "value": "b", "when": "bogus"}}),
        "replication.transforms[0].insertHeader.when: expression names unknown 'bogus'",
        id="bad-when",
    ),
    pytest.param(
        with_steps({"maskFields": {"fields": ["value.a"], "nonJson": "ignore"}}),
        "replication.transforms[0].maskFields.nonJson:",
        id="non-json-policy",
    ),
    pytest.param(
        with_steps({"filter": {"drop": "true"}}, sink={"topic": "source", "offsets": "identical"}),
        "replication.transforms[0]: cannot be combined with a filter or a step with onError: "
        "skip: they leave records out",
        id="identical-filter",
    ),
    pytest.param(
        {
            **with_steps({"dropFields": {"fields": ["value.a"]}}),
            "features": {"schemaMapping": "enabled"},
            "source": {"registry": {"config": {"schema.registry.url": "http://a:8081"}}},
            "target": {"registry": {"config": {"schema.registry.url": "http://b:8081"}}},
        },
        "replication.transforms[0]: dropFields rewrites JSON, and schema mapping's records are "
        "Schema Registry framed, not JSON",
        id="json-with-schema-mapping",
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES)
def test_a_bad_step_is_one_line_naming_it(problems: Any, overrides: dict, expected: str) -> None:
    lines = problems(overrides)
    assert any(line.startswith(expected) for line in lines), lines
    assert all("\n" not in line and "pydantic" not in line for line in lines)


def test_steps_are_read_in_order_and_written_back_in_the_stage_list() -> None:
    data = with_steps(
        {"filter": {"drop": '"x" in headers'}},
        {"mask_fields": {"fields": ["value.a"], "hashSecret": "s3cr3t"}},
    )
    cfg = build_pipeline(pipeline(data), {})
    kinds = [item.step.kind for item in cfg.replication.transforms]
    assert kinds == ["filter", "maskFields"]
    text = render_effective(cfg)
    assert "s3cr3t" not in text
    assert text.index("- source:") < text.index("- transforms:") < text.index("- sink:")


def test_no_transforms_stage_is_no_steps() -> None:
    cfg = build_pipeline(pipeline(), {})
    assert cfg.replication.transforms == ()
