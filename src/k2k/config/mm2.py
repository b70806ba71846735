"""MirrorMaker 2's dedicated-mode properties file as k2k pipelines, one per enabled flow.

``k2k start --mm2 mm2.properties`` and ``k2k validate --mm2`` read the file MM2's
``connect-mirror-maker.sh`` reads. Every enabled flow ``A->B`` becomes one pipeline in K2K's
layout (a plain dict, validated afterwards by :func:`k2k.config.build_pipeline` like any
YAML file), with MM2's precedence (docs/mm2.md, "k2k start --mm2"):

* connector keys (``topics``, ``tasks.max`` ...): ``A->B.key`` over the top-level ``key``;
* bootstrap and security keys of a cluster: ``A.key`` over the top-level ``key``;
* client roles: ``A->B.consumer.*`` < ``A.consumer.*`` < ``A->B.source.consumer.*`` for the
  source consumer (likewise ``admin``); the target producer is the Connect worker's,
  ``B.producer.*`` < ``A->B.producer.override.*``.

Nothing is silently ignored: every property that does not reach a pipeline is returned as a
:class:`Note` naming it and saying what to do instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from k2k.config.clients import bootstrap_problem, property_problem
from k2k.config.loader import build_pipeline
from k2k.config.model import PipelineConfig
from k2k.config.properties import read_properties
from k2k.config.secrets import mask_tree
from k2k.errors import ConfigError

__all__ = ["Flow", "MM2File", "Note", "all_notes", "flow_config", "read_mm2", "render_flows"]

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
_POLICIES = {DEFAULT_POLICY: "alias", IDENTITY_POLICY: "identity"}
#: MM2's default ``topics.exclude`` (k2k's policy rules already drop the internal ones).
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
_BOOTSTRAP_EXPECTED = "expected host:port[,...]"

_GROUP_SYNC = (
    "committing translated offsets to the target's groups is the Offset Mapping app's job: "
    "run `k2k offset-mapping start` (docs/offset-mapping.md)"
)
_EXACT_MAPPINGS = (
    "not needed: k2k writes exact offset mappings (offsetMapping.topic, on the target), one "
    "per contiguous run of records"
)
_WORKER = "a Kafka Connect worker setting; k2k runs no Connect worker: nothing to do"
_CONNECTOR_ADVICE: dict[str, str] = {
    "sync.group.offsets.enabled": _GROUP_SYNC,
    "sync.group.offsets.interval.seconds": _GROUP_SYNC,
    "refresh.groups.enabled": "not needed: k2k lists the source groups every checkpoints.interval",
    "refresh.groups.interval.seconds": "not needed: k2k lists the source groups every "
    "checkpoints.interval",
    "group.filter.class": "filter classes cannot run in k2k; select with groups / groups.exclude",
    "checkpoints.topic.replication.factor": "not separately configurable: k2k creates the "
    "checkpoints topic with topicCreation.control.replicationFactor (every control topic's)",
    "offset-syncs.topic.location": _EXACT_MAPPINGS,
    "offset-syncs.topic.replication.factor": _EXACT_MAPPINGS,
    "offset.lag.max": _EXACT_MAPPINGS,
    "topic.filter.class": "filter classes cannot run in k2k; select with topics / topics.exclude",
    "config.property.filter.class": "filter classes cannot run in k2k; use "
    "config.properties.exclude (topicCreation.replicated.configExclusions)",
    "use.defaults.from": "not supported; k2k syncs the source topics' non-default configs "
    "(topicCreation.replicated.configSync) and leaves target defaults alone",
    "replication.policy.internal.topic.separator.enabled": "not needed: k2k never replicates "
    "internal topics under either spelling (names ending .internal, -internal or "
    "<separator>internal)",
    "heartbeats.topic.replication.factor": "not separately configurable: k2k creates the "
    "heartbeats topic with topicCreation.control.replicationFactor (every control topic's)",
    "transaction.boundary": "not configurable: with exactly-once, k2k commits one transaction "
    "per commit batch (coordination.commit.batchSize / batchTimeout)",
    "consumer.poll.timeout.ms": "not needed: k2k bounds its waits with source.connectTimeout",
    "admin.timeout.ms": "use source.connectTimeout / target.connectTimeout",
    "forwarding.admin.class": "admin classes cannot run in k2k",
    "config.providers": "MM2 config providers are not supported; write the values into the "
    "YAML `k2k validate --mm2` prints, with k2k placeholders (${env:NAME}, ${file:PATH})",
    "name": "k2k names each flow's pipeline mm2-<source>-<target>",
    "connector.class": "k2k runs its own replicator, not a Connect connector",
    "clusters": "",
}
#: Settings of MM2's own driver and of Connect's worker (top level or ``<target>.``).
_WORKER_PREFIXES = (
    "group.id",
    "client.id",
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "plugin.",
    "plugin.path",
    "listeners",
    "rest.",
    "admin.listeners",
    "dedicated.mode.",
    "offset.flush.",
    "exactly.once.source.support",
    "scheduled.rebalance.",
    "connect.protocol",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "rebalance.timeout.ms",
    "connector.client.config.override.policy",
    "inter.worker.",
)
_SOURCE_PRODUCER = (
    "k2k never writes to the source cluster (MM2 uses this producer for offset syncs there)"
)


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


def _is_client_key(key: str) -> bool:
    """MM2's ``CLIENT_CONFIG_DEF``: bootstrap and security keys, shared by every client."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


