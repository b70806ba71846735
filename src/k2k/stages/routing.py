"""Topic routing: one small policy class per rule of ``replication[].sink.topic``.

Each rule is a frozen value (the config model holds it as parsed from YAML, see
:mod:`k2k.config.routing`) and the policy itself: ``route(source topic) -> target topic``.
The planner routes each topic once, when it discovers it; the runner never routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "ExplicitTopicMap",
    "PrefixSuffixTopicName",
    "SameTopicName",
    "StaticTopicName",
    "TopicRouter",
    "TopicRouting",
]


class TopicRouter(Protocol):
    """Maps a source topic to its target topic. Returns None when the topic is not routed."""

    def route(self, topic: str) -> str | None: ...


@dataclass(frozen=True)
class SameTopicName:
    """The target topic has the source topic's name (YAML ``topic: source``, the default).
    Never returns None.

    N.B. this policy cannot detect cycles: replicating between two clusters in both
    directions with it loops forever unless both pipelines enable
    ``features.bidirectionalReplication``, whose marker header keeps each record from going
    back (:mod:`k2k.stages.bidirectional`).

    >>> SameTopicName().route("orders")
    'orders'
    """

    def route(self, topic: str) -> str | None:
        return topic


@dataclass(frozen=True)
class PrefixSuffixTopicName:
    """The target topic is ``prefix + source topic + suffix`` (at least one is non-empty).
    Never returns None.

    >>> PrefixSuffixTopicName("eu.", ".copy").route("orders")
    'eu.orders.copy'
    """

    prefix: str = ""
    suffix: str = ""

    def route(self, topic: str) -> str | None:
        return f"{self.prefix}{topic}{self.suffix}"


@dataclass(frozen=True)
class StaticTopicName:
    """Every source topic goes to the one target topic ``topic`` (many to one). Never
    returns None.

    Records of different source topics interleave in the target; order is kept per source
    partition only.

    >>> StaticTopicName("all-events").route("orders")
    'all-events'
    """

    topic: str

    def route(self, topic: str) -> str | None:
        return self.topic


@dataclass(frozen=True)
class ExplicitTopicMap:
    """Source topics listed in ``mapping`` go to the named target topic.

    Returns None when the source topic has no entry: such a topic is not replicated (the
    planner logs it once), so a regex selection that finds a new topic cannot write to a
    target nobody chose.

    >>> m = ExplicitTopicMap({"orders": "orders-dr"})
    >>> m.route("orders"), m.route("payments")
    ('orders-dr', None)
    """

    mapping: dict[str, str] = field(default_factory=dict)

    def route(self, topic: str) -> str | None:
        return self.mapping.get(topic)


TopicRouting = SameTopicName | PrefixSuffixTopicName | StaticTopicName | ExplicitTopicMap
