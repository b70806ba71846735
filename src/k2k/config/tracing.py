"""``tracing``: the names of the tracing headers; which ones are added is
``features.tracingHeaders`` (:mod:`k2k.config.features`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from k2k.config.base import K2KModel
from k2k.config.base import raise_problems as _raise
from k2k.config.errors import Problem, describe

__all__ = ["Tracing", "TracingHeaderNames"]


class TracingHeaderNames(K2KModel):
    """Names of the tracing headers (which ones are added: ``features.tracingHeaders``)."""

    topic: str = Field("k2k_topic", min_length=1, description="Header carrying the source topic.")
    partition: str = Field(
        "k2k_partition", min_length=1, description="Header carrying the source partition."
    )
    offset: str = Field(
        "k2k_offset", min_length=1, description="Header carrying the source offset."
    )
    pipeline: str = Field(
        "k2k_pipeline", min_length=1, description="Header carrying the pipeline name."
    )

    @model_validator(mode="after")
    def _distinct(self) -> TracingHeaderNames:
        problems: list[Problem] = []
        seen: dict[str, str] = {}
        for name in type(self).model_fields:
            header = getattr(self, name)
            if header in seen:
                what = f"same header name as tracing.headers.{seen[header]}"
                problems.append(
                    ((name,), describe(what, got=header, expected="four different header names"))
                )
            else:
                seen[header] = name
        _raise(problems)
        return self


class Tracing(K2KModel):
    """Record tracing settings."""

    headers: TracingHeaderNames = Field(
        default_factory=TracingHeaderNames, description="Tracing header names."
    )
