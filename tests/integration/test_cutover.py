"""`k2k cutover`: consumer groups move to the target exactly, in recorded, resumable steps.

Real brokers, real Spark, the real CLI. Source topics: a plain one and a transactional one
with aborted transactions; three groups stopped at random positions on the source.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from k2k.formats import CutoverRecord, decode_assignment
from tests.helpers.eos import mixed_workload
from tests.helpers.groups import commit_random_positions, failover_reads, target_commits
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, K2K, k2k_cli, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration

GROUPS = 3


def _topics(clusters, topic_name) -> list[str]:
    plain, txn = topic_name("co-plain"), topic_name("co-txn")
    create_topic(clusters.source, plain, 3)
    produce(
        clusters.source,
        plain,
        [(i % 3, b"k%d" % i, b"plain-%d" % i, None, BASE_TS + i) for i in range(1500)],
    )
    create_topic(clusters.source, txn, 2)
    mixed_workload(clusters.source, txn, 1500, 2, chunk=100, txn_share=0.6)
    # Records already on the target shift every target offset away from the source's.
    for t, n in ((plain, 3), (txn, 2)):
        create_topic(clusters.target, t, n)
        produce(clusters.target, t, [(p, b"old", b"old-%d" % p, None, None) for p in range(n)] * 3)
    return [plain, txn]


def _pipeline(tmp_path: Path, clusters, name: str, topics: list[str], groups, eos: bool) -> Path:
    doc = pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled" if eos else "disabled", "offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_maps-{name}"},
        coordination={"assignment": {"topic": f"__k2k_assign-{name}", "graceWindow": "5 seconds"}},
    )
    # The groups to move: the Offset Mapping app's key, in an overlay (k2k start refuses it).
    write_pipeline(tmp_path, {"groups": {"consumerGroups": groups}}, "groups.yaml")
    return write_pipeline(tmp_path, doc)


def _files(path: Path) -> list[str]:
    return ["-f", str(path), "-f", str(path.with_name("groups.yaml"))]


def _cutover(path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return k2k_cli("cutover", *_files(path), "--quiet-period", "1s", *args, timeout=timeout)


def _report(result: subprocess.CompletedProcess) -> dict:
    assert result.stdout.strip(), result.stderr[-3000:]
    return json.loads(result.stdout)


def _cutover_records(target: str, topic: str) -> list[CutoverRecord]:
    """Every cut-over record in the assignment topic, in log order per partition."""
    found = []
    for rs in read_all(target, topic).values():
        for r in rs:
            read = decode_assignment(r.key, r.value, f"{topic}@{r.offset}")
            if read is not None and isinstance(read[1], CutoverRecord):
                found.append(read[1])
    return found


def _target_topics(clusters) -> set[str]:
    """The target's topics but the brokers' own (a reader's group coordinator lookup makes
    the brokers create ``__consumer_offsets``; no record is written to it)."""
    topics = AdminClient({"bootstrap.servers": clusters.target}).list_topics(timeout=30).topics
    return set(topics) - {"__consumer_offsets"}


def _assert_exact_failover(clusters, report: dict, positions, groups) -> None:
    for row in report["positions"]:
        assert row["confidence"] == "exact", row
    for group in groups:
        expected, skipped, again = failover_reads(clusters, group, positions[group], str)
        assert (skipped, again) == (0, 0), f"{group}: {skipped} skipped, {again} read again"
        assert expected > 0


def test_cutover_without_a_running_member_copies_up_to_the_cut_and_resumes(
    clusters, tmp_path, topic_name, group_name
):
    name = topic_name("coa")
    topics = _topics(clusters, topic_name)
    groups = [group_name(f"coa{i}") for i in range(GROUPS)]
    positions = commit_random_positions(clusters.source, groups, topics, seed=45)
    path = _pipeline(tmp_path, clusters, name, topics, groups, eos=True)

    # A dry run before anything ran: nothing is written anywhere.
    before = _target_topics(clusters)
    dry = _cutover(path, "--dry-run", "--json")
    assert dry.returncode in (0, 1), dry.stderr[-3000:]
    assert _report(dry)["dryRun"] is True
    assert all(not target_commits(clusters.target, g) for g in groups)
    assert _target_topics(clusters) == before  # no control topic created either

    # Without --yes: the plan, one line, nothing written.
    plan = _cutover(path)
    assert plan.returncode == 1
    assert plan.stderr.strip().splitlines()[-1] == (
        "error: nothing written: add --yes to cut over (or --dry-run for the report)"
    )
    assert "cut-over plan" in plan.stdout

    done = _cutover(path, "--yes", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = _report(done)
    assert report["cutover"]["steps"] == ["cut", "drain", "stop", "groups"]
    assert {c["sourceRecords"] for c in report["counts"]} == {
        c["targetRecords"] for c in report["counts"]
    }
    for c in report["counts"]:
        assert c["sourceRecords"] == c["targetRecords"], c
    _assert_exact_failover(clusters, report, positions, groups)

    again = _cutover(path, "--yes", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    second = _report(again)
    assert second["alreadyCutOver"] is True
    assert second["positions"] == report["positions"]


def test_refusals_are_one_line(clusters, tmp_path, topic_name, group_name):
    name = topic_name("cor")
    topic = topic_name("co-ref")
    create_topic(clusters.source, topic, 1)
    produce(clusters.source, topic, [(0, b"k", b"v%d" % i, None, None) for i in range(10)])
    group = group_name("cor")
    path = _pipeline(tmp_path, clusters, name, [topic], [group], eos=False)

    doc_off = path.read_text().replace("offsetMapping: enabled", "offsetMapping: disabled")
    off = tmp_path / "off.yaml"
    off.write_text(doc_off)
    no_mapping = _cutover(off, "--yes")
    assert no_mapping.returncode == 2
    assert no_mapping.stderr.strip().splitlines() == [
        "error: features.offsetMapping: disabled; expected enabled (a cut-over moves groups "
        "through the offset mappings the pipeline writes)"
    ]

    consumer = Consumer(
        {"bootstrap.servers": clusters.source, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    try:
        eventually(lambda: consumer.poll(0.5) is not None, expected=True, timeout=60)
        active = _cutover(path, "--yes")
    finally:
        consumer.close()
    assert active.returncode == 1
    last = active.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: group '{group}' is still active on the source"), last

    stop = threading.Event()

    def producer() -> None:
        out = Producer({"bootstrap.servers": clusters.source, "linger.ms": 0})
        i = 0
        while not stop.is_set():
            out.produce(topic, b"more-%d" % i, b"k", 0)
            out.flush(10)
            i += 1
            time.sleep(0.1)  # pacing the load, not synchronisation

    writer = threading.Thread(target=producer)
    writer.start()
    try:
        moving = k2k_cli(
            "cutover", *_files(path), "--yes", "--quiet-period", "2s", "--timeout", "4s"
        )
    finally:
        stop.set()
        writer.join()
    assert moving.returncode == 1
    last = moving.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the source did not stand still within --timeout (4 s): "), last
    assert f"{topic}[0]" in last


def _live_producers(clusters, plain: str, txn: str, stop: threading.Event) -> threading.Thread:
    """Plain records on one topic and transactions (one in three aborted) on the other, until
    ``stop``; values unique, so a group's reads can be compared record for record."""

    def run() -> None:
        out = Producer({"bootstrap.servers": clusters.source, "linger.ms": 5})
        tx = Producer({"bootstrap.servers": clusters.source, "transactional.id": f"live-{txn}"})
        tx.init_transactions(30)
        i = 0
        while not stop.is_set():
            for j in range(20):
                out.produce(plain, b"live-%d-%d" % (i, j), b"k%d" % j, j % 3)
            tx.begin_transaction()
            for j in range(10):
                tx.produce(txn, b"live-txn-%d-%d" % (i, j), b"k%d" % j, j % 2)
            assert tx.flush(30) == 0
            (tx.abort_transaction if i % 3 == 2 else tx.commit_transaction)(30)
            out.flush(30)
            i += 1
            time.sleep(0.05)  # pacing the load, not synchronisation

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _partition_reads(clusters, group: str, tp, position: int, report: dict) -> tuple[int, int]:
    """What ``group`` reads on the target from its translated commit on ``tp``, against what it
    had not read on the source: (skipped, read again)."""
    row = next(
        r for r in report["positions"] if (r["group"], r["topic"], r["partition"]) == (group, *tp)
    )
    commits = target_commits(clusters.target, group)
    assert commits[(row["targetTopic"], row["targetPartition"])] == row["targetOffset"], row
    src = read_all(clusters.source, tp[0])[tp[1]]
    dst = read_all(clusters.target, row["targetTopic"])[row["targetPartition"]]
    expected = [r.value for r in src if r.offset >= position]
    got = [r.value for r in dst if r.offset >= row["targetOffset"]]
    missing = set(expected) - set(got)
    return len(missing), len(got) - len(expected) + len(missing)


