"""What k2k says about MirrorMaker 2 properties that do not reach a pipeline as written.

Every property of an MM2 file either becomes a pipeline key or a :class:`Note` naming it and
saying what to do instead; the advice here changes when MM2 gains properties or k2k gains the
features they ask for.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SOURCE_PRODUCER",
    "TRANSFORM_SKIPPED",
    "Note",
    "advice_for",
    "is_transform_key",
    "unknown_advice",
]


@dataclass(frozen=True)
class Note:
    """A property of the file that does not reach a pipeline as written, and why."""

    prop: str
    advice: str

    def line(self) -> str:
        return f"{self.prop}: {self.advice}"


_EXACT_MAPPINGS = (
    "not needed: k2k writes exact offset mappings (offsetMapping.topic, on the target), one "
    "per contiguous run of records"
)
_UNKNOWN = "not an MM2 property k2k translates: not applied"
_WORKER = "a Kafka Connect worker setting; k2k runs no Connect worker: nothing to do"
_CONNECTOR_ADVICE: dict[str, str] = {
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
#: Why a producer of the source cluster is left out.
SOURCE_PRODUCER = (
    "k2k never writes to the source cluster (MM2 uses this producer for offset syncs there)"
)


def _is_worker_key(key: str) -> bool:
    return key.startswith(_WORKER_PREFIXES)


#: What an unsupported transform says once the user chose to run anyway.
TRANSFORM_SKIPPED = "NOT applied (--skip-unsupported-transforms): records pass it unchanged"
_TOP_LEVEL_TRANSFORM = (
    "MM2 ignores top-level transform and predicate options in dedicated mode (its connectors "
    "take only the transforms and predicates lists from the top level): not applied; write it "
    "as <source>-><target>.{key}"
)


def is_transform_key(key: str) -> bool:
    """A Connect transform or predicate property (``transforms``, ``predicates.p1.type``)."""
    return key in ("transforms", "predicates") or key.startswith(("transforms.", "predicates."))


def _advice(key: str) -> str | None:
    if is_transform_key(key):
        return _TOP_LEVEL_TRANSFORM.format(key=key)
    for name, advice in _CONNECTOR_ADVICE.items():
        if key == name or (name == "config.providers" and key.startswith(name)):
            return advice
    return None


def unknown_advice(key: str) -> str:
    """What to say of a property no pipeline key takes and no advice names."""
    return _WORKER if _is_worker_key(key) else _UNKNOWN


def advice_for(key: str, value: str) -> str:
    """What to do about a property no pipeline key takes."""
    advice = _advice(key)
    if advice is None:
        return unknown_advice(key)
    return advice
