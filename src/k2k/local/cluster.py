"""Embedded Apache Kafka clusters (KRaft) on loopback: one broker by default, or several.

Why one JVM by default: a combined broker and controller is the smallest real Kafka that does
everything k2k needs (transactions, compaction, consumer groups), starts in a few seconds and
fits in 512 MB. The demo and the tests run two of them, *source* and *target*, from
:func:`start_pair`.

Why several brokers: leader elections, shrinking and growing ISRs and rolling restarts are what
every production cluster goes through, and only a cluster of several brokers shows them. With
``brokers=N`` the first three nodes are combined brokers and controllers, a three-voter quorum
that keeps working while any one of them restarts (the point of a rolling restart); nodes 4 and
up are brokers only. Two brokers get one voter: a quorum of two would stop whenever either node
does, so it is no better than one. Replication follows the size: internal topics (and new
topics by default) get ``min(3, N)`` replicas, one fewer of them in sync
(:class:`~k2k.local.settings.Topology`).

Layout: the only node of a one-broker cluster lives in the cluster's ``data_dir`` (see
:mod:`k2k.local.node`); the nodes of a larger cluster in ``data_dir/broker-<id>/``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from k2k.errors import LocalClusterError
from k2k.local.install import ensure_kafka_installed
from k2k.local.node import Announce, LocalNode
from k2k.local.ports import free_ports
from k2k.local.process import LOG_TAIL_LINES
from k2k.local.settings import Topology, listener_ports, read_properties, read_topology
from k2k.local.storage import new_cluster_id

__all__ = [
    "ClusterPair",
    "LocalCluster",
    "controller_count",
    "start_clusters",
    "start_nodes",
    "start_pair",
    "stop_clusters",
    "stop_nodes",
]

MAX_VOTERS = 3
"""Controllers of a cluster of three or more brokers (see the module docstring)."""


def controller_count(brokers: int) -> int:
    """How many of a cluster's ``brokers`` are controllers too: three from three brokers up,
    else one (a quorum of two tolerates no failure more than a quorum of one does).

    >>> [controller_count(n) for n in (1, 2, 3, 5)]
    [1, 1, 3, 3]
    """
    return MAX_VOTERS if brokers >= MAX_VOTERS else 1


def _broker_dir(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"broker-{node_id}"


class LocalCluster:
    """One embedded Kafka cluster of ``brokers`` KRaft nodes listening on ``127.0.0.1``.

    Broker settings favour fast start-up: no group rebalance delay,
    ``auto.create.topics.enable=false`` (k2k must create what it needs, as on a production
    cluster) and ``message.max.bytes`` of 10 MiB; replication as the module docstring says.
    ``broker_overrides`` are written last and win.

    :param name: label used in messages and by the CLI ("source", "target").
    :param port: the PLAINTEXT listener port of broker 1; brokers 2, 3, ... listen on the ports
        after it. 0 picks free ports.
    :param data_dir: where this cluster keeps everything (see the module docstring).
    :param controller_port: the KRaft controller listener of a one-broker cluster; None picks a
        free port at each start. A larger cluster picks its controllers' ports once, here.
    :param heap: JVM maximum heap (``-Xmx``) of each broker, e.g. "512m" or "1g".
    :param broker_overrides: extra or replacement ``server.properties`` entries (every broker).
    :param jvm_options: GC/JIT options; defaults to :data:`~k2k.local.launch.DEFAULT_JVM_OPTIONS`.
    :param owner_pid: stop the brokers when this process ends, even if it is killed without a
        chance to clean up (test sessions pass their own pid). None: they run until
        :meth:`stop`, as ``k2k local up`` wants.
    :param brokers: how many brokers (see the module docstring for their roles).

    The JVMs run in sessions of their own, so they outlive the process that started them
    (the ``k2k local up`` command).
    """

    def __init__(
        self,
        name: str,
        port: int,
        data_dir: str | os.PathLike[str],
        controller_port: int | None = None,
        heap: str = "512m",
        broker_overrides: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] | None = None,
        owner_pid: int | None = None,
        brokers: int = 1,
    ) -> None:
        if brokers < 1:
            raise LocalClusterError(f"a cluster needs at least one broker, got {brokers}")
        options: dict[str, Any] = {
            "heap": heap,
            "broker_overrides": broker_overrides,
            "jvm_options": jvm_options,
            "owner_pid": owner_pid,
        }
        self.name = name
        self.data_dir = Path(data_dir).expanduser().resolve()
        if brokers == 1:
            node = LocalNode(name, port, self.data_dir, controller_port, **options)
            self.nodes: tuple[LocalNode, ...] = (node,)
            return
        ports = [port + i for i in range(brokers)] if port else free_ports(brokers)
        voters = dict(enumerate(free_ports(controller_count(brokers), ports), start=1))
        self.nodes = tuple(
            LocalNode(
                name,
                node_port,
                _broker_dir(self.data_dir, node_id),
                topology=Topology(node_id, brokers, voters),
                **options,
            )
            for node_id, node_port in enumerate(ports, start=1)
        )

    def __repr__(self) -> str:
        return (
            f"LocalCluster(name={self.name!r}, bootstrap={self.bootstrap!r}, "
            f"data_dir={str(self.data_dir)!r})"
        )

    # -- brokers -------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients: every broker's ``127.0.0.1:<port>``, so a client
        started while one broker is down still finds the cluster."""
        return ",".join(node.address for node in self.nodes)

    @property
    def port(self) -> int:
        """Broker 1's listener port."""
        return self.nodes[0].port

    def node(self, node_id: int) -> LocalNode:
        """The broker whose ``node.id`` is ``node_id`` (1 to the broker count)."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise LocalClusterError(
            f"the {self.name} cluster has brokers 1 to {len(self.nodes)}, not {node_id}"
        )

    # Broker 1's files and process: the whole cluster's when it has one broker.
    @property
    def server_properties(self) -> Path:
        return self.nodes[0].server_properties

    @property
    def log_file(self) -> Path:
        return self.nodes[0].log_file

    @property
    def pid_file(self) -> Path:
        return self.nodes[0].pid_file

    @property
    def log_dirs(self) -> Path:
        return self.nodes[0].log_dirs

    @property
    def pid(self) -> int | None:
        """Pid of broker 1's running JVM (the only one of a one-broker cluster), or None."""
        return self.nodes[0].pid

    @classmethod
    def from_data_dir(cls, name: str, data_dir: str | os.PathLike[str]) -> LocalCluster | None:
        """Rebuild the cluster that last ran in ``data_dir`` (None if it never started there).

        Used by ``k2k local down/status`` in a later process than the one that started the
        cluster: the brokers and their ports come from the ``server.properties`` files that
        start wrote.
        """
        root = Path(data_dir).expanduser().resolve()
        single = _node_from_properties(name, root, None)
        if single is not None:
            cluster = cls.__new__(cls)
            cluster.name, cluster.data_dir, cluster.nodes = name, root, (single,)
            return cluster
        found = sorted(root.glob("broker-*/server.properties"))
        nodes = [_node_from_properties(name, path.parent, len(found)) for path in found]
        if not nodes or None in nodes:
            return None
        cluster = cls.__new__(cls)
        cluster.name, cluster.data_dir = name, root
        cluster.nodes = tuple(sorted((n for n in nodes if n is not None), key=_node_id))
        return cluster

    # -- state ---------------------------------------------------------------------------
    def is_running(self) -> bool:
        """Return True if every broker's JVM is alive (some may still be starting up)."""
        return all(node.is_running() for node in self.nodes)

    def running_nodes(self) -> list[LocalNode]:
        """The brokers whose JVM is alive."""
        return [node for node in self.nodes if node.is_running()]

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 60.0, announce: Announce | None = None) -> None:
        """Start every broker that does not run, together, and return once all are ready.

        What each broker recovers from after an unclean stop, and what it refuses, is
        :meth:`LocalNode.start`'s; brokers of a larger cluster are formatted with the
        cluster id the others have (the first start makes one for all). If a broker fails,
        the ones this call started are stopped again before the first error is raised.

        :raises LocalClusterError: see :meth:`LocalNode.start`; or the brokers' storage
            belongs to different clusters.
        """
        self._share_cluster_id()
        _start_together(self.nodes, timeout, announce)

    def _share_cluster_id(self) -> None:
        """Give every node of a larger cluster the id to format empty storage with: the one
        the other nodes were formatted with, or a new one on the first start."""
        if len(self.nodes) == 1:
            return
        stored = {node.stored_cluster_id() for node in self.nodes} - {None}
        if len(stored) > 1:
            raise LocalClusterError(
                f"the {self.name} cluster's brokers in {self.data_dir} were formatted for "
                f"different clusters ({', '.join(sorted(str(i) for i in stored))}); delete "
                f"{self.data_dir} to start this cluster empty (its topics are lost)"
            )
        cluster_id = stored.pop() if stored else new_cluster_id()
        for node in self.nodes:
            node.cluster_id = cluster_id

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every broker (see :meth:`LocalNode.stop`), together.

        Together, because each broker's clean shutdown waits for the controller quorum to
        approve it (its leaders move first): brokers that ask at once are approved at once.
        A broker that asks after most voters have gone waits for an approval that cannot
        come (minutes, Kafka's own bound); once the quorum has been gone for
        :data:`QUORUM_GONE_GRACE_S` it is killed instead (the next start recovers its logs).

        :raises LocalClusterError: a process survived SIGKILL (should not happen).
        """
        stop_nodes(self.nodes, timeout)

    def check_storage(self) -> None:
        """Refuse storage that holds data but has no valid ``meta.properties`` (see
        :meth:`LocalNode.check_storage`), for every broker; cheap, no JVM."""
        for node in self.nodes:
            node.check_storage()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of each broker's ``broker.log``, indented under a heading:
        what to show when a broker failed to start or died."""
        return "\n".join(node.log_tail(lines) for node in self.nodes)


def _node_id(node: LocalNode) -> int:
    return node.node_id


def _node_from_properties(name: str, data_dir: Path, brokers: int | None) -> LocalNode | None:
    """The node that last ran in ``data_dir``, from its ``server.properties``: the only node
    of a one-broker cluster (``brokers`` None), or one of ``brokers``."""
    path = data_dir / "server.properties"
    try:
        ports = listener_ports(read_properties(path))
    except FileNotFoundError:
        return None
    if "PLAINTEXT" not in ports:
        return None
    if brokers is None:
        return LocalNode(name, ports["PLAINTEXT"], data_dir, ports.get("CONTROLLER"))
    return LocalNode(name, ports["PLAINTEXT"], data_dir, topology=read_topology(path, brokers))


def _together(calls: Sequence[Callable[[], None]]) -> BaseException | None:
    """Run ``calls`` concurrently, each to its end; the first error, or None."""
    with ThreadPoolExecutor(max(len(calls), 1)) as pool:
        errors = [future.exception() for future in [pool.submit(call) for call in calls]]
    return next((error for error in errors if error is not None), None)


def _start_together(nodes: Sequence[LocalNode], timeout: float, announce: Announce | None) -> None:
    """Start ``nodes`` concurrently; if any fails, stop again the ones that did not run before
    and raise the first error."""
    was_running = [node.is_running() for node in nodes]
    error = _together([functools.partial(node.start, timeout, announce) for node in nodes])
    if error is not None:
        _stop_started(nodes, was_running)
        raise error


def _stop_started(nodes: Sequence[LocalNode], was_running: Sequence[bool]) -> None:
    for node, running_before in zip(nodes, was_running, strict=True):
        if not running_before:
            node.stop()


def _stop_together(nodes: Sequence[LocalNode], timeout: float) -> None:
    """Stop ``nodes`` concurrently; every one gets its attempt, the first error is raised."""
    watches = {node.data_dir.parent: _QuorumGone(node.data_dir.parent, nodes) for node in nodes}
    calls = [
        functools.partial(node.stop, timeout, watches[node.data_dir.parent].gone)
        if node.topology is not None
        else functools.partial(node.stop, timeout)
        for node in nodes
    ]
    error = _together(calls)
    if error is not None:
        raise error


QUORUM_GONE_GRACE_S = 5.0
"""How long a broker of a cluster whose controller quorum has gone (most voters exited) may
still take to exit: enough to finish a shutdown the quorum approved before it went."""


class _QuorumGone:
    """Whether most controllers of the cluster in ``root`` have exited (or were not running:
    voters missing from ``nodes`` count as gone), for :data:`QUORUM_GONE_GRACE_S` already:
    a broker still waiting for approval of its controlled shutdown then never gets it.
    Asked from every stopping node's thread."""

    def __init__(self, root: Path, nodes: Sequence[LocalNode]) -> None:
        mine = [n for n in nodes if n.data_dir.parent == root and n.topology is not None]
        self._voters = len(mine[0].topology.voters) if mine and mine[0].topology else 0
        self._stopping = [n for n in mine if n.topology and n.topology.controller_port]
        self._since: float | None = None

    def gone(self) -> bool:
        if self._since is None:
            alive = sum(voter.is_running() for voter in self._stopping)
            if alive * 2 > self._voters:
                return False
            self._since = time.monotonic()
        return time.monotonic() - self._since >= QUORUM_GONE_GRACE_S


class ClusterPair(NamedTuple):
    """The two clusters of the demo and the tests; unpacks as ``source, target``."""

    source: LocalCluster
    target: LocalCluster

    def stop(self, timeout: float = 30.0) -> None:
        """Stop both clusters (see :func:`stop_clusters`)."""
        stop_clusters(self, timeout)


def start_pair(
    data_root: str | os.PathLike[str],
    source_port: int,
    target_port: int,
    timeout: float = 60.0,
    **cluster_options: Any,
) -> ClusterPair:
    """Start a ``source`` and a ``target`` cluster under ``data_root/{source,target}``.

    :param source_port: listener port of the source cluster (0 picks a free one).
    :param target_port: listener port of the target cluster (0 picks a free one).
    :param cluster_options: passed to both :class:`LocalCluster` constructors (``heap``,
        ``broker_overrides``, ``jvm_options``, ``brokers``, ...).
    :raises LocalClusterError: see :func:`start_clusters`.
    """
    root = Path(data_root)
    pair = ClusterPair(
        LocalCluster("source", source_port, root / "source", **cluster_options),
        LocalCluster("target", target_port, root / "target", **cluster_options),
    )
    start_clusters(pair, timeout)
    return pair


def start_clusters(
    clusters: Sequence[LocalCluster], timeout: float = 60.0, announce: Announce | None = None
) -> None:
    """Start several clusters concurrently and return once all are ready.

    Concurrent start roughly halves the wait for a pair. If any cluster fails, the brokers
    this call started are stopped again before the first error is raised, so nothing
    half-started lingers; brokers that were already running are left alone. ``announce``:
    see :meth:`LocalNode.start`.
    """
    ensure_kafka_installed()  # once, before the threads would queue on the install lock
    nodes = [node for cluster in clusters for node in cluster.nodes]
    was_running = [node.is_running() for node in nodes]
    error = _together([functools.partial(c.start, timeout, announce) for c in clusters])
    if error is not None:
        _stop_started(nodes, was_running)
        raise error


def stop_clusters(clusters: Sequence[LocalCluster], timeout: float = 30.0) -> None:
    """Stop several clusters concurrently (each clean shutdown takes a moment).

    Every broker gets its stop attempt even if another one fails; the first error is raised.
    """
    stop_nodes([node for cluster in clusters for node in cluster.nodes], timeout)


def start_nodes(
    nodes: Sequence[LocalNode], timeout: float = 60.0, announce: Announce | None = None
) -> None:
    """Start several brokers concurrently (say, one of each cluster after a drill killed
    them) and return once all are ready; if one fails, the ones this call started are
    stopped again. Their clusters were started before, so their storage is formatted."""
    _start_together(nodes, timeout, announce)


def stop_nodes(nodes: Sequence[LocalNode], timeout: float = 30.0) -> None:
    """Stop several brokers concurrently (see :func:`stop_clusters`); a broker still waiting
    for its controlled shutdown once its cluster's quorum has gone stops waiting (see
    :meth:`LocalCluster.stop`)."""
    _stop_together(nodes, timeout)
