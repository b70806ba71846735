"""A Mirror connector's config (as a Kafka Connect cluster runs it) as MM2 dedicated-mode
properties, so that :mod:`k2k.config.mm2` builds its flow exactly as for an MM2 file.

A connector config names its two clusters by ``source.cluster.alias`` and
``target.cluster.alias`` and holds everything else for that one flow: its bootstrap and
security keys under ``source.cluster.`` / ``target.cluster.``, connector keys (``topics``,
``tasks.max``, ...) and client overrides (``source.consumer.*``, ``producer.override.*``) as
MM2 hands them to its connectors. So ``source.cluster.K`` becomes ``S.K``, any other key
``S->T.K``, and every dedicated-mode key remembers how the input spelled it for messages.

Connect runs replication, checkpoints and heartbeats as three connectors; k2k runs them in one
pipeline. Checkpoints and heartbeats are on only when their connector is part of the input
(Strimzi's ``checkpointConnector``), or when the MirrorSourceConnector's config turns them on
with ``emit.checkpoints.enabled`` / ``emit.heartbeats.enabled`` (docs/mm2.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from k2k.config.mm2_notes import Note
from k2k.config.mm2_translate import is_client_key

__all__ = [
    "Entries",
    "Translation",
    "connector_role",
    "flow_properties",
    "merge_roles",
    "role_problem",
]

#: key -> (value, how the input spells the key: a property name or a resource path).
Entries = dict[str, tuple[str, str]]

_PACKAGE = "org.apache.kafka.connect.mirror."
_CLASSES = {
    "source": "MirrorSourceConnector",
    "checkpoint": "MirrorCheckpointConnector",
    "heartbeat": "MirrorHeartbeatConnector",
}
#: Keys only the checkpoint or the heartbeat connector reads (MirrorCheckpointConfig,
#: MirrorHeartbeatConfig); every other key is the source connector's or shared.
_OWN_KEYS = {
    "checkpoint": frozenset(
        {
            "emit.checkpoints.enabled",
            "emit.checkpoints.interval.seconds",
            "groups",
            "groups.exclude",
            "groups.blacklist",
            "group.filter.class",
            "sync.group.offsets.enabled",
            "sync.group.offsets.interval.seconds",
            "refresh.groups.enabled",
            "refresh.groups.interval.seconds",
            "checkpoints.topic.replication.factor",
        }
    ),
    "heartbeat": frozenset(
        {
            "emit.heartbeats.enabled",
            "emit.heartbeats.interval.seconds",
            "heartbeats.topic.replication.factor",
        }
    ),
}
_SWITCHES = {"checkpoint": "emit.checkpoints.enabled", "heartbeat": "emit.heartbeats.enabled"}
_BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
_CONVERTERS = ("key.converter", "value.converter", "header.converter")
_CLUSTER_ONLY = (
    "not applied: the Mirror connectors read only bootstrap.servers, security.protocol, ssl.* "
    "and sasl.* under {prefix} (client settings go under source.consumer.*, source.admin.*, "
    "target.admin.*, producer.override.*)"
)


def connector_role(value: str) -> str | None:
    """``source``, ``checkpoint`` or ``heartbeat`` for a Mirror connector class, as Connect
    names plugins (fully qualified, simple name, or simple name without ``Connector``)."""
    name = value.strip().removeprefix(_PACKAGE)
    for role, simple in _CLASSES.items():
        if name in (simple, simple.removesuffix("Connector")):
            return role
    return None


def role_problem(value: str, where: str) -> str | None:
    """Why a connector file of class ``value`` is not run on its own, or None for the source
    connector's; ``where`` names the class's key."""
    role = connector_role(value)
    if role == "source":
        return None
    if role is None:
        return (
            f"{where}: {value.strip()!r} is not a Mirror connector, expected {_PACKAGE}"
            "MirrorSourceConnector (k2k translates MirrorMaker 2's connectors only)"
        )
    switch = _SWITCHES[role]
    return (
        f"{where}: {_CLASSES[role]} is not run on its own: k2k runs a flow's replication, "
        f"checkpoints and heartbeats as one pipeline (its checkpoints come from the offsets "
        f"its own replication maps); expected the flow's MirrorSourceConnector config with "
        f"{switch} = true added (and this file's other settings of that feature)"
    )


def _owner(key: str) -> str:
    for role, keys in _OWN_KEYS.items():
        if key in keys:
            return role
    return "source"


def _spelled(entry: tuple[str, str] | None) -> str:
    return "unset" if entry is None else repr(entry[0])


def merge_roles(roles: Mapping[str, Entries | None], mirror: Entries, notes: list[Note]) -> Entries:
    """One flow's connector keys from its connectors' configs (``roles``: ``source``, and
    ``checkpoint`` / ``heartbeat`` when run) and ``mirror``'s keys, which Strimzi writes over
    every connector's. A key only the checkpoint (heartbeat) connector reads comes from that
    connector when it runs, else from the source connector's config; shared keys from the
    source connector's. What loses is noted."""
    source = roles["source"] or {}
    merged: Entries = {}
    for key, entry in source.items():
        owner = _owner(key)
        if owner != "source" and roles.get(owner) is not None:
            advice = f"not applied: the {_CLASSES[owner]}'s own config decides this setting"
            notes.append(Note(entry[1], advice))
            continue
        merged[key] = entry
    for owner in ("checkpoint", "heartbeat"):
        config = roles.get(owner)
        if config is None:
            merged.setdefault(_SWITCHES[owner], ("false", f"(no {_CLASSES[owner]})"))
            continue
        for key, entry in config.items():
            if _owner(key) == owner:
                merged[key] = entry
            elif key not in merged or merged[key][0] != entry[0]:
                advice = (
                    "not applied: k2k runs the flow as one pipeline, which takes the "
                    f"MirrorSourceConnector's setting ({_spelled(merged.get(key))})"
                )
                notes.append(Note(entry[1], advice))
    for key, entry in mirror.items():
        previous = merged.get(key)
        if previous is not None and previous[1] != entry[1]:
            notes.append(Note(previous[1], f"overridden by {entry[1]}, as Strimzi does"))
        merged[key] = entry
    return merged


