"""Embedded Apache Kafka clusters for the demo (``k2k local up``) and the integration tests.

k2k's promise is "real parts, no mocks": the demo and every integration test talk to real
Apache Kafka brokers. This package installs the broker jars from Maven Central
(:func:`ensure_kafka_installed`) and runs KRaft clusters on loopback ports (:class:`LocalCluster`,
:func:`start_pair`): one node by default, or several brokers (``brokers=3``) for drills with
leader elections and rolling restarts, without Docker or a distribution tarball.

    >>> from k2k.local import start_pair, free_port                    # doctest: +SKIP
    >>> pair = start_pair("/tmp/k2k-demo", free_port(), free_port())    # doctest: +SKIP
    >>> pair.source.bootstrap, pair.target.bootstrap                    # doctest: +SKIP
    ('127.0.0.1:41231', '127.0.0.1:39511')
    >>> pair.stop()                                                     # doctest: +SKIP
"""

from k2k.local.cluster import ClusterPair, LocalCluster, start_clusters, start_pair, stop_clusters
from k2k.local.install import KAFKA_VERSION, ensure_kafka_installed, find_java, k2k_home
from k2k.local.node import LocalNode
from k2k.local.ports import free_port, port_is_free

__all__ = [
    "KAFKA_VERSION",
    "ClusterPair",
    "LocalCluster",
    "LocalNode",
    "ensure_kafka_installed",
    "find_java",
    "free_port",
    "k2k_home",
    "port_is_free",
    "start_clusters",
    "start_pair",
    "stop_clusters",
]
