"""The embedded Kafka clusters (k2k.local), the ``k2k local`` commands and the test helpers.

Everything here runs against real brokers: the session pair from the ``clusters`` fixture, plus
pairs that the CLI tests start and stop themselves. What needs no broker (installation errors,
port checks, refused storage) is in ``tests/unit/local``.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from k2k.cli.local import local
from k2k.errors import LocalClusterError
from k2k.local import LocalCluster, free_port
from tests.helpers.kafka import (
    Rec,
    create_topic,
    end_offsets,
    eventually,
    list_topics,
    produce,
    produce_bulk,
    produce_transaction,
    read_all,
)
from tests.helpers.local import local_up_args

# CreateTime stamps an hour ago (a fixed old date would fall to the 7-day retention).
BASE_TS = int(time.time() * 1000) - 3_600_000
MIB = 1024 * 1024


def _cluster_id(bootstrap: str) -> str:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert metadata.brokers, f"no broker in the metadata of {bootstrap}"
    return str(metadata.cluster_id)


# -- real brokers ----------------------------------------------------------------------------
def test_pair_is_two_separate_running_clusters(clusters) -> None:
    source_id, target_id = _cluster_id(clusters.source), _cluster_id(clusters.target)
    assert source_id != target_id


@pytest.mark.parametrize("side", ["source", "target"])
def test_records_round_trip_with_keys_values_headers_timestamps(
    clusters, topic_name, side: str
) -> None:
    bootstrap = getattr(clusters, side)
    topic = topic_name(side)
    create_topic(bootstrap, topic, 3)
    sent = [
        (0, b"k0", b"v0", [("h", b"1"), ("h", b"2"), ("empty", b"")], BASE_TS),
        (0, None, b"no key", None, BASE_TS + 1),
        (0, b"tombstone", None, [], BASE_TS + 2),
        (1, b"", b"", [("null-value", None)], BASE_TS + 3),
        (1, b"\x00\xff", b"text value", [("utf8", "é".encode())], BASE_TS + 4),
        (2, b"k5", b"v5", None, BASE_TS + 5),
    ]
    delivered = produce(bootstrap, topic, sent)
    assert delivered == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]

    got = read_all(bootstrap, topic)
    expected: dict[int, list[Rec]] = {0: [], 1: [], 2: []}
    for partition, key, value, headers, ts in sent:
        offset = len(expected[partition])
        expected[partition].append(Rec.make(key, value, headers, ts, offset))
    assert got == expected
    assert end_offsets(bootstrap, topic) == {0: 3, 1: 2, 2: 1}
    assert topic in list_topics(bootstrap)


def test_one_megabyte_record_round_trips(clusters, topic_name) -> None:
    topic = topic_name("big")
    create_topic(clusters.source, topic, 1)
    value = bytes(range(256)) * (4 * 1024)  # exactly 1 MiB, not compressible to nothing
    assert len(value) == MIB
    # librdkafka's own limit (message.max.bytes, 1 000 000 by default) must be raised too.
    produce(
        clusters.source,
        topic,
        [(0, b"big", value, [("size", b"1MiB")], BASE_TS)],
        **{"message.max.bytes": 2 * MIB},
    )
    assert read_all(clusters.source, topic) == {
        0: [Rec.make(b"big", value, [("size", b"1MiB")], BASE_TS, 0)]
    }


def test_read_committed_ends_at_the_first_open_transaction(clusters, topic_name) -> None:
    """Transactions work on the embedded broker, and the helpers honour the LSO.

    Layout of partition 0: committed 0-2, marker 3; aborted 4-5, marker 6; open 7.
    """
    topic = topic_name("txn")
    create_topic(clusters.source, topic, 1)

    def batch(tag: bytes, n: int) -> list:
        return [(0, tag, b"%s-%d" % (tag, i), None, BASE_TS + i) for i in range(n)]

    produce_transaction(clusters.source, topic, batch(b"committed", 3), outcome="commit")
    produce_transaction(clusters.source, topic, batch(b"aborted", 2), outcome="abort")
    still_open = produce_transaction(clusters.source, topic, batch(b"open", 1), outcome="open")

    assert end_offsets(clusters.source, topic, "read_committed") == {0: 7}
    assert end_offsets(clusters.source, topic, "read_uncommitted") == {0: 8}
    committed = read_all(clusters.source, topic, "read_committed")
    assert [(r.value, r.offset) for r in committed[0]] == [
        (b"committed-0", 0),
        (b"committed-1", 1),
        (b"committed-2", 2),
    ]
    uncommitted = read_all(clusters.source, topic, "read_uncommitted")
    assert [r.offset for r in uncommitted[0]] == [0, 1, 2, 4, 5, 7]  # markers are never records

    still_open.abort_transaction(30)
    assert end_offsets(clusters.source, topic, "read_committed") == {0: 9}
    assert read_all(clusters.source, topic, "read_committed") == committed


def test_bulk_records_read_back_complete_and_in_order(clusters, topic_name) -> None:
    topic = topic_name("bulk")
    create_topic(clusters.source, topic, 4)
    counts = produce_bulk(clusters.source, topic, 20_000, partitions=4, value_size=100)
    assert counts == {p: 5_000 for p in range(4)}

    got = read_all(clusters.source, topic)
    for partition, records in got.items():
        indexes = [int(r.key) for r in records]
        assert indexes == list(range(partition, 20_000, 4))
        assert [r.offset for r in records] == list(range(5_000))
        assert all(r.value[:10] == r.key and len(r.value) == 100 for r in records)


def test_missing_topic_reads_as_empty(clusters, topic_name) -> None:
    topic = topic_name("absent")
    assert end_offsets(clusters.source, topic) == {}
    assert read_all(clusters.source, topic) == {}
    assert topic not in list_topics(clusters.source)


@pytest.mark.integration
def test_broker_stops_when_its_owner_process_dies(tmp_path: Path) -> None:
    """The test fixture's guarantee: a killed test session does not leave brokers behind."""
    owner = subprocess.Popen(["sleep", "600"])
    cluster = LocalCluster("source", free_port(), tmp_path / "source", owner_pid=owner.pid)
    try:
        cluster.start()
        broker_pid = cluster.pid
        assert broker_pid is not None and _cluster_id(cluster.bootstrap)
        owner.kill()
        owner.wait()
        eventually(cluster.is_running, expected=False, timeout=30)
        with pytest.raises(ProcessLookupError):
            os.kill(broker_pid, 0)
    finally:
        owner.kill()
        cluster.stop()


