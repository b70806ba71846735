"""``heartbeats``: MirrorMaker 2 heartbeats emitted into the target (``features.heartbeats``)
and replicated downstream (``replicate``).

The pipeline's driver writes one record ``{source alias, target alias, time}`` to the
target's ``heartbeats`` topic every ``interval``, as MM2's heartbeat connector does, so that
MM2's tools see the replication flow (docs/mm2.md#heartbeats).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from k2k.config.base import K2KModel
from k2k.config.fields import Duration, Flag
from k2k.stages.policies import HEARTBEATS_TOPIC

__all__ = ["Heartbeats"]


class Heartbeats(K2KModel):
    """How often heartbeats are emitted (``features.heartbeats``), and whether a replication
    policy carries the source's heartbeats downstream."""

    interval: Duration = Field(
        timedelta(seconds=1),
        description="Time between two heartbeat records (MM2's "
        "`emit.heartbeats.interval.seconds`, default 1 s).",
    )
    replicate: Flag = Field(
        True,
        description="With a replication policy, replicate the source's heartbeats topics "
        "(`heartbeats`, `<alias>.heartbeats`, ...) whatever `replication.source.topic` and "
        "`exclude` say, as MM2 does (`heartbeats.replication.enabled`, default true); when "
        "disabled they are selected like any other topic. Independent of "
        "`features.heartbeats`, which emits them.",
    )

    @property
    def topic(self) -> str:
        """The target topic heartbeats go to: MM2's fixed ``heartbeats``."""
        return HEARTBEATS_TOPIC
