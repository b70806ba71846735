"""One broker of an embedded multi-broker cluster at a time: stop, start or SIGKILL it, see
which partitions it leads, and wait until it is back in the ISR of every partition it holds.

Why waits on metadata and not on time: a broker that restarts is "ready" once it registered
(:meth:`k2k.local.LocalNode.start`), but its replicas rejoin the ISRs only after they caught up
with their leaders, which takes as long as the load makes it take. A rolling restart that
moves on before that can take a partition below ``min.insync.replicas``, which is an outage
the drill did not mean to cause.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from k2k.local import LocalCluster
from tests.helpers.kafka import eventually

__all__ = [
    "BrokerTimes",
    "kill_broker",
    "leaders",
    "out_of_sync",
    "restart_broker",
    "rolling_restart",
    "wait_in_sync",
    "wait_leaders_moved",
]

#: A restarted broker catches up with every leader under the drills' load within seconds;
#: this bounds a broker that never does.
IN_SYNC_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class BrokerTimes:
    """How long one broker's restart took: its stop, its start until it registered, and the
    wait until it was back in every ISR (seconds)."""

    node_id: int
    stop_s: float
    start_s: float
    in_sync_s: float

    def __str__(self) -> str:
        return (
            f"broker {self.node_id}: stop {self.stop_s:.1f} s, start {self.start_s:.1f} s, "
            f"in sync {self.in_sync_s:.1f} s"
        )


def _metadata(admin: AdminClient) -> ClusterMetadata:
    return admin.list_topics(timeout=10)


def _metadata_soon(admin: AdminClient) -> ClusterMetadata:
    """Metadata, asked again when a request times out (it may have gone to a broker that
    just died, or a starved machine answered late)."""
    metadata: ClusterMetadata = eventually(
        lambda: _metadata(admin), timeout=60, ignore=(KafkaException,)
    )
    return metadata


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": "0"})


def leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """Partition -> the node id of its leader (-1 while it has none)."""
    partitions = _metadata_soon(_admin(cluster)).topics[topic].partitions
    return {p: meta.leader for p, meta in sorted(partitions.items())}


def out_of_sync(metadata: ClusterMetadata, node_id: int) -> list[str]:
    """What keeps broker ``node_id`` from being fully back: not registered, or a partition
    (of any topic, internal ones included) with a replica on it that is not in its ISR."""
    if node_id not in metadata.brokers:
        return [f"broker {node_id} is not registered"]
    return [
        f"{topic}[{p}] replicas {meta.replicas} isr {meta.isrs}"
        for topic, topic_meta in sorted(metadata.topics.items())
        for p, meta in sorted(topic_meta.partitions.items())
        if node_id in meta.replicas and node_id not in meta.isrs
    ]


def wait_in_sync(cluster: LocalCluster, node_id: int, timeout: float = IN_SYNC_TIMEOUT_S) -> float:
    """Poll the metadata until broker ``node_id`` is registered and in the ISR of every
    partition it holds a replica of; the seconds it took.

    Asked through the broker itself, with a new client each time (a client's first
    metadata request goes to its bootstrap broker): the broker caught up with the metadata
    log before it registered again, so it cannot show the ISRs from before it stopped, as
    another broker's stale answer could.
    """
    started = time.monotonic()
    address = cluster.node(node_id).address

    def missing() -> list[str]:
        admin = AdminClient({"bootstrap.servers": address, "log_level": "0"})
        return out_of_sync(_metadata(admin), node_id)

    eventually(missing, expected=[], timeout=timeout, interval=0.2, ignore=(KafkaException,))
    return time.monotonic() - started


def wait_leaders_moved(cluster: LocalCluster, node_id: int, topics: list[str]) -> float:
    """Poll until no partition of ``topics`` names broker ``node_id`` (stopped or killed)
    as its leader and each has one; the seconds it took (a killed broker's partitions move
    once the controller gives up on it: ``broker.session.timeout.ms``)."""
    started = time.monotonic()
    admin = _admin(cluster)

    def stranded() -> list[str]:
        metadata = _metadata(admin)
        return [
            f"{topic}[{p}] leader {meta.leader}"
            for topic in topics
            for p, meta in sorted(metadata.topics[topic].partitions.items())
            if meta.leader in (node_id, -1)
        ]

    eventually(stranded, expected=[], timeout=60, interval=0.2, ignore=(KafkaException,))
    return time.monotonic() - started


def restart_broker(cluster: LocalCluster, node_id: int, timeout: float = 120.0) -> BrokerTimes:
    """Stop broker ``node_id`` cleanly (SIGTERM: a controlled shutdown moves its leaders
    away first), start it again, and wait until it is back in every ISR."""
    node = cluster.node(node_id)
    started = time.monotonic()
    node.stop()
    stopped = time.monotonic()
    node.start(timeout=timeout)
    ready = time.monotonic()
    in_sync = wait_in_sync(cluster, node_id)
    return BrokerTimes(node_id, stopped - started, ready - stopped, in_sync)


def rolling_restart(cluster: LocalCluster) -> list[BrokerTimes]:
    """Restart every broker of ``cluster`` in turn, each back in every ISR before the next
    one stops (what an operator does for an upgrade)."""
    return [restart_broker(cluster, node.node_id) for node in cluster.nodes]


def kill_broker(cluster: LocalCluster, node_id: int) -> int:
    """SIGKILL broker ``node_id`` (no controlled shutdown: its leaders stay on it until the
    controller fences it) and wait until the process is gone; its pid."""
    node = cluster.node(node_id)
    pid = node.pid
    assert pid is not None, f"broker {node_id} of the {cluster.name} cluster is not running"
    os.kill(pid, signal.SIGKILL)
    eventually(node.is_running, expected=False, timeout=30)
    return pid
