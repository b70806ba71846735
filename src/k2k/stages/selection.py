"""Topic selection: which source topics a pipeline replicates."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from k2k.stages.policies import ReplicationPolicy

__all__ = ["NameSelection", "TopicSelection", "is_internal_topic"]


def is_internal_topic(topic: str) -> bool:
    """True for topics no replicator may copy: Kafka's and MirrorMaker's internal topics.

    >>> [is_internal_topic(t) for t in ["__consumer_offsets", ".hidden", "a.checkpoints.internal", "orders"]]
    [True, True, True, False]
    """
    return topic.startswith(("__", ".")) or topic.endswith(".internal")


class NameSelection:
    """A regex (full match, as Kafka clients do) or a list of exact names: how a pipeline
    file selects topics and consumer groups, so every selection reads its value alike.

    >>> NameSelection("orders.*").match("orders.eu"), NameSelection(["orders"]).match("orders.eu")
    (True, False)
    """

    def __init__(self, spec: str | list[str]) -> None:
        self.pattern = re.compile(spec) if isinstance(spec, str) else None
        self.names = frozenset(spec) if not isinstance(spec, str) else frozenset()

    def match(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.names


class TopicSelection:
    """The source stage's topic filter: ``topic`` (a regex, full match as Kafka clients do, or
    exact names) minus ``exclude`` (the same two forms); exclude wins.

    Internal topics (:func:`is_internal_topic`) and k2k's own control topics (``excluded``)
    are never selected, even when the regex matches them. With a replication ``policy``
    (:mod:`k2k.stages.policies`) MM2's rules apply instead: the policy's internal topics and
    cycles are never selected, heartbeats topics always are (unless not
    ``replicate_heartbeats``: then like any other topic).

    >>> sel = TopicSelection("orders.*", excluded=["orders-ctl"], exclude="orders\\\\.test.*")
    >>> [sel.should_replicate(t) for t in ["orders", "orders.eu", "xorders", "orders-ctl", "__orders", "orders.test1"]]
    [True, True, False, False, False, False]
    >>> TopicSelection(["a", "b"], exclude=["b"]).should_replicate("b")
    False
    """

    def __init__(
        self,
        topic: str | list[str],
        excluded: Iterable[str] = (),
        exclude: str | list[str] | None = None,
        policy: ReplicationPolicy | None = None,
        replicate_heartbeats: bool = True,
    ) -> None:
        self._excluded = frozenset(excluded)
        self._policy = policy
        self._heartbeats = replicate_heartbeats
        self._include = NameSelection(topic)
        self._exclude = NameSelection(exclude) if exclude is not None else None

    def should_replicate(self, topic: str) -> bool:
        """False for internal, control and excluded topics and cycles; True for heartbeats
        topics under a policy; else whether the regex or names match."""
        if topic in self._excluded:
            return False
        if self._policy is not None:
            policy = self._policy
            if policy.is_internal_topic(topic) or policy.is_cycle(topic):
                return False
            if self._heartbeats and policy.is_heartbeats_topic(topic):
                return True
        elif is_internal_topic(topic):
            return False
        if self._exclude is not None and self._exclude.match(topic):
            return False
        return self._include.match(topic)
