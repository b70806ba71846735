"""Identical offsets (``replication[].sink.offsets: identical``) on real brokers: every record
sits at its source offset on the target, also when the source's log start was moved before
the first start and when ``k2k start`` is killed with SIGKILL mid-copy, again and again
(progress is the target: no duplicate, nothing missing). A source partition whose offsets
jump (a transaction's commit marker) stops with one line before anything lands at a wrong
offset (``onOffsetGap: fail``), or goes on through offset mappings (``map``)."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.helpers.groups import failover_reads
from tests.helpers.kafka import (
    create_topic,
    end_offsets,
    eventually,
    produce,
    produce_transaction,
    read_all,
)
from tests.helpers.pipelines import (
    BASE_TS,
    committed_progress,
    k2k_cli,
    latest_progress,
    pipeline_dict,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess
from tests.integration.test_offset_mapping_app import (
    app_config,
    cli_once,
    commit_source,
    target_commits,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
#: Records written before the first start, and below which partition 0's log start moves.
BEFORE, DELETED = 3_000, 1_000
#: Records written while the runs are killed.
DURING = 24_000
KILLS = 3


def _identical(clusters, name: str, topic: str, **sections: Any) -> dict[str, Any]:
    doc = pipeline_dict(
        clusters,
        name,
        [topic],
        features={"tracingHeaders": {"offset": "enabled"}},
        coordination={"commit": {"batchSize": 300, "batchTimeout": "100 milliseconds"}},
        **sections,
    )
    doc["replication"][1]["sink"]["offsets"] = "identical"
    return doc


def _record(i: int) -> tuple[int, bytes, bytes, list[tuple[str, bytes]], int]:
    return (i % PARTITIONS, b"k%d" % i, b"v%d" % i, [("h", b"%d" % (i % 7))], BASE_TS + i)


def _log_starts(bootstrap: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
    request = {TopicPartition(topic, p): OffsetSpec.earliest() for p in parts}
    futures = admin.list_offsets(request, request_timeout=30)
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def _assert_identical(source: str, target: str, topic: str) -> int:
    """Every target record is the source record at the same offset, every source record is
    there once, and the log starts agree; returns the records compared."""
    src, dst = read_all(source, topic), read_all(target, topic)
    assert _log_starts(target, topic) == _log_starts(source, topic)
    compared = 0
    for p, records in src.items():
        assert [r.offset for r in dst[p]] == [r.offset for r in records], f"partition {p}"
        for s, t in zip(records, dst[p], strict=True):
            headers = dict(t.headers)
            assert int(headers.pop("k2k_offset")) == s.offset
            assert (t.key, t.value, t.timestamp) == (s.key, s.value, s.timestamp)
            assert [h for h in t.headers if h[0] != "k2k_offset"] == s.headers
        compared += len(records)
    return compared


def test_offsets_stay_identical_through_a_moved_log_start_and_three_kill_9s(
    clusters, tmp_path, topic_name
):
    t = topic_name("ident")
    name = topic_name("pident")
    create_topic(clusters.source, t, PARTITIONS)
    produce(clusters.source, t, [_record(i) for i in range(BEFORE)])
    admin = AdminClient({"bootstrap.servers": clusters.source})
    for future in admin.delete_records([TopicPartition(t, 0, DELETED)]).values():
        future.result(30)
    assert _log_starts(clusters.source, t)[0] == DELETED
    doc = _identical(clusters, name, t)
    path = write_pipeline(tmp_path, doc)
    commit_topic = doc["coordination"]["commit"]["topic"]

    def steady_producer(first: int, count: int) -> None:
        step = count // 40
        for base in range(first, first + count, step):
            produce(clusters.source, t, [_record(i) for i in range(base, base + step)])
            time.sleep(0.1)  # pacing the load generator, not synchronisation

    per_kill = DURING // KILLS
    for kill in range(KILLS):
        # Each run gets records of its own to copy while it is killed: a run that copied
        # everything written so far would leave the next one nothing to be killed amid.
        first = BEFORE + kill * per_kill
        writer = threading.Thread(target=steady_producer, args=(first, per_kill))
        writer.start()
        before = sum(committed_progress(clusters.target, commit_topic, name).values())
        proc = K2KProcess(path, tmp_path / f"run-{kill}.log")
        try:
            # Killed once its progress moved on (mid-copy while the writer still writes).
            eventually(
                lambda before=before: (
                    sum(committed_progress(clusters.target, commit_topic, name).values()) > before
                ),
                expected=True,
                timeout=120,
            )
        finally:
            proc.kill()
            writer.join()
        if kill == 0:
            # Aligned at the first start: the fillers were deleted with the moved start.
            assert _log_starts(clusters.target, t)[0] == DELETED
    result = k2k_cli("start", "--until-caught-up", "-v", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert _assert_identical(clusters.source, clusters.target, t) == BEFORE - DELETED + DURING
    progress = latest_progress(clusters.target, doc)
    assert {tp: rec.offset for tp, rec in progress.items()} == {
        (t, p): end for p, end in end_offsets(clusters.source, t).items()
    }
    assert all(rec.mapped_from is None for rec in progress.values())
    # k2k verify compares each target record with the source record at the same offset.
    checked = k2k_cli("verify", "-f", str(path), "--json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["ok"] is True


def _source_with_a_marker(clusters, t: str) -> int:
    """Partition 0: 50 records, a committed transaction of 10 (its marker takes an offset),
    50 more; returns the offset of the marker."""
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"a%d" % i, b"x", [], BASE_TS + i) for i in range(50)])
    produce_transaction(
        clusters.source, t, [(0, b"t%d" % i, b"x", [], BASE_TS + i) for i in range(10)]
    )
    produce(clusters.source, t, [(0, b"b%d" % i, b"x", [], BASE_TS + i) for i in range(50)])
    eventually(lambda: end_offsets(clusters.source, t)[0], expected=111)
    return 60


def test_a_source_gap_stops_identical_offsets_with_one_line_before_writing_it(
    clusters, tmp_path, topic_name
):
    t = topic_name("identgap")
    marker = _source_with_a_marker(clusters, t)
    path = write_pipeline(tmp_path, _identical(clusters, topic_name("pidentgap"), t))
    result = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert f"{t}[0]: source offsets jump from {marker} to {marker + 1}" in lines[0]
    assert "errorHandling.onOffsetGap is 'fail'" in lines[0]
    # Nothing from the gap on was written; what was (the failed batch is abandoned, and
    # copied again by the next start) sits at its source offsets.
    written = read_all(clusters.target, t)[0]
    assert len(written) <= marker
    assert [int(dict(r.headers)["k2k_offset"]) for r in written] == [r.offset for r in written]


def test_map_goes_on_past_a_source_gap_through_offset_mappings(clusters, tmp_path, topic_name):
    t = topic_name("identmap")
    marker = _source_with_a_marker(clusters, t)
    doc = _identical(
        clusters,
        topic_name("pidentmap"),
        t,
        errorHandling={"onOffsetGap": "map"},
    )
    doc["features"]["offsetMapping"] = "enabled"
    doc["offsetMapping"] = {"topic": f"__k2k_offset_mappings-{doc['name']}"}
    path = write_pipeline(tmp_path, doc)
    result = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "offsets no longer identical" in result.stderr
    dst = read_all(clusters.target, t)[0]
    src = read_all(clusters.source, t)[0]
    assert [(r.key, r.value) for r in dst] == [(r.key, r.value) for r in src]
    # Identical up to the marker; one offset lower from there (the marker is not copied).
    assert [r.offset for r in dst] == list(range(110))
    assert [int(dict(r.headers)["k2k_offset"]) for r in dst] == [r.offset for r in src]
    progress = latest_progress(clusters.target, doc)[(t, 0)]
    assert (progress.offset, progress.mapped_from) == (111, marker)
    # Groups fail over exactly: unchanged below the marker, through the mappings past it.
    positions = {"identical": 30, "at-marker": marker, "mapped": 80}
    groups = {kind: f"{doc['name']}-{kind}" for kind in positions}
    for kind, position in positions.items():
        commit_source(clusters, groups[kind], {(t, 0): position})
    app = app_config(clusters, doc["name"], doc["offsetMapping"]["topic"], list(groups.values()))
    assert cli_once(tmp_path, app).returncode == 0
    expected = {"identical": 30, "at-marker": marker, "mapped": 79}
    for kind, group in groups.items():
        assert target_commits(clusters, group) == {(t, 0): expected[kind]}, kind
        assert failover_reads(clusters, group, {(t, 0): positions[kind]}, str)[1:] == (0, 0)


def test_a_foreign_write_on_an_identical_target_partition_stops_the_copy(
    clusters, tmp_path, topic_name
):
    """A record another producer writes to the target partition (what a zombie runner's
    write looks like too) shifts every later record: the first run acknowledged after it
    fails the offset check, and ``k2k start`` stops with one line naming both offsets."""
    t = topic_name("identforeign")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"a%d" % i, b"x", [], BASE_TS + i) for i in range(100)])
    path = write_pipeline(tmp_path, _identical(clusters, topic_name("pidentforeign"), t))
    proc = K2KProcess(path, tmp_path / "foreign.log")
    try:
        eventually(lambda: end_offsets(clusters.target, t).get(0), expected=100, timeout=120)
        produce(clusters.target, t, [(0, b"foreign", b"x", [], None)])  # target offset 100
        produce(clusters.source, t, [(0, b"b%d" % i, b"x", [], BASE_TS + i) for i in range(10)])
        proc.proc.wait(120)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    stderr = proc.output()
    assert proc.proc.returncode != 0
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, stderr
    # The first run after the foreign record: from source offset 100, at target offset 101.
    assert re.search(
        rf"{t}\[0\]: source offsets 100\.\.\d+ were written at {t}\[0\] offsets 101\.\.", lines[0]
    )
    assert "another producer wrote to the target partition" in lines[0]
    # k2k verify compares at the same offsets: the first difference is where identity
    # broke (the foreign record at target offset 100).
    checked = k2k_cli("verify", "-f", str(path), "--all", "--json")
    assert checked.returncode == 1, checked.stderr
    [bad] = [p for p in json.loads(checked.stdout)["partitions"] if not p["ok"]]
    first = bad["differences"][0]
    assert first["targetOffsets"][:1] == [100] or first["sourceOffsets"][:1] == [100], first
    # The stop is remembered in the partition's progress: a restart does not copy on as if
    # the offsets were still identical.
    again = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert again.returncode != 0
    lines = [ln for ln in again.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, again.stderr
    assert f"{t}[0]'s progress says they ended at source offset 100" in lines[0]


def test_a_route_into_the_heartbeats_topic_is_refused_when_heartbeats_are_emitted(
    clusters, tmp_path, topic_name
):
    """k2k's own heartbeats would take offsets in that target topic."""
    t = topic_name("identhb")
    create_topic(clusters.source, t, 1)
    doc = _identical(
        clusters,
        topic_name("pidenthb"),
        t,
        source={"alias": "a"},
        target={"alias": "b"},
    )
    doc["features"]["heartbeats"] = "enabled"
    doc["replication"][1]["sink"]["topic"] = {"map": {t: "heartbeats"}}
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [
        f"error: offsets: identical: source topic {t!r} is routed to 'heartbeats', where "
        "features.heartbeats writes k2k's own heartbeats, so its offsets cannot stay "
        "identical; route it elsewhere, exclude it, or disable features.heartbeats"
    ], result.stderr


