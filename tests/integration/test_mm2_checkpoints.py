"""MirrorMaker 2 checkpoints on real brokers, read by MM2's own client library.

An application group consumes a source topic to a random position per partition and commits
(with metadata); k2k replicates it (``{policy: alias}``, exactly-once, offset mapping) into a
target topic that already held other records, so source and target offsets differ, and
emits checkpoints. A Java program compiled here calls MM2's
``RemoteClusterUtils.translateOffsets`` (connect-mirror-client from Maven Central, the
brokers' release): what it prints must equal k2k's own exact translation (what ``k2k
offset-mapping start --once`` commits for the group) for every partition, and the target
record at each translated offset must be the one the group would have read next on the
source. Expected offsets never come from k2k: they are found by looking up, on the target,
the unique key of the source record at the group's position.
"""

from __future__ import annotations

import random
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from k2k.config import load_pipeline
from k2k.formats.checkpoint import Checkpoint
from k2k.pipeline.driver.services.checkpoints import CheckpointEmitter
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.mm2java import compile_program, run_program
from tests.helpers.pipelines import k2k_cli, pipeline_dict, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

TP = tuple[str, int]
PARTITIONS, RECORDS = 3, 40

_TRANSLATE_JAVA = """
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/** Prints MM2's translation of a group's offsets: one "topic partition offset" per line. */
public class Translate {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(60));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            System.out.println(e.getKey().topic() + " " + e.getKey().partition() + " "
                + e.getValue().offset());
        }
    }
}
"""


@pytest.fixture(scope="module")
def mm2_translate(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs the compiled program (append: target bootstrap, alias, group)."""
    return compile_program(tmp_path_factory.mktemp("mm2-translate"), "Translate", _TRANSLATE_JAVA)


def _mm2_offsets(command: list[str], *args: str) -> dict[TP, int]:
    offsets: dict[TP, int] = {}
    for line in run_program(command, *args):
        topic, partition, offset = line.split()
        offsets[(topic, int(partition))] = int(offset)
    return offsets


def _consume_and_commit(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """The application: read each partition up to its position, then commit it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in positions])
        read = dict.fromkeys(positions, 0)
        while any(read[p] < n for p, n in positions.items()):
            for m in consumer.consume(100, 1.0):
                assert m.error() is None, m.error()
                read[m.partition()] = m.offset() + 1
        consumer.commit(offsets=_with_metadata(topic, positions), asynchronous=False)
    finally:
        consumer.close()


def _with_metadata(topic: str, positions: dict[int, int]) -> list[TopicPartition]:
    """The offsets to commit, each with the application's metadata ``app-<partition>``."""
    return [TopicPartition(topic, p, n, f"app-{p}") for p, n in positions.items()]


