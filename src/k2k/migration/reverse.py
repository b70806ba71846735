"""The reverse pipeline (``k2k start --reverse``): the same pipeline file run the other way,
for the topics it replicated, from the fork point on (failback after a cut-over).

Runs on: the operator's machine, before the planner starts (a config-level transform; the
copy loop is the ordinary one). :func:`reverse_pipeline` is pure: it takes the forward
pipeline and the topic names on the forward target, and returns the reversed
:class:`~k2k.config.PipelineConfig` (what ``k2k validate --reverse`` prints).
:func:`prepare_reverse` adds what needs the clusters: those topic names and the fork point.

The rules (docs/operations.md#failback says the same for operators):

* **Topics.** The reverse run reads the forward target's topics that are the route of a topic
  the forward selection selects, and writes each back under that topic's name. Every
  selection form is decided by name on the topics that exist on the forward target now: a
  target topic ``t`` is taken when the inverted route gives a name ``s``, the forward
  selection selects ``s`` (its regex or list, ``exclude``, internal and control topics,
  MM2's rules) and the forward route sends ``s`` to ``t``. So a ``topic: source`` pipeline
  with a regex takes every target topic the regex selects, also one created on the target
  after the cut-over. The names are fixed when the run starts (the reverse selection is a
  list): restart it to take topics created later. Under a replication policy, heartbeats
  topics are never taken back (they record the forward flow, not application data).
* **Routes.** ``source`` and ``{policy: identity}`` stay ``source``; ``{prefix, suffix}``,
  ``{map: ...}`` and ``{policy: alias}`` become an explicit map (target name -> source name).
  A static topic name and a many-to-one map do not invert: one ``ConfigError`` line naming
  ``replication.sink.topic`` (exit 2).
* **Partitions.** ``partition: source`` stays. ``hash`` and ``producer`` are refused: a target
  partition then holds records of many source partitions, and which one each came from is
  not recorded with the record.
* **Clusters.** Source and target swap with everything they carry (alias, registry,
  ``connectTimeout``, ``common``, ``consumer`` and ``admin`` maps). The forward target's
  ``producer`` map has no role on the reverse source; what in it describes how k2k produces
  (``acks``, ``linger.ms``, ``transaction.timeout.ms``, ...) becomes the reverse target's
  producer map, what names a cluster or a principal (:data:`CONNECTION_KEYS`) is left behind:
  put each cluster's connection and security settings in its ``common`` map.
* **Control topics** keep their configured names and so live on the original source (the
  reverse run's target). The commit group is ``<commit group>-reverse`` (:data:`SUFFIX`):
  progress, claims and transactional ids never mix with the forward run's. The pipeline
  ``name`` stays: the bidirectional marker in ``pipeline`` mode needs the same name both
  ways, and offset mappings are keyed by it on the reverse target.
* **Features** apply as the file says, in both directions: exactly-once, offset mapping
  (written on the original source, for ``k2k cutover --reverse``: the cut-over of the
  reversed pipeline, with :func:`reverse_app`), headers, tracing and the bidirectional
  marker (docs/operations.md explains when the marker matters).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from k2k.config import OffsetMappingAppConfig, PipelineConfig
from k2k.config.errors import describe, dotted
from k2k.config.loader import build_offset_mapping_app, build_pipeline
from k2k.config.routing import (
    ExplicitTopicMap,
    PolicyRule,
    PrefixSuffixTopicName,
    SameTopicName,
    StaticTopicName,
    routing_to_yaml,
)
from k2k.errors import ConfigError
from k2k.kafka.admin import ClusterView
from k2k.migration.fork import ForkPoint, NoForkPoint, fork_point

__all__ = [
    "CONNECTION_KEYS",
    "SUFFIX",
    "check_reversible",
    "prepare_reverse",
    "reverse_app",
    "reverse_pipeline",
    "reverse_routes",
]

#: Appended to the forward commit group to name the reverse run's.
SUFFIX = "-reverse"

#: Producer properties that name a cluster or a principal: they stay with the forward target.
CONNECTION_KEYS = re.compile(
    r"bootstrap\.servers|metadata\.broker\.list|security\.protocol|client\.dns\.lookup"
    r"|(ssl|sasl)[._].*|enable\.ssl\..*"
)

_SINK_TOPIC = ("replication", "sink", "topic")
_INVERTIBLE = "'source', {prefix, suffix}, a one-to-one {map: ...} or {policy: alias | identity}"


def _refuse(path: tuple[str | int, ...], what: str, got: Any, expected: str) -> ConfigError:
    return ConfigError(f"{dotted(path)}: {describe(what, got=got, expected=expected)}")


def _inverse(cfg: PipelineConfig) -> Callable[[str], str | None]:
    """The forward route read backwards: a function target name -> source name (None when
    the name is not one the route produces). Raises ConfigError for a route that does not
    invert."""
    rule = cfg.replication.sink.topic
    if isinstance(rule, StaticTopicName):
        raise _refuse(
            _SINK_TOPIC,
            "a static topic name cannot be reversed (records of every source topic share it)",
            routing_to_yaml(rule),
            _INVERTIBLE,
        )
    if isinstance(rule, ExplicitTopicMap):
        back: dict[str, str] = {}
        for source, target in rule.mapping.items():
            if target in back:
                raise _refuse(
                    (*_SINK_TOPIC, "map", source),
                    f"many-to-one map cannot be reversed ({back[target]!r} goes there too)",
                    target,
                    "a target topic of its own for every source topic",
                )
            back[target] = source
        return back.get
    if isinstance(rule, PrefixSuffixTopicName):
        head, tail = rule.prefix, rule.suffix

        def unwrap(name: str) -> str | None:
            inner = len(name) - len(head) - len(tail)
            ok = inner > 0 and name.startswith(head) and name.endswith(tail)
            return name[len(head) : len(head) + inner] if ok else None

        return unwrap
    if isinstance(rule, PolicyRule) and rule.policy == "alias":
        alias = f"{cfg.source.alias}{rule.separator}"
        return lambda name: name[len(alias) :] if name.startswith(alias) else None
    return lambda name: name  # source, identity


def check_reversible(cfg: PipelineConfig) -> Callable[[str], str | None]:
    """The forward route read backwards (target name -> source name, None for a name the
    route does not produce); raises ConfigError, one line, for a partitioner or a route
    that does not invert. Needs no cluster, so it runs before any is asked."""
    partition = cfg.replication.sink.partition
    if partition != "source":
        raise _refuse(
            ("replication", "sink", "partition"),
            "cannot run in reverse (a target partition holds records of many source "
            "partitions, and which one each came from is not recorded)",
            partition,
            "source",
        )
    return _inverse(cfg)


def reverse_routes(cfg: PipelineConfig, target_topics: Iterable[str]) -> dict[str, str]:
    """Forward target topic -> the forward source topic it came from, for every topic of
    ``target_topics`` (the names on the forward target) that the forward pipeline routes
    there (see the module doc). Raises ConfigError for a route or partitioner that does not
    invert, or when no topic is left.

    >>> from k2k.config import load_pipeline
    >>> fwd = load_pipeline([{"name": "dr", "source": {"kafka": {"common": {"bootstrap.servers": "a:1"}}},
    ...     "target": {"kafka": {"common": {"bootstrap.servers": "b:1"}}},
    ...     "replication": [{"source": {"topic": "orders.*"}}, {"sink": {"topic": {"prefix": "eu."}}}]}])
    >>> reverse_routes(fwd, ["eu.orders", "eu.payments", "orders", "eu.orders1", "__k2k_assignment"])
    {'eu.orders': 'orders', 'eu.orders1': 'orders1'}
    """
    inverse = check_reversible(cfg)
    selection, router, policy = cfg.topic_selection(), cfg.topic_router(), cfg.replication_policy()
    routes: dict[str, str] = {}
    for name in sorted(set(target_topics)):
        source = inverse(name)
        if source is None or not selection.should_replicate(source):
            continue
        if router.route(source) != name:
            continue
        if policy is not None and policy.is_heartbeats_topic(source):
            continue  # MM2 heartbeats describe the forward flow: never application data
        routes[name] = source
    if not routes:
        raise _refuse(
            ("replication", "source", "topic"),
            "selects no topic to reverse: no topic on the target is the route of a selected "
            f"topic (sink topic {routing_to_yaml(cfg.replication.sink.topic)!r})",
            cfg.replication.source.topic,
            "the forward pipeline's target topics to exist on the target",
        )
    return routes


def _producer_tuning(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if not CONNECTION_KEYS.fullmatch(k)}


def _swapped(fwd: dict[str, Any]) -> dict[str, Any]:
    """A dumped model (pipeline or Offset Mapping app) with its clusters swapped (the rules
    of the module doc)."""
    src, tgt = fwd["source"], fwd["target"]
    return {
        **fwd,
        "source": {
            **{k: v for k, v in tgt.items() if k != "kafka"},
            "kafka": {role: tgt["kafka"][role] for role in ("common", "consumer", "admin")},
        },
        "target": {
            **{k: v for k, v in src.items() if k != "kafka"},
            "kafka": {**src["kafka"], "producer": _producer_tuning(tgt["kafka"]["producer"])},
        },
    }


def reverse_app(app: OffsetMappingAppConfig) -> OffsetMappingAppConfig:
    """The Offset Mapping app's configuration for the reverse pipeline (``k2k cutover
    --reverse``): the clusters swapped as for the pipeline; the groups, the mapping topic
    (now read on the original source) and the pipeline ``name`` its mappings carry stay."""
    try:
        return build_offset_mapping_app(
            _swapped(app.model_dump(mode="python", by_alias=True)), templates=False
        )
    except ConfigError as exc:
        raise ConfigError([f"reverse: {p}" for p in exc.problems]) from None


def reverse_pipeline(cfg: PipelineConfig, target_topics: Iterable[str]) -> PipelineConfig:
    """The forward pipeline ``cfg`` in the other direction (the rules of the module doc);
    ``target_topics``: the topic names on the forward target now. Raises ConfigError, one
    line per problem, each naming a key path of the forward file (or, for a problem only the
    reversed pipeline has, prefixed ``reverse:``)."""
    routes = reverse_routes(cfg, target_topics)
    fwd = cfg.model_dump(mode="python", by_alias=True)
    data = _swapped(fwd)
    identity = isinstance(cfg.replication.sink.topic, SameTopicName) or (
        isinstance(cfg.replication.sink.topic, PolicyRule)
        and cfg.replication.sink.topic.policy == "identity"
    )
    source_stage, sink_stage = fwd["replication"][0]["source"], fwd["replication"][1]["sink"]
    data["replication"] = [
        {"source": {**source_stage, "topic": sorted(routes), "exclude": None}},
        {"sink": {**sink_stage, "topic": "source" if identity else {"map": routes}}},
    ]
    # The effective configuration writes the commit settings under the Helm spelling.
    kafka = fwd["coordination"]["kafka"]
    commit = {**kafka["commit"], "group": cfg.commit_group + SUFFIX}
    data["coordination"] = {**fwd["coordination"], "kafka": {**kafka, "commit": commit}}
    try:
        return build_pipeline(data, templates=False)
    except ConfigError as exc:
        raise ConfigError([f"reverse: {p}" for p in exc.problems]) from None


def prepare_reverse(
    cfg: PipelineConfig, *, need_fork: bool = True
) -> tuple[PipelineConfig, ForkPoint | None]:
    """Runs on: the operator's machine. The reversed pipeline of ``cfg`` (its topics read
    from the forward target) and the forward pipeline's fork point. Raises
    :class:`~k2k.migration.fork.NoForkPoint` when ``need_fork`` and no cut-over finished."""
    check_reversible(cfg)
    reversed_cfg = reverse_pipeline(cfg, ClusterView.of(cfg.target).topics())
    fork = fork_point(cfg)
    if fork is None and need_fork:
        raise NoForkPoint(
            f"no finished cut-over or failover of pipeline {cfg.name!r} (commit group "
            f"{cfg.commit_group!r}) in {cfg.coordination.assignment.topic} on the target; "
            "expected k2k cutover or k2k failover to have run: a reverse run copies only "
            "what was written to the target since the fork"
        )
    return reversed_cfg, fork