@pytest.mark.parametrize("eos", [True, False], ids=["exactly-once", "at-least-once"])
def test_cutover_drill_with_a_live_producer_and_a_running_member(
    clusters, tmp_path, topic_name, group_name, running_pipeline, eos
):
    name = topic_name("cod")
    topics = _topics(clusters, topic_name)
    groups = [group_name(f"cod{i}") for i in range(GROUPS)]
    positions = commit_random_positions(clusters.source, groups, topics, seed=46)
    path = _pipeline(tmp_path, clusters, name, topics, groups, eos=eos)
    stop = threading.Event()
    writer = _live_producers(clusters, *topics, stop)
    try:
        member = running_pipeline(path, lambda got: sum(got.values()) > 1000)
        dry = _cutover(path, "--dry-run", "--json")
        assert dry.returncode in (0, 1), dry.stderr[-3000:]
        assert {r["group"] for r in _report(dry)["positions"]} == set(groups)
        assert _cutover_records(clusters.target, f"__k2k_assign-{name}") == []
        assert all(not target_commits(clusters.target, g) for g in groups)
    finally:
        stop.set()
        writer.join()

    result = _cutover(path, "--yes", "--json", "--allow-lower-bounds")
    assert result.returncode == 0, result.stderr[-3000:]
    report = _report(result)
    eventually(lambda: member.proc.poll(), expected=0, timeout=60)
    assert "cut over" in member.output()
    (record,) = _cutover_records(clusters.target, f"__k2k_assign-{name}")[-1:]
    assert record.done
    for c in report["counts"]:
        assert c["sourceRecords"] == c["targetRecords"], c
    for group in groups:
        for tp, position in sorted(positions[group].items()):
            skipped, again = _partition_reads(clusters, group, tp, position, report)
            row = next(
                r
                for r in report["positions"]
                if (r["group"], r["topic"], r["partition"]) == (group, *tp)
            )
            assert skipped == 0, row
            if row["confidence"] == "exact":
                assert again == 0, row
            else:
                assert row["confidence"] == "lower-bound" and not eos, row
                assert row["reread"] is None or again <= row["reread"], row
    if eos:
        assert {r["confidence"] for r in report["positions"]} == {"exact"}


