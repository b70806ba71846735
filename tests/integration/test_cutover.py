"""`k2k cutover`: consumer groups move to the target exactly, in recorded, resumable steps.

Real brokers, real Spark, the real CLI. Source topics: a plain one and a transactional one
with aborted transactions; three groups stopped at random positions on the source.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from k2k.formats import CutoverRecord, read_assignment
from tests.helpers.eos import mixed_workload
from tests.helpers.groups import commit_random_positions, failover_reads, target_commits
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline

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
    doc["groups"] = {"consumerGroups": groups}  # the app's key: the groups to move
    return write_pipeline(tmp_path, doc)


def _cutover(path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return k2k_cli("cutover", "-f", str(path), "--quiet-period", "1s", *args, timeout=timeout)


def _report(result: subprocess.CompletedProcess) -> dict:
    assert result.stdout.strip(), result.stderr[-3000:]
    return json.loads(result.stdout)


def _cutover_records(target: str, topic: str) -> list[CutoverRecord]:
    recs = []
    for rs in read_all(target, topic).values():
        for r in rs:
            read = read_assignment(_Msg(r), "fail", None)  # type: ignore[arg-type]
            if read is not None and isinstance(read[1], CutoverRecord):
                recs.append(read[1])
    return recs


class _Msg:
    """A read record in the shape read_assignment takes."""

    def __init__(self, rec) -> None:
        self._rec = rec

    def key(self):
        return self._rec.key

    def value(self):
        return self._rec.value

    def topic(self):
        return "assignment"

    def partition(self):
        return 0

    def offset(self):
        return self._rec.offset


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
    before = set(read_all(clusters.target, f"__k2k_assign-{name}"))
    dry = _cutover(path, "--dry-run", "--json")
    assert dry.returncode in (0, 1), dry.stderr[-3000:]
    assert _report(dry)["dryRun"] is True
    assert all(not target_commits(clusters.target, g) for g in groups)
    assert set(read_all(clusters.target, f"__k2k_assign-{name}")) == before

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
            "cutover", "-f", str(path), "--yes", "--quiet-period", "2s", "--timeout", "4s"
        )
    finally:
        stop.set()
        writer.join()
    assert moving.returncode == 1
    last = moving.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the source did not stand still within --timeout (4 s): "), last
    assert f"{topic}[0]" in last