def _is_worker_key(key: str) -> bool:
    return key.startswith(_WORKER_PREFIXES)


def _advice(key: str) -> str | None:
    for name, advice in _CONNECTOR_ADVICE.items():
        if key == name or (name == "config.providers" and key.startswith(name)):
            return advice
    return None


@dataclass(frozen=True)
class Note:
    """A property of the file that does not reach a pipeline as written, and why."""

    prop: str
    advice: str

    def line(self) -> str:
        return f"{self.prop}: {self.advice}"


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


@dataclass(frozen=True)
class MM2File:
    """The flows of one MM2 file and the notes that concern no single flow."""

    path: Path
    flows: tuple[Flow, ...]
    notes: tuple[Note, ...]


@dataclass
class _Role:
    """One client map being assembled: property -> (value, the MM2 property it came from)."""

    entries: dict[str, tuple[str, str]] = field(default_factory=dict)

    def put(self, layer: Mapping[str, tuple[str, str]]) -> None:
        self.entries.update(layer)


def _parse_list(text: str) -> list[str]:
    """An MM2 list value: comma-separated, blanks around items dropped, empty items too."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _regex(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else "|".join(f"(?:{item})" for item in items)


def _seconds(text: str, prop: str, problems: list[str]) -> str | None:
    if re.fullmatch(r"\d+", text.strip()) is None:
        problems.append(f"{prop}: invalid value {text!r}, expected a whole number of seconds")
        return None
    return f"{int(text)} seconds"


def _flag(text: str, prop: str, problems: list[str]) -> str | None:
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


class _FlowBuilder:
    """Builds one flow's pipeline dict, recording which properties it used or noted."""

    def __init__(self, path: Path, props: Mapping[str, str], aliases: Sequence[str]) -> None:
        self.path = path
        self.props = props
        self.aliases = aliases
        self.problems: list[str] = []
        self.used: set[str] = set()
        self.notes: list[Note] = []

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
        self._target_worker(tgt, pipeline)
        self._cluster_leftovers(src, target_side=False)
        self._flow_leftovers(flow)
        return Flow(source, target, pipeline, tuple(self.notes))

    # -- clients ---------------------------------------------------------------------------
    def _common(
        self, alias: str, top: Mapping[str, tuple[str, str]], own: Mapping[str, tuple[str, str]]
    ) -> _Role:
        common = _Role()
        defaults = {k: v for k, v in top.items() if _is_client_key(k)}
        self.used.update(origin for _, origin in defaults.values())
        common.put(defaults)
        common.put({k: v for k, v in own.items() if _is_client_key(k)})
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

    def _selection(self, layers: _Layers) -> dict[str, Any]:
        selection: dict[str, Any] = {"topic": ".*"}
        topics = self._value(layers, "topics")
        if topics is not None:
            items = _parse_list(topics[0])
            if not items:
                self.problems.append(f"{topics[1]}: empty, expected a list of topic regexes")
            else:
                selection["topic"] = _regex(items)
        exclude = self._value(layers, "topics.exclude") or self._value(layers, "topics.blacklist")
        excluded = _parse_list(DEFAULT_TOPICS_EXCLUDE if exclude is None else exclude[0])
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
            section["replicate"] = _flag(replicate[0], replicate[1], self.problems) or ""
        if section:
            pipeline["heartbeats"] = section

    def _topic_sync(self, layers: _Layers, pipeline: dict[str, Any]) -> None:
        replicated: dict[str, Any] = {}
        for key, name, convert in (
            ("sync.topic.configs.enabled", "configSync", _flag),
            ("sync.topic.configs.interval.seconds", "configSyncInterval", _seconds),
            ("sync.topic.acls.enabled", "aclSync", _flag),
            ("sync.topic.acls.interval.seconds", "aclSyncInterval", _seconds),
        ):
            found = self._value(layers, key)
            if found is not None:
                replicated[name] = convert(found[0], found[1], self.problems)
        exclude = self._value(layers, "config.properties.exclude") or self._value(
            layers, "config.properties.blacklist"
        )
        if exclude is not None:
            replicated["configExclusions"] = _parse_list(exclude[0])
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
        return default if found is None else _flag(found[0], found[1], self.problems) or default

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
        section = self._interval(layers, "emit.checkpoints.interval.seconds")
        groups = self._value(layers, "groups")
        if groups is not None:
            section["groups"] = _regex(_parse_list(groups[0]) or ["(?!)"])
        exclude = self._value(layers, "groups.exclude") or self._value(layers, "groups.blacklist")
        if exclude is not None:
            section["groupsExclude"] = _regex(_parse_list(exclude[0]) or ["(?!)"])
        if section:
            pipeline["checkpoints"] = section

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
            if origin in self.used or _is_client_key(key):
                continue
            if key.startswith(("consumer.", "admin.")) or (
                target_side and key.startswith("producer.")
            ):
                continue
            if key.startswith("producer."):
                self.notes.append(Note(origin, f"left out: {_SOURCE_PRODUCER}"))
            elif target_side:
                self.notes.append(Note(origin, _WORKER if _is_worker_key(key) else _UNKNOWN))
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
                advice = f"left out: {_SOURCE_PRODUCER}"
            else:
                advice = _advice_for(key, value)
            self.notes.append(Note(origin, advice))
            self.used.add(origin)


