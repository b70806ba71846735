"""One MirrorMaker 2 flow ``A->B`` as a pipeline in K2K's layout (a plain dict, validated
afterwards like any YAML file), with MM2's precedence between its layers of properties.

Properties the pipeline does not take are recorded as :class:`~k2k.config.mm2_notes.Note`;
:mod:`k2k.config.mm2` reads the file and runs this for every enabled flow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2k.config.clients import bootstrap_problem, property_problem
from k2k.config.mm2_notes import (
    SOURCE_PRODUCER,
    Note,
    advice_for,
    unknown_advice,
)
from k2k.config.mm2_transforms import read_chain
from k2k.config.properties import parse_list

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_TOPICS_EXCLUDE",
    "IDENTITY_POLICY",
    "Flow",
    "FlowBuilder",
    "enabled_or_disabled",
    "is_client_key",
    "parse_list",
]

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
_POLICIES = {DEFAULT_POLICY: "alias", IDENTITY_POLICY: "identity"}
#: MM2's default ``topics.exclude`` (k2k's policy rules already drop the internal ones).
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
_BOOTSTRAP_EXPECTED = "expected host:port[,...]"

#: Per role: the flow's generic prefix, the cluster's prefix, the flow's specific prefix (MM2's
#: ``consumer.*`` < ``source.consumer.*`` of the connector, the latter filled from ``A.consumer.*``
#: and overridden by ``A->B.source.consumer.*``). The target producer is Connect's worker one.
_SOURCE = {
    "consumer": ("consumer.", "consumer.", "source.consumer."),
    "admin": ("admin.", "admin.", "source.admin."),
}
_TARGET = {
    "producer": (None, "producer.", "producer.override."),
    "consumer": (None, "consumer.", None),
    "admin": ("admin.", "admin.", "target.admin."),
}


def is_client_key(key: str) -> bool:
    """MM2's ``CLIENT_CONFIG_DEF``: bootstrap and security keys, shared by every client."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


