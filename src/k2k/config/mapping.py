"""``offsetMapping``: the offset-mapping topic and its retention, shared by both configurations.

The replicator writes mappings to ``offsetMapping.topic`` (``features.offsetMapping``); the
Offset Mapping app (``k2k offset-mapping start``) reads them and trims them by
``offsetMapping.retention``. Both read the same section, so one file can serve both.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer
from pydantic_core import PydanticCustomError

from k2k.config.base import K2KModel
from k2k.config.durations import EXAMPLE as DURATION_EXAMPLE
from k2k.config.durations import format_duration
from k2k.config.errors import problems_error
from k2k.config.fields import Count, Duration, TopicName, duration_value
from k2k.config.hints import FieldDoc

__all__ = ["MappingRetention", "OffsetMappingSettings", "RetentionTime"]

_TOPIC: Literal["topic"] = "topic"


_TIME_EXPECTED = "'topic' or a duration such as '7 days'"


def _retention_time(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == _TOPIC:
        return _TOPIC
    try:
        return duration_value(value)
    except PydanticCustomError as exc:
        # Same reason ("a bare number has no unit" ...), but ask for either form.
        problems = [
            (path, text.replace(DURATION_EXAMPLE, _TIME_EXPECTED))
            for path, text in (exc.context or {}).get("problems", ())
        ]
        raise problems_error(problems) from None


def _show_retention_time(value: str | timedelta) -> str:
    return value if isinstance(value, str) else format_duration(value)


RetentionTime = Annotated[
    Literal["topic"] | timedelta,
    BeforeValidator(_retention_time),
    PlainSerializer(_show_retention_time, return_type=str),
    FieldDoc("`topic` | duration", _TIME_EXPECTED),
]


class MappingRetention(K2KModel):
    """Which mappings the Offset Mapping app's cleaner deletes, and how often it looks.

    The cleaner never deletes a mapping still needed to translate a live group's committed
    position, whatever these settings say.
    """

    time: RetentionTime = Field(
        _TOPIC,
        description="`topic`: the mapping topic's own `retention.ms` decides how long mappings "
        "live and the app deletes none by age. A duration (e.g. `7 days`): the app's cleaner "
        "deletes mappings older than it.",
    )
    count: Count = Field(
        1000,
        ge=1,
        description="Mapping runs kept per source partition (the newest); the app's cleaner "
        "deletes older ones.",
    )
    schedule: Duration = Field(
        timedelta(minutes=5), description="How often the Offset Mapping app's cleaner runs."
    )

    def max_age(self) -> timedelta | None:
        """The age past which mappings are deleted; None when the topic's retention decides."""
        return None if isinstance(self.time, str) else self.time


class OffsetMappingSettings(K2KModel):
    """The offset-mapping topic on the target: written by the replicator when
    ``features.offsetMapping`` is enabled, read by ``k2k offset-mapping start``, whose cleaner
    applies ``retention``. The cleaner never deletes a mapping still needed to translate a live
    group's committed position.
    """

    topic: TopicName = Field(
        "__k2k_offset_mappings",
        description="Topic on the target holding source->target offset mappings (one record per "
        "contiguous run of replicated records). Its creation settings are "
        "`topicCreation.control.offsetMapping`.",
    )
    retention: MappingRetention = Field(
        default_factory=MappingRetention,
        description="How long mappings are kept (used by the Offset Mapping app). The app never "
        "deletes a mapping still needed to translate a live group's committed position.",
    )
