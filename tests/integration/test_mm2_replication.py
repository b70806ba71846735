"""MirrorMaker 2 concepts on real brokers: two alias-named pipelines A -> B and B -> A
running active-active without loops, and MM2 heartbeats emitted and replicated one hop."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from k2k.formats.heartbeat import Heartbeat
from tests.helpers.kafka import Rec, create_topic, eventually, list_topics, produce, read_all
from tests.helpers.mm2java import compile_program, run_program
from tests.helpers.pipelines import (
    pipeline_dict,
    run_until_caught_up,
    wait_progress_past,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration


class _Pair:
    """The two bootstrap addresses pipeline_dict reads (``.source`` / ``.target``)."""

    def __init__(self, source: str, target: str) -> None:
        self.source, self.target = source, target


def _direction(name: str, topic: str, clusters: tuple[str, str], aliases: tuple[str, str]) -> dict:
    doc = pipeline_dict(
        _Pair(*clusters),
        name,
        [topic],
        features={"exactlyOnce": "enabled", "heartbeats": "enabled"},
        source={"alias": aliases[0]},
        target={"alias": aliases[1]},
        heartbeats={"interval": "200 milliseconds"},
        coordination={"assignment": {"topic": f"__k2k_assignment-{name}"}},
    )
    doc["replication"] = [
        {"source": {"topic": [topic], "discoveryInterval": "1 second"}},
        {"sink": {"topic": {"policy": "alias"}, "partition": "source"}},
    ]
    return doc


_TOPOLOGY_JAVA = """
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/** What MM2's client sees on a cluster: its upstream clusters, the hops to one of them, and
 *  the records of a heartbeats topic decoded by MM2's own Heartbeat class. */
public class Topology {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        for (String upstream : RemoteClusterUtils.upstreamClusters(props)) {
            System.out.println("upstream " + upstream);
        }
        System.out.println("hops " + RemoteClusterUtils.replicationHops(props, args[1]));
        Map<String, Object> conf = new HashMap<>(props);
        conf.put("key.deserializer", ByteArrayDeserializer.class.getName());
        conf.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(conf)) {
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(args[2]).forEach(p -> tps.add(new TopicPartition(p.topic(), p.partition())));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    Heartbeat hb = Heartbeat.deserializeRecord(r);
                    System.out.println("heartbeat " + hb.sourceClusterAlias() + " "
                        + hb.targetClusterAlias() + " " + hb.timestamp());
                }
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def mm2_topology(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """MM2's view of a cluster (append: bootstrap, upstream alias, heartbeats topic)."""
    return compile_program(tmp_path_factory.mktemp("mm2-topology"), "Topology", _TOPOLOGY_JAVA)


def _values(bootstrap: str, topic: str) -> Counter:
    return Counter(r.value for recs in read_all(bootstrap, topic).values() for r in recs)


def _heartbeats(bootstrap: str, topic: str) -> list[tuple[Heartbeat, Rec]]:
    return [
        (Heartbeat.decode(r.key, r.value, topic, p, r.offset), r)
        for p, recs in read_all(bootstrap, topic).items()
        for r in recs
    ]


def test_alias_named_pipelines_run_active_active_with_heartbeats(
    clusters, tmp_path, topic_name, mm2_topology
):
    """Scenario: topic t exists on A (the source cluster) and B (the target cluster);
    pipelines A -> B and B -> A (``topic: {policy: alias}``, exactly-once, heartbeats every
    200 ms) run as two ``k2k start`` processes while producers write 3 rounds to each side.

    A's records arrive on B in ``<A>.t`` and B's on A in ``<B>.t``, each exactly once and in
    partition order; ``t`` on each side holds its own producer's records only; no ``<A>.<B>.t``
    or ``<B>.<A>.t`` ever appears (cycle detection), and nothing more is written once both
    pipelines' progress covers the sources' ends. Each target's ``heartbeats`` holds MM2
    heartbeats of its flow, and each side's heartbeats reach the other one hop further, as
    ``<A>.heartbeats`` on B and ``<B>.heartbeats`` on A."""
    a, b = clusters.source, clusters.target
    run = uuid.uuid4().hex[:6]
    alias = {"A": f"a-{run}", "B": f"b-{run}"}  # aliases of this run: heartbeats are shared
    t = topic_name("mm2")
    for side in (a, b):
        create_topic(side, t, 3)
    ab, ba = topic_name("ab"), topic_name("ba")
    started_ms = int(time.time() * 1000)
    procs = [
        K2KProcess(
            write_pipeline(
                tmp_path, _direction(ab, t, (a, b), (alias["A"], alias["B"])), "ab.yaml"
            ),
            tmp_path / "ab.log",
        ),
        K2KProcess(
            write_pipeline(
                tmp_path, _direction(ba, t, (b, a), (alias["B"], alias["A"])), "ba.yaml"
            ),
            tmp_path / "ba.log",
        ),
    ]
    rounds, per_round = 3, 150
    remote = {a: f"{alias['B']}.{t}", b: f"{alias['A']}.{t}"}  # on each side, the other's copy
    try:
        for r in range(rounds):  # live producers on both sides while both pipelines run
            for side, label in ((a, "A"), (b, "B")):
                produce(
                    side,
                    t,
                    [(i % 3, f"k{i}", f"{label}-{r}-{i}", [], None) for i in range(per_round)],
                )
        for side in (a, b):
            eventually(
                lambda side=side: sum(_values(side, remote[side]).values()),
                expected=rounds * per_round,
                timeout=180,
            )
        # Heartbeats replicated one hop: A's heartbeats topic (written by B -> A) on B.
        for side, there, here in ((b, "A", "B"), (a, "B", "A")):
            eventually(
                lambda side=side, there=there, here=here: any(
                    (hb.source_alias, hb.target_alias) == (alias[here], alias[there])
                    for hb, _ in _heartbeats(side, f"{alias[there]}.heartbeats")
                ),
                expected=True,
                timeout=120,
            )
        # Quiet: both pipelines' progress is past every record of their source's t, so a
        # copy going back would be visible by now.
        for side, target, name in ((a, b, ab), (b, a, ba)):
            wait_progress_past(side, target, t, name)
        sizes = {side: (_values(side, t), _values(side, remote[side])) for side in (a, b)}
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0], [p.output()[-3000:] for p in procs]

    def originals(label: str) -> Counter:
        return Counter(f"{label}-{r}-{i}".encode() for r in range(rounds) for i in range(per_round))

    for side, here, there in ((a, "A", "B"), (b, "B", "A")):
        assert _values(side, t) == originals(here)  # nothing came back into t
        assert _values(side, remote[side]) == originals(there)  # each record exactly once
        assert sizes[side] == (_values(side, t), _values(side, remote[side]))  # no growth
        # Cycle detection: no name went through both clusters (e.g. <A>.<B>.t on A).
        assert {n for n in list_topics(side) if alias["A"] in n and alias["B"] in n} == set()
        assert f"{alias[there]}.heartbeats" in list_topics(side)
        for p, recs in read_all(side, remote[side]).items():  # partition order kept
            assert [r.value for r in recs] == [
                f"{there}-{rnd}-{i}".encode()
                for rnd in range(rounds)
                for i in range(per_round)
                if i % 3 == p
            ]

    # Heartbeats on each target: MM2's format, this flow's aliases, record time = value time,
    # emitted while the pipeline ran and more than once (every 200 ms).
    for side, source, target in ((b, "A", "B"), (a, "B", "A")):
        beats = [
            (hb, rec)
            for hb, rec in _heartbeats(side, "heartbeats")
            if (hb.source_alias, hb.target_alias) == (alias[source], alias[target])
        ]
        assert len(beats) >= 2
        assert all(rec.timestamp == hb.timestamp_ms >= started_ms for hb, rec in beats)
        stamps = [hb.timestamp_ms for hb, _ in beats]
        assert stamps == sorted(stamps)
        # One hop further: the copy on the other side holds the same records.
        other = a if side == b else b
        copied = _heartbeats(other, f"{alias[target]}.heartbeats")
        mine = [hb for hb, _ in copied if hb.source_alias == alias[source]]
        assert mine and set(mine) <= {hb for hb, _ in beats}
        # MM2's own client: the other side is one hop upstream, and it decodes the copies.
        seen = run_program(mm2_topology, other, alias[target], f"{alias[target]}.heartbeats")
        assert f"upstream {alias[target]}" in seen and "hops 1" in seen
        assert sorted(ln for ln in seen if ln.startswith("heartbeat ")) == sorted(
            f"heartbeat {hb.source_alias} {hb.target_alias} {hb.timestamp_ms}" for hb, _ in copied
        )


