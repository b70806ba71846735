"""Topic selection: which source topics a pipeline replicates."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["TopicSelection", "is_internal_topic"]


def is_internal_topic(topic: str) -> bool:
    """True for topics no replicator may copy: Kafka's and MirrorMaker's internal topics.

    >>> [is_internal_topic(t) for t in ["__consumer_offsets", ".hidden", "a.checkpoints.internal", "orders"]]
    [True, True, True, False]
    """
    return topic.startswith(("__", ".")) or topic.endswith(".internal")


class TopicSelection:
    """The source stage's topic filter: a regex (full match, as Kafka clients do) or exact names.

    Internal topics (:func:`is_internal_topic`) and k2k's own control topics are never
    selected, even when the regex matches them.

    >>> sel = TopicSelection("orders.*", excluded=["orders-ctl"])
    >>> [sel.should_replicate(t) for t in ["orders", "orders.eu", "xorders", "orders-ctl", "__orders"]]
    [True, True, False, False, False]
    >>> TopicSelection(["a", "b"]).should_replicate("a")
    True
    """

    def __init__(self, topic: str | list[str], excluded: Iterable[str] = ()) -> None:
        self._excluded = frozenset(excluded)
        if isinstance(topic, str):
            self._pattern: re.Pattern[str] | None = re.compile(topic)
            self._names: frozenset[str] = frozenset()
        else:
            self._pattern = None
            self._names = frozenset(topic)

    def should_replicate(self, topic: str) -> bool:
        """False for internal and excluded topics; else whether the regex or names match."""
        if topic in self._excluded or is_internal_topic(topic):
            return False
        if self._pattern is not None:
            return self._pattern.fullmatch(topic) is not None
        return topic in self._names
