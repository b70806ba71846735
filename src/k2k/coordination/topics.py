"""Control topics on the target: created on request, otherwise validated.

Progress and assignment topics are compacted (their newest record per key is the state);
the offset-mapping topic is trimmed by the Offset Mapping app with DeleteRecords, which
compacted-only topics refuse, so it has ``cleanup.policy`` ``delete``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from k2k.errors import TopicError
from k2k.kafka.admin import ClusterView

if TYPE_CHECKING:
    from k2k.config.topics import TopicSettings

__all__ = ["ensure_control_topic", "ensure_mm2_topic"]


def ensure_control_topic(
    target: ClusterView,
    name: str,
    key_path: str,
    *,
    auto_create: bool,
    validate: bool,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    policy: str = "compact",
    why: str | None = None,
    must_have: Mapping[str, tuple[str, str]] | None = None,
) -> int:
    """Make sure control topic ``name`` exists and its ``cleanup.policy`` includes
    ``policy``; return its partition count. ``must_have``: configs (name -> (value, why))
    a topic that exists already must have too.

    Runs on: driver, once per start. ``key_path`` (e.g. ``coordination.commit.topic``) is
    named in errors so the operator knows which setting points at the topic.
    """
    why = why or _WHY[policy]
    topics = target.topics()
    if name not in topics:
        if not auto_create:
            raise TopicError(
                f"control topic {name!r} ({key_path}) is missing on the target cluster at "
                f"{target.bootstrap}; create it with cleanup.policy={policy} or set "
                f"features.autoCreateControlTopics: enabled"
            )
        return target.create_topic(
            name, partitions, replication_factor, {"cleanup.policy": policy, **configs}
        )
    if validate:
        config = target.topic_config(name)
        found = config.get("cleanup.policy", "")
        if policy not in found.replace(" ", "").split(","):
            raise TopicError(
                f"control topic {name!r} ({key_path}) on the target cluster at "
                f"{target.bootstrap} has cleanup.policy={found!r}; expected {policy!r} ({why})"
            )
        for key, (value, reason) in (must_have or {}).items():
            if config.get(key, "").lower() != value.lower():
                raise TopicError(
                    f"control topic {name!r} ({key_path}) on the target cluster at "
                    f"{target.bootstrap} has {key}={config.get(key, '')!r}; expected "
                    f"{value!r} ({reason}): set it with kafka-configs.sh --alter "
                    f"--entity-type topics --entity-name {name} --add-config {key}={value}"
                )
    return topics[name].partitions


_WHY = {
    "compact": "progress records would be deleted by retention",
    "delete": "the Offset Mapping app trims old mappings with DeleteRecords, which a "
    "compacted-only topic refuses",
}


def ensure_mm2_topic(
    target: ClusterView, name: str, key_path: str, settings: TopicSettings, *, validate: bool
) -> None:
    """Create one of MM2's topics on the target (heartbeats, checkpoints) when missing, as
    MM2 does: one partition, compacted, with ``settings``' replication factor and configs
    (``topicCreation.control``). An existing one (e.g. MM2's own) is used as it is."""
    ensure_control_topic(
        target,
        name,
        key_path,
        auto_create=True,
        validate=validate,
        partitions=1,
        replication_factor=settings.replication_factor,
        configs=settings.configs,
    )
