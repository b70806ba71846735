"""Control topics on the target: created on request, otherwise validated.

Progress and assignment topics are compacted (their newest record per key is the state);
the offset-mapping topic is trimmed by the Offset Mapping app with DeleteRecords, which
compacted-only topics refuse, so it has ``cleanup.policy`` ``delete``.
"""

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
    policy: str = "compact",
    why: str | None = None,
) -> int:
    """Make sure control topic ``name`` exists and its ``cleanup.policy`` includes
    ``policy``; return its partition count.

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
        target.create_topic(
            name, partitions, replication_factor, {"cleanup.policy": policy, **configs}
        )
        topics = target.wait_for_topic(name)
    elif validate:
        found = target.topic_config(name).get("cleanup.policy", "")
        if policy not in found.replace(" ", "").split(","):
            raise TopicError(
                f"control topic {name!r} ({key_path}) on the target cluster at "
                f"{target.bootstrap} has cleanup.policy={found!r}; expected {policy!r} ({why})"
            )
    return topics[name].partitions


_WHY = {
    "compact": "progress records would be deleted by retention",
    "delete": "the Offset Mapping app trims old mappings with DeleteRecords, which a "
    "compacted-only topic refuses",
}