@pytest.mark.integration
def test_failed_start_quotes_the_broker_log_and_leaves_nothing_running(tmp_path: Path) -> None:
    """A broker that dies at start-up is reported with the tail of its log.

    The storage claims another node id than the configuration, which Kafka refuses.
    """
    cluster = LocalCluster("source", free_port(), tmp_path / "source")
    cluster.log_dirs.mkdir(parents=True)
    (cluster.log_dirs / "meta.properties").write_text(
        "version=1\ncluster.id=3Db5QLSqSZieL3rJBUUegA\nnode.id=7\n"
        "directory.id=bQ7ePKfIRr2p8CEhYAsbYw\n"
    )
    with pytest.raises(LocalClusterError) as failure:
        cluster.start(timeout=60)
    message = str(failure.value)
    assert message.startswith(
        f"the source cluster on {cluster.bootstrap} did not start: "
        "the broker process exited with code 1 during start-up. "
        f"Last lines of {cluster.log_file}:\n"
    )
    assert "Stored node id 7 doesn't match previous node id 1" in message  # Kafka's own words
    assert not cluster.is_running()


def test_cli_up_twice_status_and_down_stop_exactly_those_brokers(clusters, tmp_path: Path) -> None:
    runner = CliRunner()
    data = tmp_path / "local"
    source_port, target_port = free_port(), free_port()
    up = ["up", "--source-port", str(source_port), "--target-port", str(target_port)]
    up += ["--data-dir", str(data)]
    try:
        first = runner.invoke(local, up)
        assert first.exit_code == 0, first.output
        pids = {
            name: LocalCluster.from_data_dir(name, data / name).pid for name in ("source", "target")
        }
        assert first.stdout.splitlines() == [
            f"source  127.0.0.1:{source_port}  started (pid {pids['source']})",
            f"target  127.0.0.1:{target_port}  started (pid {pids['target']})",
        ]
        new_ids = {_cluster_id(f"127.0.0.1:{port}") for port in (source_port, target_port)}
        assert len(new_ids) == 2
        assert not new_ids & {_cluster_id(clusters.source), _cluster_id(clusters.target)}

        second = runner.invoke(local, up)
        assert second.exit_code == 0, second.output
        assert second.stdout.splitlines() == [
            f"source  127.0.0.1:{source_port}  already running (pid {pids['source']})",
            f"target  127.0.0.1:{target_port}  already running (pid {pids['target']})",
        ]

        status = runner.invoke(local, ["status", "--data-dir", str(data)])
        assert status.exit_code == 0, status.output
        rows = [line.split() for line in status.stdout.splitlines()]
        assert rows == [
            ["CLUSTER", "BROKER", "STATE", "ADDRESS", "PID", "DATA", "DIR"],
            [
                "source",
                "1",
                "running",
                f"127.0.0.1:{source_port}",
                str(pids["source"]),
                str(data / "source"),
            ],
            [
                "target",
                "1",
                "running",
                f"127.0.0.1:{target_port}",
                str(pids["target"]),
                str(data / "target"),
            ],
        ]

        down = runner.invoke(local, ["down", "--data-dir", str(data)])
        assert down.exit_code == 0, down.output
        assert down.stdout.splitlines() == [
            f"source: stopped (pid {pids['source']})",
            f"target: stopped (pid {pids['target']})",
        ]
        for pid in pids.values():
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        # The session's own pair was not touched.
        assert _cluster_id(clusters.source) and _cluster_id(clusters.target)

        after = runner.invoke(local, ["status", "--data-dir", str(data)])
        assert [line.split()[:3] for line in after.stdout.splitlines()[1:]] == [
            ["source", "1", "stopped"],
            ["target", "1", "stopped"],
        ]
    finally:
        runner.invoke(local, ["down", "--data-dir", str(data)])  # never leak brokers on failure


