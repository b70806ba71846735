"""Control topics on the target: created compacted on request, otherwise validated."""

from __future__ import annotations

from collections.abc import Mapping

from k2k.errors import TopicError
from k2k.kafka.admin import ClusterView

__all__ = ["ensure_control_topic"]


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
) -> int:
    """Make sure control topic ``name`` exists and is compacted; return its partition count.

    Runs on: driver, once per start. ``key_path`` (e.g. ``coordination.commit.topic``) is
    named in errors so the operator knows which setting points at the topic.
    """
    topics = target.topics()
    if name not in topics:
        if not auto_create:
            raise TopicError(
                f"control topic {name!r} ({key_path}) is missing on the target cluster at "
                f"{target.bootstrap}; create it with cleanup.policy=compact or set "
                f"features.autoCreateControlTopics: enabled"
            )
        target.create_topic(
            name, partitions, replication_factor, {**configs, "cleanup.policy": "compact"}
        )
        topics = target.wait_for_topic(name)
    elif validate:
        policy = target.topic_config(name).get("cleanup.policy", "")
        if "compact" not in policy.split(","):
            raise TopicError(
                f"control topic {name!r} ({key_path}) on the target cluster at "
                f"{target.bootstrap} has cleanup.policy={policy!r}; expected 'compact' "
                f"(progress records would be deleted by retention)"
            )
    return topics[name].partitions