@pytest.mark.parametrize("on_gap", ["fail", "map"])
def test_a_transaction_arriving_mid_copy(clusters, tmp_path, topic_name, on_gap):
    """A running ``k2k start`` meets a source transaction: under ``fail`` it stops with one
    line naming the offset, before writing past it; under ``map`` it goes on, and a group
    positioned past the transaction fails over exactly through the mappings."""
    t = topic_name(f"identlive{on_gap}")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"a%d" % i, b"x", [], BASE_TS + i) for i in range(50)])
    doc = _identical(clusters, topic_name(f"pidentlive{on_gap}"), t)
    if on_gap == "map":
        doc["errorHandling"] = {"onOffsetGap": "map"}
        doc["features"]["offsetMapping"] = "enabled"
        doc["offsetMapping"] = {"topic": f"__k2k_offset_mappings-{doc['name']}"}
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "live.log")
    try:
        eventually(lambda: end_offsets(clusters.target, t).get(0), expected=50, timeout=120)
        produce_transaction(
            clusters.source, t, [(0, b"t%d" % i, b"x", [], BASE_TS + i) for i in range(10)]
        )  # records 50..59, its commit marker at 60
        produce(clusters.source, t, [(0, b"b%d" % i, b"x", [], BASE_TS + i) for i in range(50)])
        if on_gap == "fail":
            proc.proc.wait(120)
        else:
            eventually(lambda: end_offsets(clusters.target, t).get(0), expected=110, timeout=120)
            eventually(
                lambda: latest_progress(clusters.target, doc)[(t, 0)].mapped_from,
                expected=60,
                timeout=60,
            )
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    src = read_all(clusters.source, t)[0]
    dst = read_all(clusters.target, t)[0]
    if on_gap == "fail":
        errors = [ln for ln in proc.output().splitlines() if ln.startswith("error:")]
        assert proc.proc.returncode != 0 and len(errors) == 1, proc.output()[-3000:]
        assert f"{t}[0]: source offsets jump from 60 to 61" in errors[0]
        assert len(dst) <= 60  # nothing from the gap on
        assert [int(dict(r.headers)["k2k_offset"]) for r in dst] == [r.offset for r in dst]
        return
    assert [(r.key, r.value) for r in dst] == [(r.key, r.value) for r in src]
    group = f"{doc['name']}-group"
    commit_source(clusters, group, {(t, 0): 80})
    app = app_config(clusters, doc["name"], doc["offsetMapping"]["topic"], [group])
    assert cli_once(tmp_path, app).returncode == 0
    assert target_commits(clusters, group) == {(t, 0): 79}
    assert failover_reads(clusters, group, {(t, 0): 80}, str)[1:] == (0, 0)
