"""Rolling restarts and a SIGKILLed leader under a live load, on three-broker clusters with
replication factor 3 and ``min.insync.replicas`` 2 on both sides (issue 47, deliverable 5).

Two ``k2k start`` processes copy one source topic side by side, at-least-once to ``alo.<t>``
and exactly-once to ``eos.<t>``, while a producer writes keyed records with headers, plain and
in source transactions (one in three aborted). Both processes and both clusters serve every
drill of the module (a Spark start-up and six broker start-ups are most of its cost); each
drill ends with the load stopped and both pipelines past the last source record, and its
tests compare the whole topics, record for record and partition by partition.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from k2k.errors import K2KError
from k2k.local import ClusterPair, LocalCluster
from k2k.local.cluster import start_nodes
from tests.helpers.brokers import (
    BrokerTimes,
    kill_broker,
    leaders,
    rolling_restart,
    wait_in_sync,
    wait_leaders_moved,
)
from tests.helpers.compare import assert_at_least_once, assert_same_records
from tests.helpers.kafka import Clusters, Rec, create_topic, end_offsets, eventually, read_all
from tests.helpers.load import LiveLoad
from tests.helpers.pipelines import committed_progress, write_pipeline
from tests.helpers.procs import K2KProcess
from tests.helpers.sidebyside import PREFIXES, side_by_side_docs

pytestmark = pytest.mark.integration

PARTITIONS = 3
#: Records per second the live load writes over the three partitions: enough that every
#: restart and election lands mid-stream, few enough that reading the topics back to
#: compare them stays a small part of the module's time.
RATE = 150
#: Both sides: a broker may be away while every partition keeps two replicas in sync.
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@dataclass
class Pipeline:
    """One running ``k2k start`` of the drill and where it writes."""

    mode: str
    path: Path
    target_topic: str
    proc: K2KProcess

    @property
    def commit_topic(self) -> str:
        return f"__k2k_progress-{self.name}"

    @property
    def name(self) -> str:
        return self.path.stem

    def committed(self, target: str) -> dict[tuple[str, int], int]:
        try:
            return committed_progress(target, self.commit_topic, self.name)
        except K2KError:  # the commit topic is not there yet
            return {}


@dataclass
class Drill:
    """The clusters, the source topic, the two pipelines and what the load wrote so far."""

    pair: ClusterPair
    topic: str
    pipelines: list[Pipeline] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=dict)
    load: LiveLoad | None = None
    #: The source topic as read once the last load stopped (what the tests compare with).
    source: dict[int, list[Rec]] = field(default_factory=dict)
    #: Per pipeline, the cores its driver used while the killed leaders had no successor.
    outage_cores: dict[str, float] = field(default_factory=dict)

    @property
    def readable(self) -> int:
        """The records the loads wrote that a read_committed reader sees."""
        return self.written["plain"] + self.written["committed"]

    def start_load(self, seed: int) -> None:
        """Chunks of 50 records at :data:`RATE`, about one in three a source transaction
        (one in three of those aborted); a load that runs already (a drill run on its own
        gets the module's first load) goes on."""
        if self.load is None:
            self.load = LiveLoad(
                self.pair.source.bootstrap, self.topic, PARTITIONS, RATE, seed, chunk=50
            )

    def stop_load(self) -> None:
        """Stop the load and add what it wrote to :attr:`written`."""
        if self.load is not None:
            for kind, count in self.load.stop().items():
                self.written[kind] = self.written.get(kind, 0) + count
            self.load = None

    def copied(self) -> dict[str, int]:
        """Per pipeline, the sum of its target topic's read_committed end offsets: it grows
        as the pipeline commits (a cheap request, where reading the progress reads the
        whole commit topic)."""
        target = self.pair.target.bootstrap
        return {p.mode: sum(end_offsets(target, p.target_topic).values()) for p in self.pipelines}

    def wait_copying(self, timeout: float = 120) -> None:
        """Poll until both pipelines' target topics grew (they copy right now). An offset
        request a leader election answers with an error is asked again."""
        before = eventually(self.copied, timeout=timeout, ignore=(KafkaException,))
        eventually(
            lambda: all(n > before[mode] for mode, n in self.copied().items()),
            timeout=timeout,
            interval=0.2,
            ignore=(KafkaException,),
        )

    def wait_caught_up(self, timeout: float = 180) -> float:
        """With the load stopped: poll until both pipelines committed past the last source
        record of every partition; the seconds it took."""
        started = time.monotonic()
        self.source = read_all(self.pair.source.bootstrap, self.topic)
        past = {(self.topic, p): recs[-1].offset + 1 for p, recs in self.source.items() if recs}

        def behind() -> dict[str, dict]:
            target = self.pair.target.bootstrap
            return {p.mode: lag for p in self.pipelines if (lag := _lag(p.committed(target), past))}

        eventually(behind, expected={}, timeout=timeout, interval=0.5)
        return time.monotonic() - started


def _lag(committed: dict[tuple[str, int], int], past: dict[tuple[str, int], int]) -> dict:
    return {
        tp: (committed.get(tp, 0), end) for tp, end in past.items() if committed.get(tp, 0) < end
    }


@pytest.fixture(scope="module")
def drill(
    broker_clusters: ClusterPair, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Drill]:
    """The source topic under a live load, and both pipelines copying it."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"t-rolling-{suffix}"
    source, target = broker_clusters
    create_topic(source.bootstrap, topic, PARTITIONS, TOPIC_CONFIG)
    clusters = Clusters(source.bootstrap, target.bootstrap)
    docs = side_by_side_docs(
        clusters,
        topic,
        suffix,
        # Target topics with the source's replication factor and min.insync.replicas 2; one
        # Spark core each (two drivers and six brokers share this machine).
        topicCreation={"replicated": {"configs": TOPIC_CONFIG}},
        spark={"master": "local[1]"},
    )
    state = Drill(broker_clusters, topic)
    state.start_load(seed=47)
    tmp = tmp_path_factory.mktemp("rolling")
    started = time.monotonic()
    try:
        for mode, doc in docs.items():
            path = write_pipeline(tmp, doc, f"{doc['name']}.yaml")
            proc = K2KProcess(path, tmp / f"{mode}.log")
            state.pipelines.append(Pipeline(mode, path, f"{PREFIXES[mode]}{topic}", proc))
        state.wait_copying(timeout=180)
        print(f"\nboth pipelines copying {time.monotonic() - started:.0f} s after their start")
        yield state
    finally:
        try:
            state.stop_load()
        finally:
            for pipeline in state.pipelines:
                _stop(pipeline.proc)


def _stop(proc: K2KProcess) -> None:
    """SIGKILL, not a clean stop: the drills are over, the tests asserted what they left,
    and a clean stop would cost seconds of the module's budget for nothing it checks."""
    if proc.proc.poll() is None:
        proc.kill()


def _assert_running(pipeline: Pipeline) -> None:
    """The pipeline rode the drill out: still running, no error line, no traceback."""
    out = pipeline.proc.output()
    assert pipeline.proc.proc.poll() is None, f"{pipeline.mode} exited:\n{out[-4000:]}"
    errors = [line for line in out.splitlines() if line.startswith("error:") or "Traceback" in line]
    assert not errors, f"{pipeline.mode}:\n{out[-4000:]}"


def _replication(cluster: LocalCluster, topic: str) -> tuple[set[int], str]:
    """The replica counts of ``topic``'s partitions and its ``min.insync.replicas``."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return {len(p.replicas) for p in partitions.values()}, configs["min.insync.replicas"].value


def _assert_at_least_once(drill: Drill, pipeline: Pipeline) -> int:
    """Every source record on the target in order (duplicates only as replays), and the
    source holds what the load committed; the number of duplicates."""
    duplicates = assert_at_least_once(
        drill.source, read_all(drill.pair.target.bootstrap, pipeline.target_topic)
    )
    assert sum(len(records) for records in drill.source.values()) == drill.readable
    return duplicates


def _assert_exactly_once(drill: Drill, pipeline: Pipeline) -> int:
    """The read_committed target equals the read_committed source record for record, and
    holds what the load committed, no aborted record; the number compared."""
    dst = read_all(drill.pair.target.bootstrap, pipeline.target_topic)
    compared = assert_same_records(drill.source, dst)
    assert compared == drill.readable
    return compared


def _pipeline(drill: Drill, mode: str) -> Pipeline:
    return next(p for p in drill.pipelines if p.mode == mode)


# -- rolling restart -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def rolled(drill: Drill) -> dict[str, list[BrokerTimes]]:
    """Every target broker, then every source broker, restarted in turn under the load,
    each back in every ISR before the next; then the load stops and both pipelines catch up."""
    started = time.monotonic()
    times = {"target": rolling_restart(drill.pair.target)}
    drill.wait_copying()
    times["source"] = rolling_restart(drill.pair.source)
    drill.wait_copying()
    drill.stop_load()
    caught_up = drill.wait_caught_up()
    print(
        f"\nrolling restart: {time.monotonic() - started:.0f} s "
        f"(caught up {caught_up:.1f} s after the load stopped); "
        + "; ".join(f"{side} {', '.join(map(str, t))}" for side, t in times.items())
    )
    return times


def test_topics_have_three_replicas_two_in_sync_on_both_sides(drill: Drill) -> None:
    source, target = drill.pair
    assert _replication(source, drill.topic) == ({3}, "2")
    for pipeline in drill.pipelines:
        assert _replication(target, pipeline.target_topic) == ({3}, "2"), pipeline.mode


def test_rolling_restart_at_least_once_loses_nothing(drill: Drill, rolled) -> None:
    pipeline = _pipeline(drill, "at-least-once")
    _assert_running(pipeline)
    duplicates = _assert_at_least_once(drill, pipeline)
    print(f"\nat-least-once after the rolling restarts: {duplicates} duplicates")


def test_rolling_restart_exactly_once_holds_each_record_once(drill: Drill, rolled) -> None:
    pipeline = _pipeline(drill, "exactly-once")
    _assert_running(pipeline)
    _assert_exactly_once(drill, pipeline)


# -- a leader SIGKILLed ----------------------------------------------------------------------
def _busiest_leader(cluster: LocalCluster, topics: list[str]) -> tuple[int, int]:
    """The broker leading the most partitions of ``topics``, and how many it leads."""
    led: dict[int, int] = {}
    for topic in topics:
        for leader in leaders(cluster, topic).values():
            led[leader] = led.get(leader, 0) + 1
    return max(led.items(), key=lambda item: item[1])


def _kill_leaders_and_restart(drill: Drill) -> str:
    """SIGKILL at once the target broker leading the most partitions of the target topics
    and the source broker leading the most of the source topic; once their partitions have
    new leaders and both pipelines copy again, start them and wait until they are back in
    every ISR. One line of what it took."""
    source, target = drill.pair
    victims = {
        target: [p.target_topic for p in drill.pipelines],
        source: [drill.topic],
    }
    chosen = {cluster: _busiest_leader(cluster, topics) for cluster, topics in victims.items()}
    for cluster, (node_id, led) in chosen.items():
        assert node_id > 0 and led >= 1, (cluster.name, node_id, led)
    cpu_before = {p.mode: p.proc.driver_cpu_s() for p in drill.pipelines}
    killed = time.monotonic()
    for cluster, (node_id, _) in chosen.items():
        kill_broker(cluster, node_id)
    moved = {
        cluster.name: wait_leaders_moved(cluster, node_id, victims[cluster])
        for cluster, (node_id, _) in chosen.items()
    }
    outage_s = time.monotonic() - killed
    drill.outage_cores = {
        p.mode: (p.proc.driver_cpu_s() - cpu_before[p.mode]) / outage_s for p in drill.pipelines
    }
    drill.wait_copying()
    copying = time.monotonic() - killed
    start_nodes([cluster.node(node_id) for cluster, (node_id, _) in chosen.items()], 120)
    started = time.monotonic() - killed
    in_sync = [wait_in_sync(cluster, node_id) for cluster, (node_id, _) in chosen.items()]
    return (
        ", ".join(
            f"{cluster.name} broker {node_id} (leading {led} partitions)"
            for cluster, (node_id, led) in chosen.items()
        )
        + f" killed; leaders moved after {moved['target']:.1f} s (target), "
        f"{moved['source']:.1f} s (source), drivers using "
        + ", ".join(f"{cores:.2f} cores ({mode})" for mode, cores in drill.outage_cores.items())
        + f" meanwhile; copying again after {copying:.1f} s; brokers "
        f"started after {started:.1f} s, back in every ISR {max(in_sync):.1f} s later"
    )


@pytest.fixture(scope="module")
def killed(drill: Drill) -> str:
    """Under a new load, the busiest leaders of both sides SIGKILLed together and
    restarted; the load stops, both pipelines catch up."""
    drill.start_load(seed=48)
    drill.wait_copying()
    started = time.monotonic()
    report = _kill_leaders_and_restart(drill)
    drill.stop_load()
    caught_up = drill.wait_caught_up()
    print(
        f"\nkilled leaders: {time.monotonic() - started:.0f} s; {report}; caught up "
        f"{caught_up:.1f} s after the load stopped"
    )
    return report


def test_sigkilled_leader_at_least_once_loses_nothing(drill: Drill, killed) -> None:
    pipeline = _pipeline(drill, "at-least-once")
    _assert_running(pipeline)
    duplicates = _assert_at_least_once(drill, pipeline)
    print(f"\nat-least-once after the killed leaders: {duplicates} duplicates")


def test_sigkilled_leader_exactly_once_holds_each_record_once(drill: Drill, killed) -> None:
    pipeline = _pipeline(drill, "exactly-once")
    _assert_running(pipeline)
    _assert_exactly_once(drill, pipeline)


#: What a driver may use while partitions it asks about have a dead leader: it idles
#: between ticks; a client reconnecting in a busy loop takes more than a core.
OUTAGE_CORES = 0.5


def test_drivers_do_not_busy_loop_while_a_leader_is_dead(drill: Drill, killed) -> None:
    """Until the dead brokers' partitions have new leaders, neither driver spins on them:
    on a small machine a spinning client starves the controllers that fence the dead
    broker, which lengthens the very outage it waits out."""
    assert drill.outage_cores.keys() == {p.mode for p in drill.pipelines}
    busy = {mode: round(c, 2) for mode, c in drill.outage_cores.items() if c >= OUTAGE_CORES}
    assert not busy, f"drivers using {busy} cores while a leader was dead"


def test_drills_are_not_taken_for_foreign_writes(drill: Drill, rolled, killed) -> None:
    """Only the pipelines write their target topics: no foreign-write warning in either
    mode, after both drills (a commit marker written again by a moved transaction
    coordinator is told apart by reading the range)."""
    for pipeline in drill.pipelines:
        assert "foreign writes on the target" not in pipeline.proc.output(), pipeline.mode
