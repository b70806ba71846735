"""A Strimzi ``KafkaMirrorMaker2`` resource as MM2 dedicated-mode properties: one flow per
``spec.mirrors[]`` entry, each built as Strimzi builds its connectors' configs.

Strimzi gives each connector of a mirror ``source.cluster.*`` and ``target.cluster.*`` from
the two clusters' specs (``bootstrapServers``, ``tls``, ``authentication``, ``config``), then
the connector's ``config``, then the mirror's ``topicsPattern`` / ``groupsPattern`` ... over
both. The target cluster is also the Connect cluster, whose ``config`` configures the workers
(``producer.*`` is the producer that writes the records): it becomes the dedicated-mode
``<target>.*`` keys, as in an MM2 file. Both resource shapes are read: ``spec.clusters`` with
``connectCluster`` and ``mirrors[].sourceCluster``/``targetCluster`` (v1beta2), and
``spec.target`` with ``mirrors[].source`` (v1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k2k.config.mm2_connector import Entries, Translation, flow_properties, merge_roles
from k2k.config.mm2_notes import Note
from k2k.config.mm2_translate import is_client_key
from k2k.config.strimzi_auth import SecretError, Secrets, client_security

__all__ = ["read_strimzi"]

_PATTERNS = {
    "topicsPattern": "topics",
    "topicsExcludePattern": "topics.exclude",
    "topicsBlacklistPattern": "topics.exclude",
    "groupsPattern": "groups",
    "groupsExcludePattern": "groups.exclude",
    "groupsBlacklistPattern": "groups.exclude",
}
_CONNECTORS = {
    "sourceConnector": "source",
    "checkpointConnector": "checkpoint",
    "heartbeatConnector": "heartbeat",
}
_CLUSTER_FIELDS = frozenset({"alias", "bootstrapServers", "tls", "authentication", "config"})
_WORKER_FIELDS = frozenset(
    {"groupId", "configStorageTopic", "statusStorageTopic", "offsetStorageTopic"}
)
_SPEC_FIELDS = frozenset({"clusters", "connectCluster", "target", "mirrors"})
_DEPLOYMENT = (
    "a setting of the Connect deployment Strimzi runs; k2k runs no Connect cluster: not applied"
)
_LIFECYCLE = "a Strimzi connector setting: not applied (the pipeline runs while `k2k start` runs)"


class _Invalid(Exception):
    """A resource field k2k cannot read: ``args[0]`` is the one-line problem."""


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        return str(value)
    raise _Invalid(f"{where}: a {type(value).__name__}, expected a string, number or boolean")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Invalid(f"{where}: a {type(value).__name__}, expected a mapping")
    return value


def _config(value: Any, where: str) -> Entries:
    return {
        str(k): (_scalar(v, f"{where}.{k}"), f"{where}.{k}")
        for k, v in _mapping(value, where).items()
    }


class _Reader:
    """Reads one resource into dedicated-mode properties, collecting problems and notes."""

    def __init__(self, spec: Mapping[str, Any], secrets: Secrets) -> None:
        self.spec = spec
        self.secrets = secrets
        self.out = Translation()
        self.aliases: list[str] = []

    def cluster(self, path: str, cluster: Any, prefix: str) -> Entries:
        """The ``source.cluster.*`` (``target.cluster.*``) keys Strimzi gives the connectors."""
        spec = _mapping(cluster, path)
        alias = spec.get("alias")
        if not isinstance(alias, str) or not alias:
            raise _Invalid(f"{path}.alias: missing, expected the cluster's alias")
        if "bootstrapServers" not in spec:
            raise _Invalid(f"{path}.bootstrapServers: missing, expected host:port[,...]")
        entries: Entries = {
            f"{prefix}alias": (alias, f"{path}.alias"),
            f"{prefix}bootstrap.servers": (
                _scalar(spec["bootstrapServers"], f"{path}.bootstrapServers"),
                f"{path}.bootstrapServers",
            ),
        }
        security = client_security(path, spec, self.secrets)
        entries.update({f"{prefix}{k}": v for k, v in security.items()})
        config = _config(spec.get("config"), f"{path}.config")
        keep_all = prefix == "source.cluster."  # the target's others configure the workers
        entries.update(
            {f"{prefix}{k}": v for k, v in config.items() if keep_all or is_client_key(k)}
        )
        if alias not in self.aliases:
            self.aliases.append(alias)
        return entries

    def target(self) -> tuple[str, Mapping[str, Any]]:
        """The target (Connect) cluster's path and spec."""
        if "target" in self.spec:
            return "spec.target", _mapping(self.spec["target"], "spec.target")
        alias = self.spec.get("connectCluster")
        if not isinstance(alias, str):
            raise _Invalid("spec.target: missing, expected spec.target or spec.connectCluster")
        return self.find(alias, "spec.connectCluster")

    def find(self, alias: Any, where: str) -> tuple[str, Mapping[str, Any]]:
        clusters = self.spec.get("clusters")
        if not isinstance(clusters, list):
            raise _Invalid("spec.clusters: missing, expected the list of clusters")
        for i, cluster in enumerate(clusters):
            if isinstance(cluster, Mapping) and cluster.get("alias") == alias:
                return f"spec.clusters[{i}]", cluster
        known = ", ".join(str(c.get("alias")) for c in clusters if isinstance(c, Mapping))
        raise _Invalid(f"{where}: {alias!r} is not in spec.clusters, expected one of {known}")

    def source(self, i: int, mirror: Mapping[str, Any], target_alias: Any) -> tuple[str, Any]:
        where = f"spec.mirrors[{i}]"
        if "source" in mirror:
            return f"{where}.source", mirror["source"]
        named = mirror.get("targetCluster", target_alias)
        if named != target_alias:
            raise _Invalid(
                f"{where}.targetCluster: {named!r} is not spec.connectCluster "
                f"({target_alias!r}), expected the Connect cluster (MM2's connectors write "
                "through the Connect cluster's Kafka)"
            )
        return self.find(mirror.get("sourceCluster"), f"{where}.sourceCluster")

    def connector(self, where: str, value: Any) -> Entries | None:
        if value is None:
            return None
        spec = _mapping(value, where)
        entries = _config(spec.get("config"), f"{where}.config")
        if "tasksMax" in spec:  # Strimzi writes it over the config's tasks.max
            entries["tasks.max"] = (
                _scalar(spec["tasksMax"], f"{where}.tasksMax"),
                f"{where}.tasksMax",
            )
        for key in spec:
            if key not in ("config", "tasksMax"):
                self.out.notes.append(Note(f"{where}.{key}", _LIFECYCLE))
        return entries

    def mirror(self, i: int, mirror: Any, target: tuple[str, Mapping[str, Any]]) -> None:
        where = f"spec.mirrors[{i}]"
        spec = _mapping(mirror, where)
        clusters = self.cluster(*self.source(i, spec, target[1].get("alias")), "source.cluster.")
        clusters.update(self.cluster(*target, "target.cluster."))
        roles = {
            role: self.connector(f"{where}.{key}", spec.get(key))
            for key, role in _CONNECTORS.items()
        }
        if roles["source"] is None:
            raise _Invalid(
                f"{where}.sourceConnector: missing, expected one: k2k runs a flow's replication, "
                "checkpoints and heartbeats as one pipeline, which needs the source connector"
            )
        roles["source"] = {**clusters, **roles["source"]}
        patterns: Entries = {}
        for key, value in spec.items():
            if key in _PATTERNS:
                patterns[_PATTERNS[key]] = (_scalar(value, f"{where}.{key}"), f"{where}.{key}")
            elif key not in _CONNECTORS and key not in ("source", "sourceCluster", "targetCluster"):
                self.out.notes.append(
                    Note(f"{where}.{key}", "not a mirror field k2k reads: not applied")
                )
        merged = merge_roles(roles, patterns, self.out.notes)
        label = f"{merged['source.cluster.alias'][0]}->{merged['target.cluster.alias'][0]}"
        if f"{label}.enabled" in self.out.props:
            raise _Invalid(f"{where}: a second mirror of flow {label}, expected one per flow")
        self.out.absorb(flow_properties(merged, f"{where}.sourceConnector.config."))

    def workers(self, path: str, target: Mapping[str, Any]) -> None:
        """The target cluster's worker config, as an MM2 file's ``<target>.*`` keys."""
        alias = target.get("alias")
        if not isinstance(alias, str) or not alias:
            return  # reported by every mirror
        for key, (value, origin) in _config(target.get("config"), f"{path}.config").items():
            if not is_client_key(key):
                self.out.put(f"{alias}.{key}", value, origin)
        for key in target:
            if key in _WORKER_FIELDS:
                advice = "a Kafka Connect worker setting; k2k runs no Connect worker: nothing to do"
                self.out.notes.append(Note(f"{path}.{key}", advice))

    def notes(self) -> None:
        for key in self.spec:
            if key not in _SPEC_FIELDS:
                self.out.notes.append(Note(f"spec.{key}", _DEPLOYMENT))
        clusters = self.spec.get("clusters")
        paths = [(f"spec.clusters[{i}]", c) for i, c in enumerate(clusters or [])]
        paths += [("spec.target", self.spec.get("target"))]
        for i, mirror in enumerate(self.spec.get("mirrors") or []):
            if isinstance(mirror, Mapping):
                paths.append((f"spec.mirrors[{i}].source", mirror.get("source")))
        for path, cluster in paths:
            for key in cluster if isinstance(cluster, Mapping) else ():
                if key not in _CLUSTER_FIELDS and not (
                    path == "spec.target" and key in _WORKER_FIELDS
                ):
                    self.out.notes.append(
                        Note(f"{path}.{key}", "not a cluster field k2k reads: not applied")
                    )


def read_strimzi(doc: Mapping[str, Any], environ: Mapping[str, str]) -> Translation:
    """The dedicated-mode properties of a ``KafkaMirrorMaker2`` resource (a parsed YAML
    document); problems name the resource paths."""
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return Translation(problems=["spec: missing, expected the KafkaMirrorMaker2's spec"])
    reader = _Reader(spec, Secrets(environ))
    try:
        target = reader.target()
        mirrors = spec.get("mirrors")
        if not isinstance(mirrors, list) or not mirrors:
            raise _Invalid("spec.mirrors: missing, expected at least one mirror")
    except _Invalid as exc:
        return Translation(problems=[exc.args[0]])
    for i, mirror in enumerate(mirrors):
        try:
            reader.mirror(i, mirror, target)
        except (_Invalid, SecretError) as exc:
            reader.out.problems.append(exc.args[0])
    try:
        reader.workers(*target)
    except _Invalid as exc:
        reader.out.problems.append(exc.args[0])
    reader.notes()
    reader.out.props["clusters"] = ", ".join(reader.aliases)
    return reader.out
