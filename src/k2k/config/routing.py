"""The sink stage's topic routing as written in YAML, parsed into one value type per form.

``replication[].sink.topic`` takes five forms; the first four become one routing policy of
:mod:`k2k.stages.routing` (a frozen value that also routes), the fifth a MirrorMaker 2
replication policy of :mod:`k2k.stages.policies`, bound to ``source.alias`` and
``target.alias`` by the pipeline (``PipelineConfig.topic_router``):

=========================================  ===========================  =======================
YAML                                       class                        target topic
=========================================  ===========================  =======================
``source``                                 :class:`SameTopicName`       the source topic's name
``{prefix: "eu.", suffix: ".copy"}``       :class:`PrefixSuffixTopicName` prefix + name + suffix
any other string, e.g. ``all-events``      :class:`StaticTopicName`     that one topic
``{map: {orders: orders-dr}}``             :class:`ExplicitTopicMap`    the mapped name; source
                                                                        topics not in the map are
                                                                        not replicated
``{policy: alias, separator: "."}``        :class:`PolicyRule`          ``<source alias>.name``
``{policy: identity}``                     :class:`PolicyRule`          the name (heartbeats:
                                                                        ``<source alias>.name``)
=========================================  ===========================  =======================

>>> parse_sink_topic("source")
SameTopicName()
>>> parse_sink_topic({"prefix": "eu."})
PrefixSuffixTopicName(prefix='eu.', suffix='')
>>> parse_sink_topic("all-events")
StaticTopicName(topic='all-events')
>>> parse_sink_topic({"map": {"orders": "orders-dr"}})
ExplicitTopicMap(mapping={'orders': 'orders-dr'})
>>> parse_sink_topic({"policy": "alias"})
PolicyRule(policy='alias', separator='.')
>>> routing_to_yaml(ExplicitTopicMap({"a": "b"}))
{'map': {'a': 'b'}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from k2k.config.errors import Problem, describe, problems_error, suggest_key
from k2k.config.fields import TOPIC_NAME_RULE, check_topic_name
from k2k.stages.policies import DEFAULT_SEPARATOR, PolicyRule
from k2k.stages.routing import (
    ExplicitTopicMap,
    PrefixSuffixTopicName,
    SameTopicName,
    StaticTopicName,
    TopicRouting,
)

#: What ``replication[].sink.topic`` holds: a router, or a policy rule awaiting the aliases.
SinkTopic = TopicRouting | PolicyRule

__all__ = [
    "ExplicitTopicMap",
    "PolicyRule",
    "PrefixSuffixTopicName",
    "SameTopicName",
    "SinkTopic",
    "StaticTopicName",
    "TopicRouting",
    "parse_sink_topic",
    "routing_to_yaml",
]

_SAME = "source"
FORMS = (
    "'source', a topic name, {prefix: ..., suffix: ...}, {map: {source-topic: target-topic}} "
    "or {policy: alias | identity, separator: ...}"
)
_POLICIES = ("alias", "identity")
_SEPARATOR = re.compile(r"[A-Za-z0-9._-]+")


def _prefix_suffix(value: Mapping[Any, Any]) -> PrefixSuffixTopicName:
    problems: list[Problem] = []
    parts: dict[str, str] = {}
    for key, item in value.items():
        if key not in ("prefix", "suffix"):
            problems.append(((str(key),), suggest_key(str(key), ["prefix", "suffix", "map"])))
            continue
        text = "" if item is None else item
        if not isinstance(text, str):
            problems.append(((key,), describe("wrong type", got=item, expected="a string")))
        elif text and check_topic_name(text) is not None:
            expected = "only the characters a-z A-Z 0-9 . _ -"
            problems.append(((key,), describe("invalid characters", got=item, expected=expected)))
        else:
            parts[key] = text
    if not problems and not any(parts.values()):
        expected = "a non-empty prefix or suffix (write 'topic: source' to keep the name)"
        problems.append(
            ((), describe("empty prefix and suffix", got=dict(value), expected=expected))
        )
    if problems:
        raise problems_error(problems)
    return PrefixSuffixTopicName(parts.get("prefix", ""), parts.get("suffix", ""))


def _explicit_map(value: Mapping[Any, Any]) -> ExplicitTopicMap:
    problems: list[Problem] = [
        ((str(key),), suggest_key(str(key), ["map"])) for key in value if key != "map"
    ]
    mapping = value.get("map")
    if not isinstance(mapping, Mapping) or not mapping:
        expected = "a non-empty mapping of source topic names to target topic names"
        problems.append((("map",), describe("wrong type", got=mapping, expected=expected)))
        raise problems_error(problems)
    for source, target in mapping.items():
        for name in (source, target):
            problem = check_topic_name(name)
            if problem is not None:
                problems.append((("map", str(source)), problem))
    if problems:
        raise problems_error(problems)
    return ExplicitTopicMap(dict(mapping))


def _policy_rule(value: Mapping[Any, Any]) -> PolicyRule:
    problems: list[Problem] = [
        ((str(key),), suggest_key(str(key), ["policy", "separator"]))
        for key in value
        if key not in ("policy", "separator")
    ]
    policy, separator = value.get("policy"), value.get("separator", DEFAULT_SEPARATOR)
    if policy not in _POLICIES:
        expected = "one of: alias, identity"
        problems.append((("policy",), describe("invalid value", got=policy, expected=expected)))
    if not isinstance(separator, str) or not _SEPARATOR.fullmatch(separator):
        expected = "a non-empty string of the characters a-z A-Z 0-9 . _ -"
        problems.append(
            (("separator",), describe("invalid value", got=separator, expected=expected))
        )
    if problems:
        raise problems_error(problems)
    return PolicyRule("alias" if policy == "alias" else "identity", separator)


def parse_sink_topic(value: Any) -> SinkTopic:
    """Parse the sink ``topic`` value (see the module table); raise a k2k problem otherwise."""
    if isinstance(
        value,
        SameTopicName | PrefixSuffixTopicName | StaticTopicName | ExplicitTopicMap | PolicyRule,
    ):
        return value
    if value is None or value == _SAME:
        return SameTopicName()
    if isinstance(value, str):
        problem = check_topic_name(value)
        if problem is not None:
            raise problems_error(
                [((), problem.replace(TOPIC_NAME_RULE, f"{TOPIC_NAME_RULE} ({FORMS})"))]
            )
        return StaticTopicName(value)
    if isinstance(value, Mapping):
        if "policy" in value:
            return _policy_rule(value)
        return _explicit_map(value) if "map" in value else _prefix_suffix(value)
    raise problems_error([((), describe("wrong type", got=value, expected=FORMS))])


def routing_to_yaml(routing: SinkTopic) -> Any:
    """The YAML form :func:`parse_sink_topic` reads back to an equal value."""
    if isinstance(routing, PolicyRule):
        return {"policy": routing.policy, "separator": routing.separator}
    if isinstance(routing, PrefixSuffixTopicName):
        return {"prefix": routing.prefix, "suffix": routing.suffix}
    if isinstance(routing, StaticTopicName):
        return routing.topic
    if isinstance(routing, ExplicitTopicMap):
        return {"map": dict(routing.mapping)}
    return _SAME
