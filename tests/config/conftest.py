"""Shared helpers for the config tests: a minimal valid pipeline and problem collectors."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from k2k.config import PipelineConfig
from k2k.config.loader import build_pipeline, deep_merge
from k2k.errors import ConfigError

MINIMAL: dict[str, Any] = {
    "name": "orders-dr",
    "source": {"kafka": {"common": {"bootstrap.servers": "src:9092"}}},
    "target": {"kafka": {"common": {"bootstrap.servers": "tgt:9092"}}},
    "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": "source"}}],
}


def pipeline(overrides: Mapping[str, Any] | None = None, **replace: Any) -> dict[str, Any]:
    """MINIMAL deep-merged with ``overrides``; keyword arguments replace top-level keys."""
    data = deep_merge(copy.deepcopy(MINIMAL), overrides or {})
    for key, value in replace.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


@pytest.fixture
def build() -> Callable[..., PipelineConfig]:
    """Validate a pipeline dict (MINIMAL + overrides) with an empty environment."""

    def _build(
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        **replace: Any,
    ) -> PipelineConfig:
        return build_pipeline(pipeline(overrides, **replace), env or {})

    return _build


@pytest.fixture
def problems() -> Callable[..., list[str]]:
    """The ConfigError problem lines for MINIMAL + overrides (fails if it validates)."""

    def _problems(
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        **replace: Any,
    ) -> list[str]:
        with pytest.raises(ConfigError) as caught:
            build_pipeline(pipeline(overrides, **replace), env or {})
        return caught.value.problems

    return _problems
