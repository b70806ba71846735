"""Replication stages, compiled once per topic from the config.

Each policy is one small class behind a tiny protocol, so that the runner can decide
everything per *topic* up front and do almost nothing per record:

* topic selection: :class:`TopicSelection` — ``should_replicate(topic) -> bool``
* topic routing: :class:`SameName`, :class:`PrefixSuffix`, :class:`Static`, :class:`ExplicitMap`
  — ``route(topic) -> str | None``
* partition mapping: ``source`` keeps the partition number; ``hash`` lets the producer place
  the record by Kafka's murmur2 key hash (:func:`murmur2_partition` documents the placement).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

__all__ = [
    "ExplicitMap",
    "PrefixSuffix",
    "SameName",
    "Static",
    "TopicRouter",
    "TopicSelection",
    "is_internal_topic",
    "murmur2",
    "murmur2_partition",
]


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
        if topic in self._excluded or is_internal_topic(topic):
            return False
        if self._pattern is not None:
            return self._pattern.fullmatch(topic) is not None
        return topic in self._names


class TopicRouter(Protocol):
    """Maps a source topic to its target topic. Returns None when the topic is not routed."""

    def route(self, topic: str) -> str | None: ...


class SameName:
    """The target topic has the source topic's name. Never returns None.

    N.B. replicating between two clusters in both directions with this policy loops forever:
    it cannot detect cycles.

    >>> SameName().route("orders")
    'orders'
    """

    def route(self, topic: str) -> str | None:
        return topic


class PrefixSuffix:
    """The target topic is ``prefix + source + suffix``. Never returns None.

    >>> PrefixSuffix("eu.", ".copy").route("orders")
    'eu.orders.copy'
    """

    def __init__(self, prefix: str = "", suffix: str = "") -> None:
        self.prefix, self.suffix = prefix, suffix

    def route(self, topic: str) -> str | None:
        return f"{self.prefix}{topic}{self.suffix}"


class Static:
    """Every source topic goes to one target topic (many to one). Never returns None.

    Records of different source topics interleave in the target; order is kept per source
    partition only.

    >>> Static("all-events").route("orders")
    'all-events'
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def route(self, topic: str) -> str | None:
        return self.topic


class ExplicitMap:
    """Source topics listed in the map go to the named target topic.

    Returns None when the source topic has no entry: such a topic is not replicated (the
    planner logs it once), so a regex selection that finds a new topic cannot write to a
    target nobody chose.

    >>> m = ExplicitMap({"orders": "orders-dr"})
    >>> m.route("orders"), m.route("payments")
    ('orders-dr', None)
    """

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = dict(mapping)

    def route(self, topic: str) -> str | None:
        return self.mapping.get(topic)


_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed int.

    Used to document and verify where keyed records land; the producer itself places them
    (librdkafka's ``murmur2_random`` partitioner is the same function).

    >>> murmur2(b"21")
    -973932308
    >>> murmur2(b"abc")
    479470107
    """
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    tail = data[n4 * 4 :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a non-null ``key``.

    >>> murmur2_partition(b"21", 10)
    0
    """
    return (murmur2(key) & 0x7FFFFFFF) % partitions
