"""Clusters of several brokers without starting one: what each node is configured with, how a
later ``k2k local`` command finds every broker again, and what ``up --brokers`` refuses before
any broker starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from k2k.cli.local import local
from k2k.local import LocalCluster, free_port
from k2k.local.settings import Topology, broker_settings, write_config

VOTERS = {1: 9001, 2: 9002, 3: 9003}


def _settings(topology: Topology) -> dict[str, str]:
    return broker_settings(19092, topology, Path("/data/kraft"), {})


def test_a_three_broker_cluster_replicates_internal_topics_three_times_two_in_sync() -> None:
    settings = _settings(Topology(2, 3, VOTERS))
    assert settings["process.roles"] == "broker,controller"
    assert settings["node.id"] == "2"
    quorum = "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
    assert settings["controller.quorum.voters"] == quorum
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:9002"
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
        "default.replication.factor",
    ):
        assert settings[key] == "3", key
    for key in (
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.min.isr",
        "min.insync.replicas",
    ):
        assert settings[key] == "2", key
    # Kafka's default: the leaders of a broker that died move within 9 s.
    assert settings["broker.session.timeout.ms"] == "9000"
    assert settings["initial.broker.registration.timeout.ms"] == "39000"


def test_brokers_beyond_the_three_voters_are_brokers_only_and_know_the_quorum() -> None:
    settings = _settings(Topology(4, 5, VOTERS))
    assert settings["process.roles"] == "broker"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert settings["controller.quorum.voters"].count("@") == 3
    assert settings["controller.listener.names"] == "CONTROLLER"
    assert settings["default.replication.factor"] == "3"


@pytest.mark.parametrize(("brokers", "factor", "in_sync"), [(1, "1", "1"), (2, "2", "1")])
def test_small_clusters_keep_every_partition_writable_with_a_broker_away(
    brokers: int, factor: str, in_sync: str
) -> None:
    settings = _settings(Topology(1, brokers, {1: 9001}))
    assert settings["default.replication.factor"] == factor
    assert settings["min.insync.replicas"] == in_sync
    session = "60000" if brokers == 1 else "9000"  # one node: nobody to fail over to
    assert settings["broker.session.timeout.ms"] == session


def test_a_cluster_gets_distinct_ports_and_one_directory_per_broker(tmp_path: Path) -> None:
    cluster = LocalCluster("source", 0, tmp_path / "source", brokers=3)
    ports = [node.port for node in cluster.nodes]
    voters = cluster.nodes[0].topology.voters if cluster.nodes[0].topology else {}
    assert len(set(ports) | set(voters.values())) == 6
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{port}" for port in ports)
    assert [node.data_dir for node in cluster.nodes] == [
        tmp_path / "source" / f"broker-{i}" for i in (1, 2, 3)
    ]
    assert [node.name.label for node in cluster.nodes] == [f"source broker {i}" for i in (1, 2, 3)]
    given = LocalCluster("target", 30000, tmp_path / "target", brokers=3)
    assert [node.port for node in given.nodes] == [30000, 30001, 30002]


def _written(tmp_path: Path, brokers: int) -> list[tuple[int, int]]:
    """Write the server.properties a start of a ``brokers``-broker source cluster would;
    its brokers' (node id, port)."""
    written = []
    for node_id in range(1, brokers + 1):
        node_dir = tmp_path / "source" / f"broker-{node_id}"
        node_dir.mkdir(parents=True)
        port = free_port()
        write_config(node_dir, port, Topology(node_id, brokers, VOTERS), node_dir / "kraft", {})
        written.append((node_id, port))
    return written


def test_a_later_command_finds_every_broker_and_the_quorum(tmp_path: Path) -> None:
    written = _written(tmp_path, 3)
    found = LocalCluster.from_data_dir("source", tmp_path / "source")
    assert found is not None
    assert [(node.node_id, node.port) for node in found.nodes] == written
    assert [node.topology.voters if node.topology else None for node in found.nodes] == [VOTERS] * 3
    assert not found.is_running() and found.running_nodes() == []


def test_status_lists_every_broker(tmp_path: Path) -> None:
    written = _written(tmp_path, 3)
    result = CliRunner().invoke(local, ["status", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows == [
        ["CLUSTER", "BROKER", "STATE", "ADDRESS", "PID", "DATA", "DIR"],
        *(
            [
                "source",
                str(node_id),
                "stopped",
                f"127.0.0.1:{port}",
                "-",
                str(tmp_path / "source" / f"broker-{node_id}"),
            ]
            for node_id, port in written
        ),
        ["target", "-", "stopped", "-", "-", str(tmp_path / "target")],
    ]


def test_up_refuses_another_broker_count_for_a_cluster_that_has_data(tmp_path: Path) -> None:
    _written(tmp_path, 3)
    args = ["up", "--brokers", "1", "--source-port", str(free_port())]
    result = CliRunner().invoke(
        local, [*args, "--target-port", str(free_port()), "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: the source cluster in {tmp_path / 'source'} has 3 brokers, not the requested "
        "--brokers 1; run `k2k local up --brokers 3`, or `k2k local down --delete-data` to "
        "start both clusters empty with the new count"
    ]


def test_up_refuses_port_ranges_that_overlap(tmp_path: Path) -> None:
    args = ["up", "--brokers", "3", "--source-port", "40000", "--target-port", "40002"]
    result = CliRunner().invoke(local, [*args, "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: --source-port 40000 and --target-port 40002 are closer than --brokers 3: "
        "each cluster takes 3 ports from its own on; choose ports at least 3 apart"
    ]
    assert not (tmp_path / "source").exists()


class _Voter:
    """A node of a three-voter cluster that stops, as ``_QuorumGone`` sees it."""

    def __init__(self, root: Path, node_id: int, running: bool = True) -> None:
        self.data_dir = root / f"broker-{node_id}"
        self.topology = Topology(node_id, 3, VOTERS)
        self.running = running

    def is_running(self) -> bool:
        return self.running


def test_stragglers_stop_waiting_once_most_voters_are_gone(tmp_path: Path, monkeypatch) -> None:
    """A broker still waiting for its controlled shutdown when two of three controllers
    have exited can never be approved: the wait ends (after the grace)."""
    from k2k.local import cluster

    monkeypatch.setattr(cluster, "QUORUM_GONE_GRACE_S", 0.0)
    voters = [_Voter(tmp_path, i) for i in (1, 2, 3)]
    watch = cluster._QuorumGone(tmp_path, voters)  # type: ignore[arg-type]
    assert not watch.gone()
    voters[0].running = False
    assert not watch.gone()  # two of three still form a quorum
    voters[1].running = False
    assert watch.gone()


def test_a_voter_that_was_already_down_counts_as_gone(tmp_path: Path, monkeypatch) -> None:
    from k2k.local import cluster

    monkeypatch.setattr(cluster, "QUORUM_GONE_GRACE_S", 0.0)
    stopping = [_Voter(tmp_path, 2), _Voter(tmp_path, 3)]  # broker 1 was killed before
    watch = cluster._QuorumGone(tmp_path, stopping)  # type: ignore[arg-type]
    assert not watch.gone()
    stopping[0].running = False
    assert watch.gone()