@dataclass(frozen=True)
class Flow:
    """One enabled replication flow and its pipeline in K2K's layout."""

    source: str
    target: str
    pipeline: dict[str, Any]
    notes: tuple[Note, ...]

    @property
    def label(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass
class _Role:
    """One client map being assembled: property -> (value, the MM2 property it came from)."""

    entries: dict[str, tuple[str, str]] = field(default_factory=dict)

    def put(self, layer: Mapping[str, tuple[str, str]]) -> None:
        self.entries.update(layer)


def _regex(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else "|".join(f"(?:{item})" for item in items)


def _seconds(text: str, prop: str, problems: list[str]) -> str | None:
    if re.fullmatch(r"\d+", text.strip()) is None:
        problems.append(f"{prop}: invalid value {text!r}, expected a whole number of seconds")
        return None
    return f"{int(text)} seconds"


def enabled_or_disabled(text: str, prop: str, problems: list[str]) -> str | None:
    """An MM2 boolean as a K2K flag; None, with a problem naming ``prop``, when it is neither."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        problems.append(f"{prop}: invalid value {text!r}, expected true or false")
        return None
    return "enabled" if lowered == "true" else "disabled"


class _Layers:
    """The file's properties sorted into MM2's three layers for one flow."""

    def __init__(self, props: Mapping[str, str], source: str, target: str) -> None:
        self.props = props
        self.source, self.target = source, target
        self.flow_prefix = f"{source}->{target}."

    def cluster(self, alias: str) -> dict[str, tuple[str, str]]:
        prefix = f"{alias}."
        return {k[len(prefix) :]: (v, k) for k, v in self.props.items() if k.startswith(prefix)}

    def flow(self) -> dict[str, tuple[str, str]]:
        p = self.flow_prefix
        return {k[len(p) :]: (v, k) for k, v in self.props.items() if k.startswith(p)}

    def top(self, aliases: Iterable[str]) -> dict[str, tuple[str, str]]:
        prefixes = tuple(f"{a}." for a in aliases)
        return {
            k: (v, k)
            for k, v in self.props.items()
            if not k.startswith(prefixes) and "->" not in k.split(".", 1)[0]
        }

    def connector(self, key: str, aliases: Iterable[str]) -> tuple[str, str] | None:
        """A connector key's value and origin: the flow's over the top level's."""
        return self.flow().get(key) or self.top(aliases).get(key)


def _strip(layer: Mapping[str, tuple[str, str]], prefix: str) -> dict[str, tuple[str, str]]:
    return {k[len(prefix) :]: v for k, v in layer.items() if k.startswith(prefix)}


class FlowBuilder:
    """Builds one flow's pipeline dict, recording which properties it used or noted."""

    def __init__(self, path: Path, props: Mapping[str, str], aliases: Sequence[str]) -> None:
        self.path = path
        self.props = props
        self.aliases = aliases
        self.problems: list[str] = []
        self.used: set[str] = set()
        self.notes: list[Note] = []
        #: Transforms k2k cannot run, one line each (refused unless skipped on request).
        self.unsupported: list[str] = []

    def build(self, source: str, target: str) -> Flow:
        layers = _Layers(self.props, source, target)
        self.notes = []
        top = layers.top(self.aliases)
        src, tgt, flow = layers.cluster(source), layers.cluster(target), layers.flow()
        pipeline: dict[str, Any] = {
            "name": _pipeline_name(source, target),
            "features": {
                "autoCreateTopics": "enabled",  # MM2 always creates the remote topics
                "autoCreateControlTopics": "enabled",  # as MM2 creates its internal topics
                "headerReplication": "enabled",  # MM2 copies headers
            },
            "source": {"alias": source, "kafka": self._clients(source, _SOURCE, (top, src, flow))},
            "target": {"alias": target, "kafka": self._clients(target, _TARGET, (top, tgt, flow))},
        }
        self._connector(layers, pipeline)
        self._transforms(layers, pipeline)
        self._target_worker(tgt, pipeline)
        self._cluster_leftovers(src, target_side=False)
        self._flow_leftovers(flow)
        return Flow(source, target, pipeline, tuple(self.notes))

    # -- clients ---------------------------------------------------------------------------
    def _common(
        self, alias: str, top: Mapping[str, tuple[str, str]], own: Mapping[str, tuple[str, str]]
    ) -> _Role:
        common = _Role()
        defaults = {k: v for k, v in top.items() if is_client_key(k)}
        self.used.update(origin for _, origin in defaults.values())
        common.put(defaults)
        common.put({k: v for k, v in own.items() if is_client_key(k)})
        bootstrap = common.entries.get("bootstrap.servers")
        if bootstrap is None:
            self.problems.append(f"{alias}.bootstrap.servers: missing, {_BOOTSTRAP_EXPECTED}")
        else:
            problem = bootstrap_problem(bootstrap[0])
            if problem is not None:
                self.problems.append(f"{bootstrap[1]}: {problem}")
        return common

    def _clients(
        self,
        alias: str,
        roles: Mapping[str, tuple[str | None, str, str | None]],
        layers: tuple[Mapping[str, tuple[str, str]], ...],
    ) -> dict[str, dict[str, str]]:
        """One cluster's client maps: ``roles`` gives each role's generic flow prefix, the
        cluster's prefix and the specific flow prefix, weakest first."""
        top, own, flow = layers
        common = self._common(alias, top, own)
        built: dict[str, _Role] = {"common": common}
        for role, (generic, cluster, specific) in roles.items():
            built[role] = _Role()
            if generic is not None:
                # MM2 copies the cluster's bootstrap and security keys into each role, so the
                # flow's generic `consumer.` / `admin.` keys never win over them.
                loose = _strip(flow, generic)
                built[role].put({k: v for k, v in loose.items() if k not in common.entries})
            built[role].put(_strip(own, cluster))
            if specific is not None:
                built[role].put(_strip(flow, specific))
        return self._client_maps(built)

    def _client_maps(self, roles: Mapping[str, _Role]) -> dict[str, dict[str, str]]:
        """Role maps of property -> value; a property k2k refuses is left out and noted."""
        maps: dict[str, dict[str, str]] = {}
        for role, built in roles.items():
            kept: dict[str, str] = {}
            for key, (value, origin) in built.entries.items():
                self.used.add(origin)
                problem = None if key == "bootstrap.servers" else property_problem(key, value)
                if problem is None:
                    kept[key] = value
                else:
                    self.notes.append(Note(origin, f"left out: {problem}"))
            if kept:
                maps[role] = kept
        return maps

    # -- connector keys ---------------------------------------------------------------------
    def _value(self, layers: _Layers, key: str) -> tuple[str, str] | None:
        found = layers.connector(key, self.aliases)
        if found is not None:
            self.used.add(found[1])
            if key in self.props:  # the top-level default, overridden or not, is accounted for
                self.used.add(key)
        return found

    def _connector(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        pipeline["replication"] = [
            {"source": self._selection(layers)},
            {"sink": {"topic": self._policy(layers), "partition": "source"}},
        ]
        features = pipeline["features"]
        eos = self._value(layers, "exactly.once.support")
        if eos is not None and eos[0].strip().lower() == "required":
            features["exactlyOnce"] = "enabled"
        tasks = self._value(layers, "tasks.max")
        if tasks is not None:
            if tasks[0].strip().isdigit() and int(tasks[0]) > 0:
                pipeline["spark"] = {"parallelism": int(tasks[0])}
            else:
                self.problems.append(f"{tasks[1]}: invalid value {tasks[0]!r}, expected >= 1")
        self._heartbeats(layers, pipeline)
        self._topic_sync(layers, pipeline)
        self._checkpoints(layers, pipeline)

    def _transforms(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        """The flow's Connect transforms as a ``transforms`` stage between source and sink."""
        label = layers.flow_prefix[:-1]
        listed = self._value(layers, "transforms"), self._value(layers, "predicates")
        chain = read_chain(layers.flow(), label, *listed, self.props)
        self.used.update(chain.used)
        self.notes.extend(chain.notes)
        self.problems.extend(chain.problems)
        self.unsupported.extend(chain.unsupported)
        if chain.steps:
            pipeline["replication"].insert(1, {"transforms": chain.steps})

    def _selection(self, layers: _Layers) -> dict[str, Any]:
        selection: dict[str, Any] = {"topic": ".*"}
        topics = self._value(layers, "topics")
        if topics is not None:
            items = parse_list(topics[0])
            if not items:
                self.problems.append(f"{topics[1]}: empty, expected a list of topic regexes")
            else:
                selection["topic"] = _regex(items)
        exclude = self._value(layers, "topics.exclude") or self._value(layers, "topics.blacklist")
        excluded = parse_list(DEFAULT_TOPICS_EXCLUDE if exclude is None else exclude[0])
        if excluded:
            selection["exclude"] = _regex(excluded)
        refresh = self._value(layers, "refresh.topics.enabled")
        if refresh is not None and refresh[0].strip().lower() == "false":
            self.notes.append(
                Note(refresh[1], "not supported: k2k always discovers new topics and partitions")
            )
        interval = self._value(layers, "refresh.topics.interval.seconds")
        if interval is not None:
            seconds = _seconds(interval[0], interval[1], self.problems)
            if seconds is not None:
                selection["discoveryInterval"] = seconds
        return selection

    def _policy(self, layers: _Layers) -> dict[str, str]:
        policy = {"policy": "alias"}
        found = self._value(layers, "replication.policy.class")
        if found is not None:
            name = _POLICIES.get(found[0].strip())
            if name is None:
                expected = f"{DEFAULT_POLICY} or {IDENTITY_POLICY}"
                self.problems.append(f"{found[1]}: unsupported class {found[0]!r}, {expected}")
            else:
                policy["policy"] = name
        separator = self._value(layers, "replication.policy.separator")
        if separator is not None:
            policy["separator"] = separator[0]
        return policy

    def _heartbeats(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        enabled = self._flag_value(layers, "emit.heartbeats.enabled", "enabled")
        pipeline["features"]["heartbeats"] = enabled
        section = self._interval(layers, "emit.heartbeats.interval.seconds")
        replicate = self._value(layers, "heartbeats.replication.enabled")
        if replicate is not None:
            section["replicate"] = (
                enabled_or_disabled(replicate[0], replicate[1], self.problems) or ""
            )
        if section:
            pipeline["heartbeats"] = section

    def _topic_sync(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        replicated: dict[str, Any] = {}
        for key, name, convert in (
            ("sync.topic.configs.enabled", "configSync", enabled_or_disabled),
            ("sync.topic.configs.interval.seconds", "configSyncInterval", _seconds),
            ("sync.topic.acls.enabled", "aclSync", enabled_or_disabled),
            ("sync.topic.acls.interval.seconds", "aclSyncInterval", _seconds),
        ):
            found = self._value(layers, key)
            if found is not None:
                replicated[name] = convert(found[0], found[1], self.problems)
        exclude = self._value(layers, "config.properties.exclude") or self._value(
            layers, "config.properties.blacklist"
        )
        if exclude is not None:
            replicated["configExclusions"] = parse_list(exclude[0])
        factor = self._value(layers, "replication.factor")
        if factor is not None:
            if factor[0].strip().lstrip("-").isdigit():
                replicated["replicationFactor"] = int(factor[0])
            else:
                self.problems.append(f"{factor[1]}: invalid value {factor[0]!r}, expected a number")
        if replicated:
            pipeline["topicCreation"] = {"replicated": replicated}

    def _interval(self, layers: _Layers, key: str) -> dict[str, str]:
        """``{"interval": ...}`` from an MM2 ``*.interval.seconds`` key, or ``{}``."""
        found = self._value(layers, key)
        if found is None:
            return {}
        return {"interval": _seconds(found[0], found[1], self.problems) or ""}

    def _flag_value(self, layers: _Layers, key: str, default: str) -> str:
        found = self._value(layers, key)
        return (
            default
            if found is None
            else enabled_or_disabled(found[0], found[1], self.problems) or default
        )

    def _checkpoints(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        """MM2's offset syncs are k2k's offset mappings; its checkpoints are translated from
        them (both on by default in MM2, so here too)."""
        features = pipeline["features"]
        features["offsetMapping"] = self._flag_value(layers, "emit.offset-syncs.enabled", "enabled")
        checkpoints = self._flag_value(layers, "emit.checkpoints.enabled", "enabled")
        if checkpoints == "enabled" and features["offsetMapping"] == "disabled":
            advice = "MM2 emits no checkpoints without offset syncs, nor does k2k"
            self.notes.append(Note("emit.checkpoints.enabled", advice))
            checkpoints = "disabled"
        features["checkpoints"] = checkpoints
        selection = self._groups(layers)
        section = {**self._interval(layers, "emit.checkpoints.interval.seconds"), **selection}
        if section:
            pipeline["checkpoints"] = section
        self._group_sync(layers, pipeline, selection)

    def _groups(self, layers: _Layers) -> dict[str, str]:
        """MM2's ``groups`` / ``groups.exclude``: for checkpoints and group offset sync alike."""
        selection: dict[str, str] = {}
        groups = self._value(layers, "groups")
        if groups is not None:
            selection["groups"] = _regex(parse_list(groups[0]) or ["(?!)"])
        exclude = self._value(layers, "groups.exclude") or self._value(layers, "groups.blacklist")
        if exclude is not None:
            selection["groupsExclude"] = _regex(parse_list(exclude[0]) or ["(?!)"])
        return selection

    def _group_sync(
        self, layers: _Layers, pipeline: dict[str, Any], selection: dict[str, str]
    ) -> None:
        """``sync.group.offsets.enabled``: the pipeline commits translated offsets to the
        target's groups itself (off by default, as in MM2)."""
        features = pipeline["features"]
        sync = self._flag_value(layers, "sync.group.offsets.enabled", "disabled")
        interval = self._interval(layers, "sync.group.offsets.interval.seconds")
        if sync == "enabled" and features["offsetMapping"] == "disabled":
            advice = "MM2 syncs no group offsets without offset syncs, nor does k2k"
            self.notes.append(Note("sync.group.offsets.enabled", advice))
            sync = "disabled"
        features["syncGroupOffsets"] = sync
        if sync == "enabled" and (interval or selection):
            pipeline["syncGroupOffsets"] = {**interval, **selection}

    # -- leftovers --------------------------------------------------------------------------
    def _target_worker(self, own: Mapping[str, tuple[str, str]], pipeline: dict[str, Any]) -> None:
        eos = own.get("exactly.once.source.support")
        if eos is not None:
            self.used.add(eos[1])
            if eos[0].strip().lower() == "enabled":
                pipeline["features"]["exactlyOnce"] = "enabled"
        flush = own.get("offset.flush.interval.ms")
        if flush is not None:
            self.used.add(flush[1])
            if flush[0].strip().isdigit():
                pipeline["coordination"] = {
                    "commit": {"batchTimeout": f"{int(flush[0])} milliseconds"}
                }
            else:
                self.problems.append(f"{flush[1]}: invalid value {flush[0]!r}, expected ms")
        self._cluster_leftovers(own, target_side=True)

    def _cluster_leftovers(self, own: Mapping[str, tuple[str, str]], *, target_side: bool) -> None:
        for key, (_value, origin) in own.items():
            if origin in self.used or is_client_key(key):
                continue
            if key.startswith(("consumer.", "admin.")) or (
                target_side and key.startswith("producer.")
            ):
                continue
            if key.startswith("producer."):
                self.notes.append(Note(origin, f"left out: {SOURCE_PRODUCER}"))
            elif target_side:
                self.notes.append(Note(origin, unknown_advice(key)))
            else:
                continue  # a setting of flows into this cluster; the file-level pass notes it
            self.used.add(origin)

    def _flow_leftovers(self, flow: Mapping[str, tuple[str, str]]) -> None:
        for key, (value, origin) in flow.items():
            if origin in self.used or key == "enabled":
                self.used.add(origin)
                continue
            if key.startswith(("consumer.", "admin.", "source.consumer.", "source.admin.")):
                continue
            if key.startswith(("target.admin.", "producer.override.")):
                continue
            if key.startswith(("producer.", "source.producer.")):
                advice = f"left out: {SOURCE_PRODUCER}"
            else:
                advice = advice_for(key, value)
            self.notes.append(Note(origin, advice))
            self.used.add(origin)


def _pipeline_name(source: str, target: str) -> str:
    safe = re.compile(r"[^A-Za-z0-9._-]")
    return f"mm2-{safe.sub('_', source)}-{safe.sub('_', target)}"
