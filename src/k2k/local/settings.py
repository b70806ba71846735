"""What an embedded broker is configured with: the ``server.properties`` and ``log4j2.yaml``
written into its data dir on every start, and reading them back (a later ``k2k local``
command finds a running cluster's ports there).

A node's place in its cluster is a :class:`Topology`: its node id, how many brokers the
cluster has, and the controller quorum (which nodes vote, on which ports). Settings that
depend on the broker count (replication factors, ``min.insync.replicas``, how soon a silent
broker is fenced) are derived from it, so a one-broker cluster is configured exactly as
before multi-broker clusters existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.local.ports import HOST, free_port

__all__ = [
    "MAX_MESSAGE_BYTES",
    "Topology",
    "broker_settings",
    "controller_addresses",
    "listener_ports",
    "read_properties",
    "read_topology",
    "single_node",
    "write_config",
]

MAX_MESSAGE_BYTES = 10 * 1024 * 1024
"""Largest record batch the brokers accept (``message.max.bytes``): a 1 MB record fits easily."""

MAX_REPLICATION_FACTOR = 3
"""Replication factor of internal topics (and the default of new topics) once a cluster has
this many brokers: what production clusters use, and one broker may be down without any
partition losing its ``min.insync.replicas``."""

SINGLE_NODE_SESSION_MS = 60_000
"""``broker.session.timeout.ms`` of a one-broker cluster (see :func:`broker_settings`)."""

MULTI_NODE_SESSION_MS = 9_000
"""``broker.session.timeout.ms`` of a cluster with several brokers: Kafka's default, so the
leaders of a broker that died move to another broker within 9 s."""


@dataclass(frozen=True)
class Topology:
    """Where one node sits in its cluster.

    :param node_id: this node's ``node.id``.
    :param brokers: how many brokers the cluster has (every node is a broker).
    :param voters: the controller quorum, node id -> controller port on 127.0.0.1. A node
        whose id is among them is a combined broker and controller; others are brokers only.
    """

    node_id: int = 1
    brokers: int = 1
    voters: Mapping[int, int] = field(default_factory=dict)

    @property
    def controller_port(self) -> int | None:
        """This node's controller listener port; None for a broker-only node."""
        return self.voters.get(self.node_id)

    @property
    def replication_factor(self) -> int:
        """Of the internal topics and of new topics by default: ``min(3, brokers)``."""
        return min(MAX_REPLICATION_FACTOR, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        """One less than the replication factor (at least 1): writes go on while any one
        replica is away (a rolling restart), and an acknowledged write is on two brokers
        once there are three."""
        return max(1, self.replication_factor - 1)

    def quorum_voters(self) -> str:
        """``controller.quorum.voters``: ``id@127.0.0.1:port`` of each voter."""
        return ",".join(f"{i}@{HOST}:{port}" for i, port in sorted(self.voters.items()))


def broker_settings(
    port: int, topology: Topology, log_dirs: Path, overrides: Mapping[str, object]
) -> dict[str, str]:
    """The broker configuration; each choice is about a small cluster or a fast start.
    ``overrides`` are applied last and win."""
    settings: dict[str, object] = {
        **_roles_and_listeners(port, topology),
        "log.dirs": log_dirs,
        **_replication(topology),
        # The first group or transaction creates these topics; 50 partitions each (the
        # default) makes that first use take seconds on one node for no benefit.
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.num.partitions": 5,
        # Consumer groups in tests join one by one; do not wait 3 s for more members.
        "group.initial.rebalance.delay.ms": 0,
        # Topics are created explicitly, as k2k must do on real clusters.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        # Large records: the broker must accept what the demo and tests send (a 1 MB record);
        # replica fetches must be able to carry the largest batch too.
        "message.max.bytes": MAX_MESSAGE_BYTES,
        "replica.fetch.max.bytes": MAX_MESSAGE_BYTES,
        # One node: its controller fences its own broker after missed heartbeats (9 s by
        # default); on a laptop starved of CPU that takes every leader away until the
        # broker registers again, and there is no other node to fail over to. With several
        # brokers, Kafka's default: another broker takes the leaders of a silent one.
        "broker.session.timeout.ms": (
            SINGLE_NODE_SESSION_MS if topology.brokers == 1 else MULTI_NODE_SESSION_MS
        ),
        # The compaction dedupe buffer defaults to 128 MiB; keep it small next to -Xmx512m.
        "log.cleaner.dedupe.buffer.size": 32 * 1024 * 1024,
        # Compact within a second of a segment becoming cleanable (15 s by default), so
        # compacted topics show their offset gaps while one tries things out.
        "log.cleaner.backoff.ms": 1000,
    }
    settings.update(overrides)
    # After a kill -9 the controller keeps the dead broker's registration for a session
    # and refuses the new broker's (DUPLICATE_BROKER_REGISTRATION). The broker gives up
    # registering after 60 s by default, which races that 60 s session and usually loses
    # ("fatal error while waiting for the controller to acknowledge that we are caught
    # up"). Outlast the session, so the slow path (no unregister) still starts.
    session_ms = int(str(settings["broker.session.timeout.ms"]))
    settings.setdefault("initial.broker.registration.timeout.ms", session_ms + 30_000)
    return {key: str(value) for key, value in settings.items()}


def _roles_and_listeners(port: int, topology: Topology) -> dict[str, object]:
    """Roles, ids and listeners: a voter listens for controllers too; every node, broker-only
    ones included, must know the quorum and how to speak to it."""
    listeners = [f"PLAINTEXT://{HOST}:{port}"]
    if topology.controller_port is not None:
        listeners.append(f"CONTROLLER://{HOST}:{topology.controller_port}")
    return {
        "process.roles": "broker,controller" if topology.controller_port else "broker",
        "node.id": topology.node_id,
        "controller.quorum.voters": topology.quorum_voters(),
        "listeners": ",".join(listeners),
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }


def _replication(topology: Topology) -> dict[str, object]:
    """Replication of internal topics and new topics: every replica on a one-node cluster,
    ``min(3, brokers)`` replicas and one fewer in sync on a larger one (see
    :attr:`Topology.min_insync_replicas`)."""
    factor, in_sync = topology.replication_factor, topology.min_insync_replicas
    return {
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": in_sync,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": in_sync,
        "default.replication.factor": factor,
        "min.insync.replicas": in_sync,
    }


def write_config(
    data_dir: Path,
    port: int,
    topology: Topology,
    log_dirs: Path,
    overrides: Mapping[str, object],
) -> None:
    """Write ``server.properties`` and ``log4j2.yaml`` into ``data_dir`` for this start."""
    settings = broker_settings(port, topology, log_dirs, overrides)
    lines = [
        "# Written by k2k.local on every start; change LocalCluster(broker_overrides=...).",
        *(f"{key}={value}" for key, value in settings.items()),
    ]
    (data_dir / "server.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")
    log4j = resources.files("k2k.local").joinpath("log4j2.yaml").read_text(encoding="utf-8")
    (data_dir / "log4j2.yaml").write_text(log4j, encoding="utf-8")


def single_node(port: int, controller_port: int | None) -> Topology:
    """The topology of a one-node cluster: ``controller_port`` None picks a free port now
    (never the broker's own ``port``, which the OS may hand back while it is still free)."""
    while controller_port is None or controller_port == port:
        controller_port = free_port()
    return Topology(1, 1, {1: controller_port})


def read_properties(path: Path) -> dict[str, str]:
    """Parse the simple ``key=value`` files we write ourselves (no escapes, no continuations)."""
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def listener_ports(props: Mapping[str, str]) -> dict[str, int]:
    """The port of each listener in ``props`` by its name ("PLAINTEXT", "CONTROLLER")."""
    ports: dict[str, int] = {}
    for listener in props.get("listeners", "").split(","):
        label, _, address = listener.partition("://")
        if address.rpartition(":")[2].isdigit():
            ports[label.strip()] = int(address.rpartition(":")[2])
    return ports


def controller_addresses(server_properties: Path) -> str:
    """``host:port,...`` of the controller quorum written for the running JVM (what
    ``--bootstrap-controller`` takes)."""
    voters = read_properties(server_properties).get("controller.quorum.voters", "")
    addresses = [voter.partition("@")[2].strip() for voter in voters.split(",") if "@" in voter]
    if not addresses:
        raise LocalClusterError(f"no controller.quorum.voters in {server_properties}")
    return ",".join(addresses)


def read_topology(server_properties: Path, brokers: int) -> Topology:
    """The topology a node of a ``brokers``-broker cluster was last started with."""
    props = read_properties(server_properties)
    voters: dict[int, int] = {}
    for voter in props.get("controller.quorum.voters", "").split(","):
        node, _, address = voter.partition("@")
        if node.strip().isdigit() and address.rpartition(":")[2].isdigit():
            voters[int(node)] = int(address.rpartition(":")[2])
    return Topology(int(props.get("node.id", "1")), brokers, voters)
