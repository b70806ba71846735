"""The Offset Mapping app on real brokers: target consumer groups continue exactly where
their source twins stand, and the app's safety rules hold.

A real runner (in-process, no Spark, as in test_run_observer.py) replicates with
``MappingPublisher``, so the mapping records are the ones ``k2k start`` writes. Expected
target offsets never come from k2k: every record has a unique key, so the target offset of
a source position is found by looking up, on the target, the key of the first source record
at or after it (or just after the last one, past the data).

Proved here, one property per test:

* the guard: an app holding older mappings cannot rewind a group (and without the guard it
  does), while a group that rewound on the source is followed to the exact translation;
* ``onActiveConsumerGroupCommit`` and ``onMultipleTargetCommittedOffsets``, ``fail`` (exit 1,
  one line) and ``ignore`` (the others are still committed);
* retention deletes mapping records for real yet keeps every mapping a group stands on; a
  position whose mapping is gone is left untranslated, not moved somewhere wrong;
* renamed target topics are followed;
* bad configuration is one line per problem, exit 2;
* the app never writes to the source cluster.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from k2k.config.loader import build_offset_mapping_app, deep_merge
from k2k.formats.offset_mapping import RunEncoder
from k2k.local import free_port
from k2k.offsetmapping.app import OffsetMappingApp, PassReport
from k2k.offsetmapping.translate import plan_group
from k2k.pipeline.plan import PartitionRange, RunnerGroup
from k2k.pipeline.task.mappings import MappingPublisher, mapping_partition
from k2k.pipeline.task.runner import Runner
from k2k.stages import KeyHash, SourcePartition, TopicPlan
from tests.helpers.inprocess import inprocess_spec
from tests.helpers.kafka import (
    create_topic,
    end_offsets,
    eventually,
    list_topics,
    produce,
    read_all,
    transactions_settled,
)
from tests.helpers.pipelines import k2k_cli

pytestmark = pytest.mark.integration

TP = tuple[str, int]


# -- helpers -------------------------------------------------------------------------------


def fill(bootstrap: str, topic: str, partitions: int, n: int, tag: str) -> None:
    """``n`` records per partition, keys ``<tag>-<partition>-<i>`` (unique per test)."""
    produce(
        bootstrap,
        topic,
        [(p, f"{tag}-{p}-{i}", f"v{i}", None, None) for p in range(partitions) for i in range(n)],
    )


def replicate_with_mappings(
    clusters,
    name: str,
    routes: Mapping[str, str],
    mapping_topic: str,
    *,
    hash_: bool = False,
) -> None:
    """Replicate ``routes`` (source topic -> target topic) up to the source's end offsets now,
    exactly-once, writing mapping records to ``mapping_topic`` as pipeline ``name``. Called
    again with the same name, it resumes from its progress (same pipeline)."""
    partitioning = KeyHash() if hash_ else SourcePartition()
    plans = {s: TopicPlan(s, t, partitioning, True, True, None) for s, t in routes.items()}
    spec = inprocess_spec(
        clusters,
        name,
        plans,
        spreads=hash_,
        exactly_once=True,
        observer=MappingPublisher(
            name, mapping_topic, len(end_offsets(clusters.target, mapping_topic))
        ),
    )
    ranges = tuple(
        PartitionRange(s, p, 0, end, False)
        for s in sorted(routes)
        for p, end in sorted(end_offsets(clusters.source, s).items())
    )
    summary = Runner(spec, RunnerGroup(0, ranges, transactional_id=f"{name}-txn")).run()
    assert summary.error is None and summary.fenced is None, summary
    assert {(o.topic, o.partition, o.committed) for o in summary.partitions} == {
        (r.topic, r.partition, r.end) for r in ranges
    }
    # What the test reads next must hold the last transaction, markers and all.
    transactions_settled(clusters.target, [mapping_topic, *routes.values()])


def where_landed(clusters, target: str) -> dict[bytes, tuple[int, int]]:
    """Key -> (partition, offset) of every record on ``target`` (keys are unique)."""
    return {
        r.key: (p, r.offset) for p, recs in read_all(clusters.target, target).items() for r in recs
    }


def expected_commits(clusters, source: str, target: str, positions: Mapping[int, int]) -> dict:
    """Where each source position of ``source`` (partition -> next offset to read) continues
    on ``target``, from the data alone: the target offset of the first source record at or
    after the position (by its unique key), or just after the last replicated record."""
    src = read_all(clusters.source, source)
    landed = where_landed(clusters, target)
    out = {}
    for partition, position in positions.items():
        following = [r for r in src[partition] if r.offset >= position]
        if following:
            p, offset = landed[following[0].key]
        else:
            p, last = landed[src[partition][-1].key]
            offset = last + 1
        out[(target, p)] = offset
    return out


def commit_source(clusters, group: str, offsets: Mapping[TP, int]) -> None:
    """Commit ``group``'s offsets on the source, as an application would."""
    consumer = Consumer(
        {"bootstrap.servers": clusters.source, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def group_offsets(bootstrap: str, group: str) -> dict[TP, tuple[int, str]]:
    """A group's committed offsets with their metadata (partitions with an offset only)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=30)[group].result()
    return {
        (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
        for tp in result.topic_partitions or []
        if tp.error is None and tp.offset >= 0
    }


def target_commits(clusters, group: str) -> dict[TP, int]:
    """The offsets ``group`` has committed on the target."""
    return {tp: offset for tp, (offset, _) in group_offsets(clusters.target, group).items()}


def low_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """The first offset still stored in each partition (moves up when records are deleted)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {
        TopicPartition(topic, p): OffsetSpec.earliest() for p in end_offsets(bootstrap, topic)
    }
    futures = admin.list_offsets(request, request_timeout=30)
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def app_config(
    clusters, name: str, mapping_topic: str, groups: list[str] | str, **sections: Any
) -> dict:
    """The app's configuration (K2K layout) for the test clusters; ``sections`` deep-update."""
    doc = {
        "name": name,
        "source": {"kafka": {"common": {"bootstrap.servers": clusters.source}}},
        "target": {"kafka": {"common": {"bootstrap.servers": clusters.target}}},
        "groups": {"consumerGroups": groups},
        "offsetMapping": {"topic": mapping_topic},
    }
    return deep_merge(doc, sections)


@contextmanager
def prepared_app(doc: dict) -> Iterator[OffsetMappingApp]:
    """An in-process app, its mapping topic opened; closed afterwards."""
    app = OffsetMappingApp(build_offset_mapping_app(doc))
    app._prepare()
    try:
        yield app
    finally:
        app.close()


def one_pass(doc: dict) -> PassReport:
    """One pass of a fresh in-process app, as ``--once`` does."""
    return OffsetMappingApp(build_offset_mapping_app(doc)).run(once=True)


def cli_once(tmp_path: Path, doc: dict):
    """``k2k offset-mapping start -f <doc> --once`` in a subprocess (the real CLI)."""
    path = tmp_path / "offset-mapping.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return k2k_cli("offset-mapping", "start", "-f", str(path), "--once")


def one_error_line(stderr: str) -> str:
    """The only line of ``stderr``, which must be a one-line error."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def make_topics(clusters, topic_name, partitions: int = 2, target_partitions: int | None = None):
    """A source topic, its target topic (already holding other records, so target offsets
    differ from source offsets) and a mapping topic."""
    source, target, mapping = topic_name("src"), topic_name("dst"), topic_name("map")
    create_topic(clusters.source, source, partitions)
    create_topic(clusters.target, target, target_partitions or partitions)
    produce(clusters.target, target, [(0, f"old-{i}", "o", None, None) for i in range(7)])
    create_topic(clusters.target, mapping, 3, {"cleanup.policy": "delete"})
    return source, target, mapping


# -- tests ---------------------------------------------------------------------------------


def test_guard_keeps_an_app_with_older_mappings_from_rewinding_a_group(
    clusters, topic_name, group_name
):
    source, target, mapping = make_topics(clusters, topic_name)
    pipeline, group = topic_name("pipe"), group_name()
    fill(clusters.source, source, 2, 100, "part1")
    replicate_with_mappings(clusters, pipeline, {source: target}, mapping)
    # The mappings as they are now, in a topic of their own: what a stale app knows.
    stale = topic_name("map-old")
    create_topic(clusters.target, stale, 3, {"cleanup.policy": "delete"})
    old = read_all(clusters.target, mapping)
    produce(
        clusters.target,
        stale,
        [(p, r.key, r.value, None, None) for p, rs in old.items() for r in rs],
    )
    fill(clusters.source, source, 2, 100, "part2")
    replicate_with_mappings(clusters, pipeline, {source: target}, mapping)

    positions = {0: 190, 1: 195}
    commit_source(clusters, group, {(source, p): o for p, o in positions.items()})
    current = app_config(clusters, topic_name("app"), mapping, [group])
    report = one_pass(current)
    t2 = expected_commits(clusters, source, target, positions)
    assert report.committed == 2 and target_commits(clusters, group) == t2

    # Past the mappings it knows: just after the last record of part 1 (a transaction
    # marker of the runner follows it on the target, so not where part 2 starts).
    landed = where_landed(clusters, target)
    end_of_part1 = {(target, p): landed[f"part1-{p}-99".encode()][1] + 1 for p in positions}
    assert all(end_of_part1[tp] < t2[tp] for tp in t2)
    stale_doc = app_config(clusters, topic_name("stale"), stale, [group])
    with prepared_app(stale_doc) as app:
        assert app.store is not None
        app.store.catch_up()
        translated = plan_group({(source, p): o for p, o in positions.items()}, app.store.indexes)
        assert translated.offsets == end_of_part1  # lower: it knows only part 1
        report = app.one_pass()
    assert report.kept_by_guard == 2 and report.committed == 0, report
    assert target_commits(clusters, group) == t2

    # Without the guard the same stale app does move the group back: the guard did the work.
    report = one_pass(deep_merge(stale_doc, {"features": {"applyMappingsGuard": "disabled"}}))
    assert report.committed == 2 and target_commits(clusters, group) == end_of_part1
    assert one_pass(current).committed == 2 and target_commits(clusters, group) == t2

    # The source group rewinds: the app follows it down, exactly.
    rewound = {0: 40, 1: 0}
    commit_source(clusters, group, {(source, p): o for p, o in rewound.items()})
    report = one_pass(current)
    assert report.kept_by_guard == 0 and report.committed == 2, report
    assert target_commits(clusters, group) == expected_commits(clusters, source, target, rewound)


def test_a_group_that_rewound_on_the_source_is_followed(clusters, topic_name, group_name):
    source, target, mapping = make_topics(clusters, topic_name, partitions=1)
    pipeline, group = topic_name("pipe"), group_name()
    fill(clusters.source, source, 1, 50, "a")
    # A committed transaction: its marker (source offset 55) is a gap in the source.
    producer = Producer({"bootstrap.servers": clusters.source, "transactional.id": pipeline})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(source, key=f"txn-{i}", value="t", partition=0)
    producer.commit_transaction(30)
    fill(clusters.source, source, 1, 50, "b")
    replicate_with_mappings(clusters, pipeline, {source: target}, mapping)
    doc = app_config(clusters, topic_name("app"), mapping, [group])

    for position in (100, 55, 0, 80):  # forward, back into the gap, to earliest, forward
        commit_source(clusters, group, {(source, 0): position})
        report = one_pass(doc)
        assert report.committed == 1 and report.kept_by_guard == 0, (position, report)
        expected = expected_commits(clusters, source, target, {0: position})
        assert target_commits(clusters, group) == expected, position
    # The marker's position continues at the next replicated record (source offset 56).
    assert expected_commits(clusters, source, target, {0: 55}) == expected_commits(
        clusters, source, target, {0: 56}
    )


class ActiveMember:
    """A consumer of ``group`` on the target, polling in a thread (an application that
    already runs on the target), until closed."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.group = group
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def state(self) -> ConsumerGroupState:
        futures = self.admin.describe_consumer_groups([self.group], request_timeout=10)
        return futures[self.group].result().state

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


def test_on_active_consumer_group_commit(clusters, topic_name, group_name, tmp_path):
    source, target, mapping = make_topics(clusters, topic_name)
    active, idle = group_name("active"), group_name("idle")
    fill(clusters.source, source, 2, 30, "r")
    replicate_with_mappings(clusters, topic_name("pipe"), {source: target}, mapping)
    positions = {0: 10, 1: 20}
    for g in (active, idle):
        commit_source(clusters, g, {(source, p): o for p, o in positions.items()})
    member = ActiveMember(clusters.target, active, target)
    try:
        eventually(member.state, ConsumerGroupState.STABLE)
        doc = app_config(clusters, topic_name("app"), mapping, [active, idle])

        failed = cli_once(tmp_path, doc)
        assert failed.returncode == 1, failed.stderr
        line = one_error_line(failed.stderr)
        assert repr(active) in line and "onActiveConsumerGroupCommit" in line, line
        assert target_commits(clusters, active) == {} and target_commits(clusters, idle) == {}

        ignored = deep_merge(doc, {"errorHandling": {"onActiveConsumerGroupCommit": "ignore"}})
        done = cli_once(tmp_path, ignored)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert target_commits(clusters, active) == {}
        assert target_commits(clusters, idle) == expected_commits(
            clusters, source, target, positions
        )
        assert member.state() == ConsumerGroupState.STABLE  # the live group was left alone
    finally:
        member.close()


def test_on_multiple_target_committed_offsets(clusters, topic_name, group_name, tmp_path):
    hashed, hashed_target, mapping = make_topics(
        clusters, topic_name, partitions=2, target_partitions=3
    )
    plain, plain_target = topic_name("plain"), topic_name("plain-dst")
    create_topic(clusters.source, plain, 2)
    create_topic(clusters.target, plain_target, 2)
    fill(clusters.source, hashed, 2, 60, "h")
    fill(clusters.source, plain, 2, 40, "s")
    replicate_with_mappings(
        clusters, topic_name("hash"), {hashed: hashed_target}, mapping, hash_=True
    )
    replicate_with_mappings(clusters, topic_name("plain"), {plain: plain_target}, mapping)
    # One source partition's records are really on several target partitions.
    spread = {
        p
        for p, recs in read_all(clusters.target, hashed_target).items()
        for r in recs
        if r.key.startswith(b"h-0-")
    }
    assert len(spread) > 1

    group = group_name()
    commit_source(
        clusters,
        group,
        {(hashed, 0): 30, (hashed, 1): 50, (plain, 0): 12, (plain, 1): 40},
    )
    doc = app_config(clusters, topic_name("app"), mapping, [group])

    failed = cli_once(tmp_path, doc)
    assert failed.returncode == 1, failed.stderr
    line = one_error_line(failed.stderr)
    assert repr(group) in line and f"source {hashed}[0]" in line, line
    assert "onMultipleTargetCommittedOffsets" in line, line
    assert target_commits(clusters, group) == {}

    ignored = deep_merge(doc, {"errorHandling": {"onMultipleTargetCommittedOffsets": "ignore"}})
    done = cli_once(tmp_path, ignored)
    assert done.returncode == 0, done.stderr
    assert target_commits(clusters, group) == expected_commits(
        clusters, plain, plain_target, {0: 12, 1: 40}
    )  # nothing on the hash-routed topic, the other topic exactly


def test_retention_keeps_what_groups_need(clusters, topic_name, group_name):
    source, target = topic_name("src"), topic_name("dst")
    create_topic(clusters.source, source, 2)
    create_topic(clusters.target, target, 2)
    mapping = topic_name("map")
    create_topic(clusters.target, mapping, 2, {"cleanup.policy": "delete"})
    # Each source partition's mappings in a mapping partition of its own, so each is cut
    # exactly below the oldest mapping a group needs.
    pipeline = next(
        name
        for name in (f"{topic_name('pipe')}-{i}" for i in range(100))
        if mapping_partition(name, source, 0, 2) != mapping_partition(name, source, 1, 2)
    )
    # 40 committed transactions of 5 records per partition: each marker ends a run.
    producer = Producer({"bootstrap.servers": clusters.source, "transactional.id": pipeline})
    producer.init_transactions(30)
    for t in range(40):
        producer.begin_transaction()
        for p in range(2):
            for i in range(5):
                producer.produce(source, key=f"t{t}-{p}-{i}", value="v", partition=p)
        producer.commit_transaction(30)
    replicate_with_mappings(clusters, pipeline, {source: target}, mapping)

    early, late, later = group_name("a"), group_name("b"), group_name("c")
    positions = {early: {0: 32, 1: 33}, late: {0: 6 * 37 + 3, 1: 6 * 38}}  # txn 5, txn 37/38
    for g, pos in positions.items():
        commit_source(clusters, g, {(source, p): o for p, o in pos.items()})
    expected = {g: expected_commits(clusters, source, target, pos) for g, pos in positions.items()}

    # Where the mappings of the early group's positions sit in the mapping topic.
    records = read_all(clusters.target, mapping)
    needed_at = {}
    for mp, recs in records.items():
        for r in recs:
            key, value = json.loads(r.key), json.loads(r.value)
            position = positions[early][key["partition"]]
            if value["from"] <= position < key["offset"] + value["count"]:
                needed_at[mp] = r.offset
    assert len(needed_at) == 2 and all(o > 0 for o in needed_at.values())

    doc = app_config(
        clusters,
        topic_name("app"),
        mapping,
        [early, late, later],
        offsetMapping={"retention": {"count": 3, "schedule": "1 second"}},
    )
    with prepared_app(doc) as app:
        report = app.one_pass()
        assert report.committed == 4 and report.untranslated == 0, report
        for g in positions:
            assert target_commits(clusters, g) == expected[g]
        assert app.clean() == needed_at
        assert low_watermarks(clusters.target, mapping) == needed_at  # really deleted

        # Committed only now, at a position whose mapping is gone: left where it is.
        commit_source(clusters, later, {(source, 0): 2, (source, 1): 8})
        report = app.one_pass()
        assert report.untranslated == 2 and report.committed == 0, report
    assert target_commits(clusters, later) == {}

    # A fresh app reads the trimmed topic and translates the groups exactly as before.
    with prepared_app(doc) as fresh:
        assert fresh.store is not None
        fresh.store.catch_up()
        for g, pos in positions.items():
            plan = plan_group({(source, p): o for p, o in pos.items()}, fresh.store.indexes)
            assert plan.offsets == expected[g], g
        report = fresh.one_pass()
    assert report.unchanged == 4 and report.committed == 0 and report.untranslated == 2, report
    for g in positions:
        assert target_commits(clusters, g) == expected[g]
    assert target_commits(clusters, later) == {}


def test_renamed_target_topic_is_followed(clusters, topic_name, group_name):
    source = topic_name("src")
    target = f"dr.{source}"
    create_topic(clusters.source, source, 2)
    create_topic(clusters.target, target, 2)
    mapping = topic_name("map")
    create_topic(clusters.target, mapping, 3, {"cleanup.policy": "delete"})
    fill(clusters.source, source, 2, 40, "r")
    replicate_with_mappings(clusters, topic_name("pipe"), {source: target}, mapping)
    group = group_name()
    commit_source(clusters, group, {(source, 0): 25, (source, 1): 40})
    report = one_pass(app_config(clusters, topic_name("app"), mapping, [group]))
    assert report.committed == 2, report
    commits = target_commits(clusters, group)
    assert commits == expected_commits(clusters, source, target, {0: 25, 1: 40})
    assert {t for t, _ in commits} == {target}


def test_bad_configuration_is_one_line_per_problem(clusters, topic_name, tmp_path):
    doc = app_config(
        clusters,
        topic_name("app"),
        topic_name("map"),
        "([",  # groups.consumerGroups: not a regular expression
        errorHandling={"onActiveConsumerGroupCommit": "maybe"},
    )
    result = cli_once(tmp_path, doc)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines), lines
    paths = sorted(line.removeprefix("error: ").split(":")[0] for line in lines)
    assert paths == ["errorHandling.onActiveConsumerGroupCommit", "groups.consumerGroups"], lines


def test_never_writes_to_the_source(clusters, topic_name, group_name, tmp_path):
    source, target, mapping = make_topics(clusters, topic_name)
    fill(clusters.source, source, 2, 50, "r")
    replicate_with_mappings(clusters, topic_name("pipe"), {source: target}, mapping)
    groups = [group_name("a"), group_name("b")]
    commit_source(clusters, groups[0], {(source, 0): 20, (source, 1): 50})
    commit_source(clusters, groups[1], {(source, 0): 0})
    admin = AdminClient({"bootstrap.servers": clusters.source})

    def source_state():
        names = sorted(
            g.group_id for g in admin.list_consumer_groups(request_timeout=30).result().valid
        )
        return (
            list_topics(clusters.source),
            names,
            {g: group_offsets(clusters.source, g) for g in names},
        )

    before = source_state()
    doc = app_config(
        clusters,
        topic_name("app"),
        mapping,
        groups,
        offsetMapping={"retention": {"count": 1, "schedule": "1 second"}},
    )
    done = cli_once(tmp_path, doc)
    assert done.returncode == 0, done.stderr
    with prepared_app(doc) as app:  # a pass and a retention run, in-process too
        app.one_pass()
        app.clean()
    assert target_commits(clusters, groups[0]) == expected_commits(
        clusters, source, target, {0: 20, 1: 50}
    )
    assert source_state() == before


def test_a_position_inside_a_run_split_by_a_commit_marker_is_exact(
    clusters, topic_name, group_name
):
    """Exactly-once, the marker of the transaction committing in the background can land
    inside a run of the next one (docs/benchmarks.md, the issue 14 section). The
    target is written here the way that happens, two records, a marker, two records, with
    the mapping record a runner writes for such a run; the app reads the run back and
    commits the record's real offset. With another writer's record in the range instead,
    the run stays a lower bound."""
    target, mapping = topic_name("split-dst"), topic_name("split-map")
    create_topic(clusters.target, target, 2)
    create_topic(clusters.target, mapping, 1, {"cleanup.policy": "delete"})
    txn = Producer({"bootstrap.servers": clusters.target, "transactional.id": target})
    txn.init_transactions(30)
    for keys in (["a0", "a1"], ["a2", "a3"]):  # partition 0: a0 a1 <marker> a2 a3 <marker>
        txn.begin_transaction()
        for key in keys:
            txn.produce(target, b"v", key, 0)
        txn.commit_transaction(30)
    produce(clusters.target, target, [(1, f"b{i}", "v", None, None) for i in range(5)])
    runs = [  # (source partition, target partition, target first, target last): 4 records each
        (0, 0, 0, 4),  # one marker inside
        (1, 1, 0, 4),  # five records in the range: another writer's is among them
    ]
    producer = Producer({"bootstrap.servers": clusters.target})
    for source_partition, target_partition, t_first, t_last in runs:
        key, value = RunEncoder("split", "orders", source_partition).encode(
            100, 100, 4, target, target_partition, t_first, t_last, 0
        )
        producer.produce(mapping, value, key, 0)
    assert producer.flush(30) == 0
    doc = app_config(clusters, topic_name("split-app"), mapping, [group_name("unused")])
    with prepared_app(doc) as app:
        app.store.catch_up()
        exact = plan_group({("orders", 0): 102}, app.store.indexes, app.runs.resolve)
        assert (exact.offsets, exact.inexact) == ({(target, 0): 3}, 0)  # a2, after the marker
        bound = plan_group({("orders", 1): 102}, app.store.indexes, app.runs.resolve)
        assert (bound.offsets, bound.inexact) == ({(target, 1): 2}, 1)


@pytest.mark.parametrize("cluster", ["source", "target"])
def test_an_unreachable_cluster_fails_within_its_connect_timeout_naming_it(
    clusters, tmp_path, topic_name, group_name, cluster
):
    dead = f"127.0.0.1:{free_port()}"
    doc = app_config(clusters, topic_name("unreach-app"), topic_name("map"), [group_name("g")])
    doc[cluster]["kafka"]["common"]["bootstrap.servers"] = dead
    doc[cluster]["connectTimeout"] = "3 seconds"
    started = time.monotonic()
    result = cli_once(tmp_path, doc)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and f"{cluster} cluster unreachable at {dead}" in errors[0], errors
    assert time.monotonic() - started < 30