def test_identity_policy_keeps_names_and_carries_upstream_heartbeats(
    spark, clusters, tmp_path, topic_name
):
    """Scenario: on A (the source cluster) topic t holds 30 records, A's ``heartbeats`` holds
    a heartbeat of an upstream flow C -> A and ``<C>.heartbeats`` one of D -> C (as MM2 on A
    would have left them). One run of A -> B with ``{policy: identity}`` and heartbeats
    copies t to B as t (same name, same records), and the heartbeats as MM2's identity
    policy names them: ``<A>.heartbeats`` and ``<A>.<C>.heartbeats``, so B sees its upstream
    clusters A, C and D; B's ``heartbeats`` gets this flow's own A -> B heartbeat."""
    a, b = clusters.source, clusters.target
    run = uuid.uuid4().hex[:6]
    A, B, C, D = (f"{x}-{run}" for x in "abcd")
    t = topic_name("identity")
    create_topic(a, t, 3)
    records = [(i % 3, f"k{i}", f"v{i}", [], None) for i in range(30)]
    produce(a, t, records)
    then_ms = int(time.time() * 1000) - 1000
    upstream = {"heartbeats": Heartbeat(C, A, then_ms), f"{C}.heartbeats": Heartbeat(D, C, then_ms)}
    for topic, beat in upstream.items():
        if topic not in list_topics(a):  # the other drill may have left A's heartbeats
            create_topic(a, topic, 1, {"cleanup.policy": "compact"})
        produce(a, topic, [(0, *beat.encode(), [], beat.timestamp_ms)])
    doc = pipeline_dict(
        clusters,
        topic_name("id"),
        [t],
        source={"alias": A},
        target={"alias": B},
        features={"heartbeats": "enabled"},
    )
    doc["replication"] = [{"source": {"topic": [t]}}, {"sink": {"topic": {"policy": "identity"}}}]
    started_ms = int(time.time() * 1000)
    run_until_caught_up(spark, tmp_path, doc)

    assert {tuple(r.content()[:2]) for rs in read_all(b, t).values() for r in rs} == {
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(30)
    }
    assert f"{A}.{t}" not in list_topics(b)
    for source_topic, beat in upstream.items():
        copied = [hb for hb, _ in _heartbeats(b, f"{A}.{source_topic}")]
        assert beat in copied, (source_topic, copied)
    own = [hb for hb, _ in _heartbeats(b, "heartbeats") if hb.source_alias == A]
    assert own and all(hb.target_alias == B and hb.timestamp_ms >= started_ms for hb in own)
