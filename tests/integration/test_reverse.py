"""`k2k start --reverse`: failback copies back exactly what was written to the target since
the cut-over, under the original names, and nothing else.

Real brokers, real Spark, the real CLI. The forward pipeline renames with a prefix and runs
exactly-once with offset mapping; after `k2k cutover`, applications write to the target
(plain records and transactions, some aborted), then the reverse run copies them back.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from k2k.config import load_pipeline
from k2k.migration.fork import fork_point
from tests.helpers.eos import mixed_workload
from tests.helpers.groups import commit_random_positions, failover_reads
from tests.helpers.kafka import (
    Clusters,
    create_topic,
    end_offsets,
    produce,
    produce_transaction,
    read_all,
)
from tests.helpers.pipelines import (
    BASE_TS,
    committed_progress,
    k2k_cli,
    pipeline_dict,
    write_pipeline,
)

pytestmark = pytest.mark.integration

PREFIX = "eu."
PARTITIONS = 4


def _pipeline(tmp_path: Path, clusters, name: str, topics, **sink) -> Path:
    doc = pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled", "offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_maps-{name}"},
        coordination={"assignment": {"topic": f"__k2k_assign-{name}", "graceWindow": "5 seconds"}},
    )
    doc["replication"][1]["sink"].update({"topic": {"prefix": PREFIX}, **sink})
    return write_pipeline(tmp_path, doc)


def _ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def _one_line(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, result.stderr[-4000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr[-4000:]
    return lines[0]


def _contents(records) -> list:
    return [r.content() for r in records]


def test_failback_copies_back_exactly_the_committed_records_written_since_the_cutover(
    clusters, tmp_path, topic_name, group_name
):
    name, topic = topic_name("rv"), topic_name("rv-orders")
    target_topic = PREFIX + topic
    create_topic(clusters.source, topic, PARTITIONS)
    # The last source partition stays empty: k2k never writes to its target partition.
    mixed_workload(clusters.source, topic, 900, PARTITIONS - 1, seed=3, chunk=100, txn_share=0.5)
    # Records already on the target (not the source's) must not go back either.
    create_topic(clusters.target, target_topic, PARTITIONS)
    produce(
        clusters.target,
        target_topic,
        [(p, b"old", b"old", None, None) for p in range(PARTITIONS)] * 2,
    )
    path = _pipeline(tmp_path, clusters, name, [topic])

    _ok(k2k_cli("start", "-f", str(path), "--until-caught-up"))
    no_group = group_name("none")  # no consumer group to move: the records are the point
    _ok(k2k_cli("cutover", "-f", str(path), "--yes", "--quiet-period", "1s", "--groups", no_group))
    fork = fork_point(load_pipeline([path]))
    assert fork is not None and fork.by == "cutover"
    ends = {p: fork.offsets[(target_topic, p)] for p in range(PARTITIONS)}
    source_before = read_all(clusters.source, topic)

    # Applications now write to the target: plain and transactional, a third aborted.
    counts = mixed_workload(
        clusters.target, target_topic, 600, PARTITIONS, seed=11, chunk=40, txn_share=0.6
    )
    assert counts["aborted"] > 0 and counts["committed"] > 0 and counts["plain"] > 0
    written = counts["plain"] + counts["committed"]
    on_target = read_all(clusters.target, target_topic)
    new = {p: [r for r in on_target[p] if r.offset >= ends[p]] for p in on_target}
    assert sum(len(rs) for rs in new.values()) == written

    shown = _ok(k2k_cli("validate", "-f", str(path), "--reverse")).stdout
    assert "# reverse of" in shown and "ForkPoint(cutover" in shown
    assert f"group: {name}-reverse" in shown and f"{target_topic}: {topic}" in shown

    _ok(k2k_cli("start", "-f", str(path), "--reverse", "--until-caught-up"))
    source_after = read_all(clusters.source, topic)
    for p in range(PARTITIONS):
        before, after = source_before[p], source_after[p]
        assert _contents(after[: len(before)]) == _contents(before), f"partition {p} changed"
        assert _contents(after[len(before) :]) == _contents(new[p]), f"partition {p}"
    assert sum(len(source_after[p]) - len(source_before[p]) for p in range(PARTITIONS)) == written

    # Progress under the reverse commit group, in the control topic on the original source.
    commit_topic = f"__k2k_progress-{name}"
    target_ends = end_offsets(clusters.target, target_topic, "read_committed")
    progress = committed_progress(clusters.source, commit_topic, f"{name}-reverse")
    assert progress == {(target_topic, p): end for p, end in target_ends.items()}
    assert committed_progress(clusters.source, commit_topic, name) == {}

    # A second run continues from its progress: only what was written since goes back.
    produce(clusters.target, target_topic, [(1, b"late", b"late-1", None, BASE_TS)])
    produce_transaction(clusters.target, target_topic, [(2, b"late", b"late-2", None, BASE_TS)])
    produce_transaction(
        clusters.target, target_topic, [(0, b"late", b"aborted", None, BASE_TS)], outcome="abort"
    )
    _ok(k2k_cli("start", "-f", str(path), "--reverse", "--until-caught-up"))
    again = read_all(clusters.source, topic)
    assert _contents(again[0]) == _contents(source_after[0])
    for p, value in ((1, b"late-1"), (2, b"late-2")):
        assert _contents(again[p][:-1]) == _contents(source_after[p])
        assert (again[p][-1].key, again[p][-1].value) == (b"late", value)

    # Cutting back: a group of the applications on the target moves to the original source,
    # each partition's next record there being the one it would have read next.
    group = group_name("rv-app")
    positions = {(target_topic, p): rs[len(rs) // 2].offset for p, rs in new.items()}
    commit_random_positions(clusters.target, [group], [target_topic], seed=46, fixed=positions)
    back = _ok(
        k2k_cli(
            "cutover",
            "-f",
            str(path),
            "--reverse",
            "--yes",
            "--json",
            "--quiet-period",
            "1s",
            "--groups",
            group,
        )
    )
    report = json.loads(back.stdout)
    assert report["cutover"]["steps"] == ["cut", "drain", "stop", "groups"]
    assert {row["confidence"] for row in report["positions"]} == {"exact"}
    swapped = Clusters(source=clusters.target, target=clusters.source)
    expected, skipped, read_again = failover_reads(swapped, group, positions, lambda _t: topic)
    assert (skipped, read_again) == (0, 0) and expected > 0


def test_a_route_that_does_not_invert_is_one_line_exit_2(clusters, tmp_path, topic_name):
    name, topic = topic_name("rvs"), topic_name("rvs-orders")
    path = _pipeline(tmp_path, clusters, name, [topic], topic="all-events")
    line = _one_line(k2k_cli("start", "-f", str(path), "--reverse", "--until-caught-up"), 2)
    assert line.startswith("error: replication.sink.topic: a static topic name cannot be reversed")
    assert "got 'all-events'; expected" in line
    line = _one_line(k2k_cli("validate", "-f", str(path), "--reverse"), 2)
    assert line.startswith("error: replication.sink.topic:")


def test_without_a_recorded_fork_the_reverse_run_refuses_in_one_line(
    clusters, tmp_path, topic_name
):
    name, topic = topic_name("rvn"), topic_name("rvn-orders")
    create_topic(clusters.source, topic, 1)
    create_topic(clusters.target, PREFIX + topic, 1)
    path = _pipeline(tmp_path, clusters, name, [topic])
    line = _one_line(k2k_cli("start", "-f", str(path), "--reverse", "--until-caught-up"), 1)
    assert line.startswith(f"error: no finished cut-over or failover of pipeline {name!r}")
    assert f"__k2k_assign-{name}" in line
