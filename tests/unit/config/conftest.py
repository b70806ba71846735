"""Fixtures for the config tests: validating MINIMAL + overrides, and collecting problems."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from k2k.config import PipelineConfig
from k2k.config.loader import build_pipeline
from k2k.errors import ConfigError
from tests.helpers.config import pipeline


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