_UNKNOWN = "not an MM2 property k2k translates: not applied"


def _advice_for(key: str, value: str) -> str:
    """What to do about a property no pipeline key takes."""
    advice = _advice(key)
    if advice is None:
        return _WORKER if _is_worker_key(key) else _UNKNOWN
    if advice == _GROUP_SYNC and key.endswith(".enabled") and value.strip().lower() == "false":
        return "off, and k2k does not commit to the target's groups either: nothing to do"
    return advice


def _pipeline_name(source: str, target: str) -> str:
    safe = re.compile(r"[^A-Za-z0-9._-]")
    return f"mm2-{safe.sub('_', source)}-{safe.sub('_', target)}"


def _enabled_flows(
    path: Path, props: Mapping[str, str], aliases: Sequence[str], problems: list[str]
) -> list[tuple[str, str]]:
    flows = []
    for source in aliases:
        for target in aliases:
            if source == target:
                continue
            key = f"{source}->{target}.enabled"
            value = props.get(key)
            if value is not None and _flag(value, key, problems) == "enabled":
                flows.append((source, target))
    return flows


def _provider_references(props: Mapping[str, str], problems: list[str]) -> None:
    """MM2's ``${provider:path:key}`` references other than ``${env:NAME}`` (which k2k's own
    placeholders resolve the same way) cannot be resolved: refuse them."""
    for key, value in props.items():
        for ref in re.findall(r"\$\{([^}]*)\}", value):
            if re.fullmatch(r"env:[^:]+", ref) is None:
                problems.append(
                    f"{key}: MM2 config provider reference ${{{ref}}} is not supported; "
                    "use k2k placeholders (${env:NAME}, ${file:PATH}) in the YAML that "
                    "`k2k validate --mm2` prints"
                )


