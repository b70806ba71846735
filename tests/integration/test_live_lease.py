"""A continuous lease takes a new topic and a new member without pausing the partitions
that keep their owner (docs/architecture.md#leases-that-do-not-stop)."""

from __future__ import annotations

import itertools
import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import K2K, latest_progress, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

#: Records per second per source partition of the steady load.
RATE = 50
#: The longest a partition that keeps its owner may go without a new record on the target
#: while the topic and the member are added: well under a lease restart's pause, with room
#: for a slow host (docs/architecture.md#leases-that-do-not-stop).
MAX_GAP_S = 2.5


class _Load:
    """Writes one record per partition every 1/RATE s, values numbered per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
        )
        self.topic, self.partitions = topic, partitions
        self.stop = threading.Event()
        self.sent = [0] * partitions
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1 / RATE):
            for p in range(self.partitions):
                self.producer.produce(
                    self.topic, str(self.sent[p]).encode(), b"k%d" % p, partition=p
                )
                self.sent[p] += 1
            self.producer.poll(0)
        self.producer.flush(30)


class _Arrivals:
    """Reads the target topic as records arrive and notes when each one did."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, committed: bool) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.times: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for m in self.consumer.consume(1000, 0.05):
                if m.error() is None:
                    self.times[m.partition() or 0].append(time.monotonic())
        self.consumer.close()

    def longest_gap(self, partition: int, since: float, until: float) -> float:
        seen = [t for t in self.times[partition] if since <= t <= until]
        return max((b - a for a, b in itertools.pairwise(seen)), default=until - since)


def _start(path, instance: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*K2K, "start", "-f", str(path), "--instance", instance],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == 0, err
    return err


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_a_new_topic_and_member_leave_the_other_partitions_copying(
    clusters, tmp_path, topic_name, mode
):
    stem = topic_name("live")
    busy, later = f"{stem}-a", f"{stem}-b"  # sorted: the share deals busy's partitions first
    create_topic(clusters.source, busy, 4)
    name = topic_name("plive")
    doc = pipeline_dict(clusters, name, f"{stem}-.*")
    doc["replication"][0]["source"]["discoveryInterval"] = "1 second"
    if mode == "exactly-once":
        doc["features"]["exactlyOnce"] = "enabled"
    path = write_pipeline(tmp_path, doc)
    load = _Load(clusters.source, busy, 4)
    load.thread.start()
    first = _start(path, "m1")
    second: subprocess.Popen[str] | None = None
    arrivals = _Arrivals(clusters.target, busy, 4, mode == "exactly-once")
    try:
        eventually(lambda: _partitions_with_records(clusters, busy), 4, timeout=120, interval=1)
        arrivals.thread.start()
        eventually(lambda: all(len(t) > RATE for t in arrivals.times.values()), timeout=60)
        since = time.monotonic()
        create_topic(clusters.source, later, 2)
        produce(clusters.source, later, [(1, b"k", b"x", [], 0)])
        eventually(lambda: _partitions_with_records(clusters, later), 1, timeout=60, interval=1)
        second = _start(path, "m2")
        # m2's share, dealt over (busy 0-3, later 0-1): busy[1], busy[3], later[1].
        eventually(lambda: _committed_by(second, clusters, doc, busy, 1), "m2", timeout=180)
        moved = len(arrivals.times[1])
        eventually(lambda: len(arrivals.times[1]) > moved + 2 * RATE, timeout=60)
        until = time.monotonic()
        load.stop.set()
        load.thread.join(30)
        gaps = {p: round(arrivals.longest_gap(p, since, until), 3) for p in range(4)}
        print(f"longest gaps on the target ({mode}): {gaps}")
        # busy[0] and busy[2] stay with m1 throughout: no pause longer than the bound.
        assert gaps[0] <= MAX_GAP_S and gaps[2] <= MAX_GAP_S, gaps
        _assert_copied_once_in_order(clusters, busy, load.sent)
        _stop(second)
        err_first = _stop(first)
    finally:
        load.stop.set()
        arrivals.stop.set()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    (tmp_path / "m1.log").write_text(err_first)
    assert "handed over 3 partitions without ending the lease" in err_first, err_first
    assert "took on 2 partitions without ending the lease" in err_first, err_first


def _partitions_with_records(clusters, topic: str) -> int:
    return sum(1 for recs in read_all(clusters.target, topic, timeout=10).values() if recs)


def _committed_by(
    proc: subprocess.Popen[str], clusters, doc: dict, topic: str, partition: int
) -> str | None:
    """The member whose progress record of ``topic[partition]`` is the newest."""
    assert proc.poll() is None, proc.communicate()[1]
    record = latest_progress(clusters.target, doc).get((topic, partition))
    return record.owner if record is not None else None


def _assert_copied_once_in_order(clusters, topic: str, sent: list[int]) -> None:
    """The target holds the source's records once each, in the source's order."""
    source = {p: [r.content() for r in rs] for p, rs in read_all(clusters.source, topic).items()}
    assert [len(v) for v in source.values()] == sent

    def target() -> dict[int, list[object]]:
        return {p: [r.content() for r in rs] for p, rs in read_all(clusters.target, topic).items()}

    eventually(target, expected=source, timeout=60)