# -- after an unclean stop ---------------------------------------------------------------------
def test_cli_up_after_kill_9_recovers_the_broker_with_its_data(tmp_path: Path) -> None:
    """The outage drill: kill -9 the target broker, `up` again at once.

    The restarted controller still holds the killed broker's registration (for
    broker.session.timeout.ms, 60 s) and refused the new one until then; the broker used to give
    up first ("fatal error while waiting for the controller to acknowledge that we are caught
    up"). `up` now removes the stale registration and the broker is back within seconds.
    """
    runner = CliRunner()
    data = tmp_path / "local"
    ports = free_port(), free_port()
    try:
        first = runner.invoke(local, local_up_args(data, *ports))
        assert first.exit_code == 0, first.output
        target = LocalCluster.from_data_dir("target", data / "target")
        source = LocalCluster.from_data_dir("source", data / "source")
        assert target is not None and source is not None
        killed, source_pid = target.pid, source.pid
        assert killed is not None and source_pid is not None
        topic = "drill"
        create_topic(target.bootstrap, topic, 2)
        sent = [(i % 2, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)], BASE_TS + i) for i in range(50)]
        produce(target.bootstrap, topic, sent)
        before = read_all(target.bootstrap, topic)
        assert sum(len(records) for records in before.values()) == 50

        assert (target.log_dirs / ".lock").exists()  # will be left behind by the killed JVM
        # The slow path, should the unregister fail: the broker outlasts the 60 s session.
        assert "initial.broker.registration.timeout.ms=90000" in (
            target.server_properties.read_text().splitlines()
        )
        os.kill(killed, 9)
        started = time.monotonic()  # at once, as in the drill: the JVM may still be exiting
        again = runner.invoke(local, local_up_args(data, *ports))
        took = time.monotonic() - started

        assert again.exit_code == 0, again.output
        new_pid = target.pid
        assert new_pid is not None and new_pid != killed
        assert again.stdout.splitlines() == [
            f"source  127.0.0.1:{ports[0]}  already running (pid {source_pid})",
            f"target  127.0.0.1:{ports[1]}  started (pid {new_pid})",
        ]
        assert again.stderr.splitlines() == [
            f"target: the previous broker (pid {killed}) did not stop cleanly; "
            "starting a new one on the same data",
            "target: the controller still held the registration of the broker that did not "
            "stop cleanly; removed it",
        ]
        assert took < 45, f"recovery took {took:.0f} s: the stale registration was not removed"
        after = read_all(target.bootstrap, topic)
        assert after == before
        assert [(r.key, r.value) for p in (0, 1) for r in after[p]] == [
            (key, value) for p in (0, 1) for part, key, value, _, _ in sent if part == p
        ]
        create_topic(target.bootstrap, "after-drill", 1)  # the controller accepts changes
    finally:
        runner.invoke(local, ["down", "--data-dir", str(data)])