def _file_notes(props: Mapping[str, str], aliases: Sequence[str], used: set[str]) -> list[Note]:
    """Every property no flow used or noted."""
    notes = []
    for key in props:
        if key in used or key == "clusters":
            continue
        head = key.split(".", 1)[0]
        if "->" in head:
            advice = "a flow that does not run (not enabled, or left out by --clusters)"
        elif any(key.startswith(f"{a}.") for a in aliases):
            advice = "not used by the flows that run (k2k runs enabled flows only)"
        elif key.startswith(("consumer.", "producer.", "admin.")):
            advice = (
                "MM2 ignores top-level client prefixes in dedicated mode, and so does k2k; "
                "use <alias>.consumer.*, <alias>.producer.* or <alias>.admin.*"
            )
        else:
            advice = _advice_for(key, props[key])
        if advice:
            notes.append(Note(key, advice))
    return notes


def read_mm2(path: Path, clusters: Sequence[str] | None = None) -> MM2File:
    """The flows of the MM2 file at ``path``, limited to targets in ``clusters`` when given.

    Raises ConfigError with one line per bad property, each naming the file and property.
    """
    props = read_properties(path)
    problems: list[str] = []
    aliases = _parse_list(props.get("clusters", ""))
    if not aliases:
        raise ConfigError(f"{path}: clusters: missing, expected a list of cluster aliases")
    if clusters:
        unknown = [c for c in clusters if c not in aliases]
        if unknown:
            listed = ", ".join(aliases)
            raise ConfigError(f"--clusters: unknown alias {unknown[0]!r}, expected one of {listed}")
    _provider_references(props, problems)
    pairs = _enabled_flows(path, props, aliases, problems)
    if clusters:
        pairs = [(s, t) for s, t in pairs if t in clusters]
    if not pairs and not problems:
        problems.append(
            "no flow to run: no enabled flow targets a --clusters alias"
            if clusters
            else "no flow to run: set <source>-><target>.enabled = true"
        )
    builder = _FlowBuilder(path, props, aliases)
    flows = [builder.build(s, t) for s, t in pairs]
    problems.extend(builder.problems)
    if problems:
        raise ConfigError([f"{path}: {p}" for p in dict.fromkeys(problems)])
    notes = _file_notes(props, aliases, builder.used)
    return MM2File(path, tuple(flows), tuple(notes))


def flow_config(mm2: MM2File, flow: Flow, *, templates: bool = True) -> PipelineConfig:
    """The validated pipeline of ``flow``; problems name the file and the flow."""
    try:
        return build_pipeline(flow.pipeline, templates=templates)
    except ConfigError as exc:
        raise ConfigError([f"{mm2.path}: flow {flow.label}: {p}" for p in exc.problems]) from None


def _comments(title: str, notes: Sequence[Note]) -> str:
    lines = [f"# {title}"] + [f"#   {note.line()}" for note in notes]
    return "\n".join(lines) + "\n"


def render_flows(mm2: MM2File) -> str:
    """One YAML document per flow in K2K's layout, secrets masked, each preceded by the MM2
    properties it does not take as comments (so the text stays valid YAML)."""
    parts = []
    if mm2.notes:
        parts.append(_comments(f"{mm2.path}: properties no flow takes:", mm2.notes))
    for flow in mm2.flows:
        head = _comments(f"flow {flow.label}: properties k2k does not take as written:", flow.notes)
        body = yaml.safe_dump(mask_tree(flow.pipeline), sort_keys=False, allow_unicode=True)
        parts.append(f"---\n{head if flow.notes else ''}{body}")
    return "".join(parts)


def all_notes(mm2: MM2File) -> list[str]:
    """Every note as one line (``k2k start --mm2`` logs them as warnings)."""
    lines = [f"{mm2.path}: {note.line()}" for note in mm2.notes]
    for flow in mm2.flows:
        lines.extend(f"{mm2.path}: flow {flow.label}: {note.line()}" for note in flow.notes)
    return lines