def _commit(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """The group reset on the source (e.g. ``kafka-consumer-groups --reset-offsets``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=_with_metadata(topic, positions), asynchronous=False)
    finally:
        consumer.close()


def _checkpoints(bootstrap: str, topic: str) -> dict[tuple[str, TP], Checkpoint]:
    """The newest checkpoint per (group, target partition) in the checkpoints topic."""
    newest: dict[tuple[str, TP], Checkpoint] = {}
    for p, recs in read_all(bootstrap, topic).items():
        for r in recs:
            c = Checkpoint.decode(r.key, r.value, topic, p, r.offset)
            newest[(c.group, (c.topic, c.partition))] = c
    return newest


def _target_committed(bootstrap: str, group: str) -> dict[TP, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def test_mm2_client_translates_k2k_checkpoints_exactly(
    clusters, tmp_path, topic_name, mm2_translate
):
    """Scenario: source topic t (3 partitions, 40 records each, unique keys); the target's
    ``<A>.t`` already holds 2, 5 and 9 other records. Group ``app`` reads t to a random
    position per partition and commits them with metadata; group ``console-consumer-…``
    (excluded by MM2's default ``groups.exclude``) commits too. ``k2k start`` (A -> B,
    exactly-once, offset mapping, checkpoints every 500 ms) runs until the checkpoints of
    ``app`` cover its three partitions.

    ``<A>.checkpoints.internal`` (one partition, compacted) holds exactly those three
    checkpoints: upstream = the committed position, metadata = the commit's, downstream = the
    target offset of the source record at that position (found by key; just past the copy
    for a position at the end); none for the excluded group. MM2's client translates the
    group to those offsets, equal to what the Offset Mapping app commits, for every partition."""
    source, target = clusters.source, clusters.target
    run = uuid.uuid4().hex[:6]
    alias_a, alias_b = f"a-{run}", f"b-{run}"
    t = topic_name("ckpt")
    remote = f"{alias_a}.{t}"
    app, excluded = f"app-{run}", f"console-consumer-{run}"
    create_topic(source, t, PARTITIONS)
    produce(
        source,
        t,
        [
            (p, f"{run}-{p}-{i}", f"v{i}", [], None)
            for p in range(PARTITIONS)
            for i in range(RECORDS)
        ],
    )
    create_topic(target, remote, PARTITIONS)
    already = {0: 2, 1: 5, 2: 9}
    produce(
        target,
        remote,
        [(p, f"other-{p}-{i}", "x", [], None) for p, n in already.items() for i in range(n)],
    )
    rng = random.Random()
    positions = {0: rng.randint(1, RECORDS - 1), 1: rng.randint(1, RECORDS - 1), 2: RECORDS}
    _consume_and_commit(source, app, t, positions)
    _consume_and_commit(source, excluded, t, {0: 1, 1: 1, 2: 1})

    name = topic_name("pipe")
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"exactlyOnce": "enabled", "offsetMapping": "enabled", "checkpoints": "enabled"},
        source={"alias": alias_a},
        target={"alias": alias_b},
        checkpoints={"interval": "500 milliseconds", "groups": f"(app|console-consumer)-{run}"},
        offsetMapping={"topic": f"__k2k_offset_mappings-{run}"},
        coordination={"assignment": {"topic": f"__k2k_assignment-{name}"}},
    )
    doc["replication"] = [
        {"source": {"topic": [t]}},
        {"sink": {"topic": {"policy": "alias"}, "partition": "source"}},
    ]
    path = write_pipeline(tmp_path, doc)
    checkpoints_topic = f"{alias_a}.checkpoints.internal"
    proc = K2KProcess(path, tmp_path / "k2k.log")
    try:
        # Replicated: every partition of the copy holds the other records and all of t.
        eventually(
            lambda: {p: len(recs) for p, recs in read_all(target, remote).items()},
            expected={p: already[p] + RECORDS for p in range(PARTITIONS)},
            timeout=240,
        )
        expected = _expected_offsets(source, t, target, remote, positions, already)
        wanted = {
            (app, tp): Checkpoint(app, tp[0], tp[1], positions[tp[1]], offset, f"app-{tp[1]}")
            for tp, offset in expected.items()
        }
        # Checkpoints follow replication (a position past the data so far moves on with it):
        # the newest ones are the final translations once the pipeline is caught up.
        eventually(
            lambda: {
                k: v for k, v in _checkpoints(target, checkpoints_topic).items() if k[0] == app
            },
            expected=wanted,
            timeout=120,
        )
        written = _checkpoints(target, checkpoints_topic)
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
    # The target held other records first: no offset is the source's (nothing trivially equal).
    assert all(expected[(remote, p)] > n for p, n in positions.items())
    assert not [k for k in written if k[0] == excluded]
    assert _topic_shape(target, checkpoints_topic) == (1, "compact")  # as MM2 creates it

    mm2 = _mm2_offsets(mm2_translate, target, alias_a, app)
    assert mm2 == expected

    # k2k's own exact translation: the Offset Mapping app's commit for the same group.
    done = k2k_cli("offset-mapping", "start", "-f", str(path), "--once", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _target_committed(target, app) == mm2

    # A restarted emitter reads the checkpoints back (MM2's rule survives restarts): it
    # repeats none, and follows the group when it is reset on the source.
    emitter = CheckpointEmitter(load_pipeline([path]))
    try:
        again = emitter.one_pass()
        assert (again.written, again.unchanged) == ([], PARTITIONS)
        back = positions[0] // 2
        _commit(source, app, t, {0: back})
        reset = emitter.one_pass()
    finally:
        emitter.close()
    moved = _expected_offsets(source, t, target, remote, {0: back}, already)[(remote, 0)]
    assert reset.written == [Checkpoint(app, remote, 0, back, moved, "app-0")]
    assert reset.unchanged == PARTITIONS - 1
    assert _mm2_offsets(mm2_translate, target, alias_a, app) == {**expected, (remote, 0): moved}


def _expected_offsets(
    source: str,
    topic: str,
    target: str,
    remote: str,
    positions: dict[int, int],
    already: dict[int, int],
) -> dict[TP, int]:
    """From the data alone: the target offset of the record the group reads next (found by
    its unique key), or just past the copy for a position at the end."""
    copied = read_all(target, remote)
    by_key = {r.key: (p, r.offset) for p, recs in copied.items() for r in recs}
    src = read_all(source, topic)
    expected: dict[TP, int] = {}
    for p, n in positions.items():
        assert [r.key for r in copied[p][: already[p]]] == [
            f"other-{p}-{i}".encode() for i in range(already[p])
        ]
        assert [r.key for r in copied[p][already[p] :]] == [r.key for r in src[p]]  # in order
        if n < len(src[p]):
            landed = by_key[src[p][n].key]
            assert landed[0] == p
            expected[(remote, p)] = landed[1]
        else:
            expected[(remote, p)] = copied[p][-1].offset + 1
    return expected


def _topic_shape(bootstrap: str, topic: str) -> tuple[int, str]:
    """A topic's partition count and ``cleanup.policy``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return partitions, configs["cleanup.policy"].value