def test_a_cutover_killed_after_the_drain_resumes_and_ends_with_the_same_report(
    clusters, tmp_path, topic_name, group_name, running_pipeline
):
    """The member is frozen once caught up, so the stop step waits out its grace window:
    the command is killed there, deterministically, right after it recorded the drain."""
    name = topic_name("cok")
    topics = _topics(clusters, topic_name)
    groups = [group_name(f"cok{i}") for i in range(GROUPS)]
    positions = commit_random_positions(clusters.source, groups, topics, seed=47)
    path = _pipeline(tmp_path, clusters, name, topics, groups, eos=True)
    ends = {
        (t, p): rs[-1].offset + 1 for t in topics for p, rs in read_all(clusters.source, t).items()
    }
    member = running_pipeline(
        path, lambda got: all(got.get(tp, 0) >= end for tp, end in ends.items())
    )
    before = _report(_cutover(path, "--dry-run", "--json", "--no-count"))
    member.signal_tree(signal.SIGSTOP)
    assignment = f"__k2k_assign-{name}"
    command = subprocess.Popen(
        [*K2K, "cutover", *_files(path), "--yes", "--quiet-period", "1s"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(
            lambda: any(r.drained for r in _cutover_records(clusters.target, assignment)),
            expected=True,
            timeout=120,
            interval=0.1,
        )
    finally:
        command.kill()
        command.wait(30)
        member.signal_tree(signal.SIGCONT)
    assert _cutover_records(clusters.target, assignment)[-1].steps == ("cut", "drain")

    resumed = _cutover(path, "--yes", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = _report(resumed)
    assert report["cutover"]["steps"] == ["cut", "drain", "stop", "groups"]
    assert report["positions"] == before["positions"]
    _assert_exact_failover(clusters, report, positions, groups)
    eventually(lambda: member.proc.poll(), expected=0, timeout=60)

    third = _cutover(path, "--yes")
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stdout.startswith(f"pipeline {name}: already cut over at ")