@dataclass
class Translation:
    """Dedicated-mode properties and how the input spells each of their keys."""

    props: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    #: Dedicated-mode key prefix -> the input's spelling (for keys the input does not have).
    prefixes: dict[str, str] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def put(self, key: str, value: str, origin: str) -> None:
        """Set ``key``; a second, different value (two mirrors describing one cluster
        differently) is a problem naming both spellings."""
        if key in self.props and self.props[key] != value:
            self.problems.append(
                f"{origin}: differs from {self.names.get(key, key)}, expected one "
                "description of each cluster"
            )
            return
        self.props[key], self.names[key] = value, origin

    def absorb(self, other: Translation) -> None:
        """Add another flow's translation (``clusters`` is the caller's to set)."""
        for key, value in other.props.items():
            if key != "clusters":
                self.put(key, value, other.names.get(key, key))
        for key, name in other.names.items():
            self.names.setdefault(key, name)
        self.prefixes.update(other.prefixes)
        self.notes.extend(other.notes)
        self.problems.extend(other.problems)


def _converter_note(key: str, value: str, entries: Entries) -> Note | None:
    """None for ByteArrayConverter (k2k copies bytes unchanged, as it does)."""
    base = next(c for c in _CONVERTERS if key == c or key.startswith(f"{c}."))
    if key == base:
        if value.strip() in (_BYTES, _BYTES.rsplit(".", 1)[-1]):
            return None
        return Note(
            entries[key][1],
            f"not applied: k2k copies keys, values and headers byte for byte, as {_BYTES} "
            "does (Connect would re-encode them with this converter)",
        )
    chosen = entries.get(base, ("", ""))[0].strip()
    if chosen in (_BYTES, _BYTES.rsplit(".", 1)[-1]):
        return Note(entries[key][1], f"an option of {base}: nothing to do")
    return Note(entries[key][1], f"an option of {base}: not applied (nor is {base})")


def flow_properties(entries: Entries, flow_name: str | None = None) -> Translation:
    """The dedicated-mode properties of the flow ``entries`` describe (a connector config,
    merged by :func:`merge_roles`); ``flow_name`` spells the flow's prefix in messages about
    keys the input does not have (default: the bare key, as in a connector file)."""
    out = Translation()
    alias = {
        side: entries.get(f"{side}.cluster.alias", (side, ""))[0].strip()
        for side in ("source", "target")
    }
    source, target = alias["source"], alias["target"]
    if source == target:
        where = entries.get("target.cluster.alias", ("", "target.cluster.alias"))[1]
        out.problems.append(
            f"{where}: {target!r} is the source's alias too, expected two different aliases"
        )
        return out
    flow = f"{source}->{target}"
    out.props["clusters"] = f"{source}, {target}"
    out.props[f"{flow}.enabled"] = "true"
    out.prefixes[f"{flow}."] = "" if flow_name is None else flow_name
    for side in ("source", "target"):
        out.names.setdefault(
            f"{alias[side]}.bootstrap.servers", f"{side}.cluster.bootstrap.servers"
        )
    for key, (value, origin) in entries.items():
        _one(out, key, value, origin, alias, entries)
    return out


def _one(
    out: Translation,
    key: str,
    value: str,
    origin: str,
    alias: Mapping[str, str],
    entries: Entries,
) -> None:
    flow = f"{alias['source']}->{alias['target']}"
    if key in ("connector.class", "source.cluster.alias", "target.cluster.alias"):
        return
    if key == "enabled" and value.strip().lower() != "true":
        out.problems.append(f"{origin}: {value!r} turns the connector off, expected true or unset")
        return
    for side in ("source", "target"):
        prefix = f"{side}.cluster."
        if key.startswith(prefix):
            sub = key[len(prefix) :]
            if is_client_key(sub):
                out.put(f"{alias[side]}.{sub}", value, origin)
            else:
                out.notes.append(Note(origin, _CLUSTER_ONLY.format(prefix=prefix)))
            return
    if key.startswith(_CONVERTERS):
        note = _converter_note(key, value, entries)
        if note is not None:
            out.notes.append(note)
        return
    if key.startswith("target.producer."):
        out.notes.append(
            Note(
                origin,
                "not applied: MM2's own producer to the target (offset syncs); records go "
                "through Connect's worker producer, set with producer.override.*",
            )
        )
        return
    out.put(f"{flow}.{key}", value, origin)
