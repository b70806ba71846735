"""MirrorMaker 2's replication policies: target names that record where a topic came from.

YAML ``replication[].sink.topic: {policy: alias | identity, separator: "."}`` with the
clusters named by ``source.alias`` and ``target.alias``. A policy is a router
(``route(topic) -> str``) that also reads names back (``topic_source``, ``upstream_topic``),
which selection uses for MM2's rules: internal topics are never replicated, heartbeats topics
always are, and a topic whose name chain already passed through the target is a cycle.

>>> p = AliasPolicy("A", "B")
>>> p.route("orders"), p.topic_source("A.orders"), p.upstream_topic("C.A.orders")
('A.orders', 'A', 'A.orders')
>>> [p.is_cycle(t) for t in ["orders", "C.orders", "B.orders", "C.B.orders"]]
[False, False, True, True]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_SEPARATOR",
    "HEARTBEATS_TOPIC",
    "AliasPolicy",
    "IdentityPolicy",
    "PolicyRule",
    "ReplicationPolicy",
]

#: The topic MM2 writes heartbeats to on each target cluster (the separator never applies).
HEARTBEATS_TOPIC = "heartbeats"
#: MM2's default separator between an alias and a topic name.
DEFAULT_SEPARATOR = "."


@dataclass(frozen=True)
class AliasPolicy:
    """MM2's ``DefaultReplicationPolicy``: the target topic is ``<source alias><separator>
    <topic>``, e.g. ``A.orders``; a topic replicated twice is ``B.A.orders``. Never returns
    None from :meth:`route`.

    Cycles are detected by name, so two pipelines A -> B and B -> A run without loops.
    """

    source_alias: str
    target_alias: str
    separator: str = DEFAULT_SEPARATOR

    def route(self, topic: str) -> str | None:
        return f"{self.source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a remote topic came from (the text before the first separator); None
        for a topic that is not remote. Trailing empty parts do not count, as in MM2.

        >>> AliasPolicy("A", "B").topic_source("orders") is None, AliasPolicy("A", "B").topic_source("x.")
        (True, None)
        """
        parts = topic.split(self.separator)
        while parts and not parts[-1]:
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream (the alias and separator removed); None for a
        topic that is not remote."""
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        """The topic's name on the cluster it was first written to.

        >>> AliasPolicy("A", "B").original_topic("C.A.heartbeats")
        'heartbeats'
        """
        while (upstream := self.upstream_topic(topic)) is not None and upstream != topic:
            topic = upstream
        return topic

    def is_cycle(self, topic: str) -> bool:
        """True when some hop of the topic's name chain came from the target cluster:
        replicating it would send records back where they already are."""
        while (source := self.topic_source(topic)) is not None:
            if source == self.target_alias:
                return True
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False
            topic = upstream
        return False

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and its remote copies (``A.heartbeats``, ``B.A.heartbeats``)."""
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_internal_topic(self, topic: str) -> bool:
        """MM2's internal topics, never replicated: Kafka's (``__*``, ``.*``), Connect's
        (``*.internal``, ``*-internal``) and MM2's own with this separator
        (``mm2-offset-syncs_B_internal``, ``A_checkpoints_internal``).

        >>> p = AliasPolicy("A", "B", "_")
        >>> [p.is_internal_topic(t) for t in ["__consumer_offsets", "mm2-configs.A.internal",
        ...     "connect-offsets-internal", "A_checkpoints_internal", "orders"]]
        [True, True, True, True, False]
        """
        return topic.startswith(("__", ".")) or topic.endswith(
            (".internal", "-internal", f"{self.separator}internal")
        )


@dataclass(frozen=True)
class IdentityPolicy(AliasPolicy):
    """MM2's ``IdentityReplicationPolicy``: target topics keep their source names, except
    heartbeats topics, which are named as :class:`AliasPolicy` names them (``A.heartbeats``).
    Never returns None from :meth:`route`.

    N.B. this policy cannot detect cycles of data topics (only of heartbeats): the
    replication topology must be acyclic.

    >>> p = IdentityPolicy("A", "B")
    >>> p.route("orders"), p.route("heartbeats"), p.is_cycle("orders"), p.is_cycle("B.heartbeats")
    ('orders', 'A.heartbeats', False, True)
    """

    def route(self, topic: str) -> str | None:
        return super().route(topic) if self._heartbeat_like(topic) else topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self._heartbeat_like(topic) else self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self._heartbeat_like(topic) else topic

    @staticmethod
    def _heartbeat_like(topic: str) -> bool:
        return topic.endswith(HEARTBEATS_TOPIC)


ReplicationPolicy = AliasPolicy | IdentityPolicy


@dataclass(frozen=True)
class PolicyRule:
    """The sink ``topic`` form ``{policy: alias | identity, separator: ...}`` as configured;
    :meth:`bind` makes it a router once the cluster aliases are known."""

    policy: Literal["alias", "identity"]
    separator: str = DEFAULT_SEPARATOR

    def bind(self, source_alias: str, target_alias: str) -> ReplicationPolicy:
        """The policy between the two named clusters.

        >>> PolicyRule("alias", "_").bind("A", "B").route("orders")
        'A_orders'
        """
        cls = AliasPolicy if self.policy == "alias" else IdentityPolicy
        return cls(source_alias, target_alias, self.separator)