def test_cli_up_replaces_a_stale_pid_file_and_finds_a_broker_without_one(
    tmp_path: Path,
) -> None:
    """A pid file naming another live program (a reused pid) is not our broker: `up` starts
    the broker and leaves that program alone. A broker whose pid file was deleted is found
    again by its command line, so `status` and `down` still see it."""
    runner = CliRunner()
    data = tmp_path / "local"
    ports = free_port(), free_port()
    stranger = subprocess.Popen(["sleep", "600"])
    try:
        (data / "source").mkdir(parents=True)
        (data / "source" / "broker.pid").write_text(f"{stranger.pid}\n")
        result = runner.invoke(local, local_up_args(data, *ports))
        assert result.exit_code == 0, result.output
        assert (
            f"source: the previous broker (pid {stranger.pid}) did not stop cleanly; "
            "starting a new one on the same data"
        ) in result.stderr.splitlines()
        assert stranger.poll() is None  # not signalled
        source = LocalCluster.from_data_dir("source", data / "source")
        assert source is not None and source.pid not in (None, stranger.pid)
        pid = source.pid

        source.pid_file.unlink()
        status = runner.invoke(local, ["status", "--data-dir", str(data)])
        assert status.exit_code == 0, status.output
        assert status.stderr.splitlines() == [
            f"source: running as pid {pid} without a pid file; recorded it"
        ]
        assert status.stdout.splitlines()[1].split()[:5] == [
            "source",
            "1",
            "running",
            f"127.0.0.1:{ports[0]}",
            str(pid),
        ]
        down = runner.invoke(local, ["down", "--data-dir", str(data)])
        assert down.exit_code == 0, down.output
        assert f"source: stopped (pid {pid})" in down.stdout.splitlines()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        stranger.kill()
        stranger.wait()
        runner.invoke(local, ["down", "--data-dir", str(data)])


@pytest.mark.integration
def test_interrupted_format_is_formatted_again(tmp_path: Path) -> None:
    """Storage a format left half-written (no meta.properties, no data) is safe to redo."""
    cluster = LocalCluster("source", free_port(), tmp_path / "source")
    cluster.log_dirs.mkdir(parents=True)
    (cluster.log_dirs / "bootstrap.checkpoint").write_bytes(b"\0" * 10)  # cut short
    announced: list[str] = []
    try:
        cluster.start(timeout=60, announce=announced.append)
        assert announced == [
            f"source: meta.properties in {cluster.log_dirs} is missing and the storage holds "
            "no data (an interrupted format); formatting it again"
        ]
        assert _cluster_id(cluster.bootstrap)
    finally:
        cluster.stop()
