"""What an embedded broker is configured with: the ``server.properties`` and ``log4j2.yaml``
written into its data dir on every start, and reading them back (a later ``k2k local``
command finds a running cluster's ports there)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.local.ports import HOST, free_port

__all__ = [
    "MAX_MESSAGE_BYTES",
    "broker_settings",
    "controller_address",
    "listener_ports",
    "read_properties",
    "write_config",
]

MAX_MESSAGE_BYTES = 10 * 1024 * 1024
"""Largest record batch the brokers accept (``message.max.bytes``): a 1 MB record fits easily."""


def broker_settings(
    port: int, controller_port: int, log_dirs: Path, overrides: Mapping[str, object]
) -> dict[str, str]:
    """The broker configuration; each choice is about a single node or a fast start.
    ``overrides`` are applied last and win."""
    settings: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": log_dirs,
        # One node: every internal topic must be satisfiable with a single replica.
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
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
        # The node's controller fences its own broker after missed heartbeats (9 s by
        # default): on a laptop starved of CPU that takes every leader away until the
        # broker registers again, and there is no other node to fail over to.
        "broker.session.timeout.ms": 60_000,
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


def write_config(
    data_dir: Path,
    port: int,
    controller_port: int | None,
    log_dirs: Path,
    overrides: Mapping[str, object],
) -> None:
    """Write ``server.properties`` and ``log4j2.yaml`` into ``data_dir`` for this start;
    ``controller_port`` None picks a free port now."""
    controller_port = controller_port or free_port()
    if controller_port == port:  # the OS may hand back our own, still-free port
        controller_port = free_port()
    settings = broker_settings(port, controller_port, log_dirs, overrides)
    lines = [
        "# Written by k2k.local on every start; change LocalCluster(broker_overrides=...).",
        *(f"{key}={value}" for key, value in settings.items()),
    ]
    (data_dir / "server.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")
    log4j = resources.files("k2k.local").joinpath("log4j2.yaml").read_text(encoding="utf-8")
    (data_dir / "log4j2.yaml").write_text(log4j, encoding="utf-8")


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


def controller_address(server_properties: Path) -> str:
    """``host:port`` of the CONTROLLER listener written for the running JVM."""
    listeners = read_properties(server_properties)["listeners"]
    for listener in listeners.split(","):
        label, _, address = listener.partition("://")
        if label.strip() == "CONTROLLER":
            return address.strip()
    raise LocalClusterError(f"no CONTROLLER listener in {server_properties}")
