"""`k2k failover`: the source broker is SIGKILLed mid-load; the command stops and fences the
pipeline on the target without the source, reports the recovery point and moves the groups.

Real brokers (the source is the test's own, so killing it disturbs no other test), real
Spark, the real CLI for the replicator, the Offset Mapping app and the failover.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.helpers.groups import commit_random_positions, target_commits
from tests.helpers.kafka import (
    create_topic,
    end_offsets,
    eventually,
    produce,
    produce_bulk,
    read_all,
)
from tests.helpers.pipelines import (
    BASE_TS,
    K2K,
    committed_progress,
    k2k_cli,
    pipeline_dict,
    write_pipeline,
)

pytestmark = pytest.mark.integration

#: Records on the source when its broker dies, most of them not replicated yet.
BACKLOG = 200_000

#: The failover returns within this (members in an outage wait notice the record within a
#: second; fencing and the groups' pass take a few more).
BOUND_S = 60


def test_failover_after_the_source_broker_is_killed(
    clusters, own_source, tmp_path, topic_name, group_name, running_pipeline
):
    source, target = own_source.bootstrap, clusters.target
    name, topic = topic_name("fo"), topic_name("fo-data")
    create_topic(source, topic, 3)
    produce(source, topic, [(i % 3, b"k", b"v-%d" % i, None, BASE_TS + i) for i in range(900)])
    # The load the broker dies under: a backlog the replicator is copying (every progress
    # record it writes carries the end it saw, which is the backlog's), slowly: tiny record
    # batches and tiny fetches.
    produce_bulk(source, topic, BACKLOG, 3, **{"batch.size": 200, "linger.ms": 0})
    held = end_offsets(source, topic)
    groups = [group_name(f"fo{i}") for i in range(3)]
    positions = commit_random_positions(source, groups, [topic], seed=46)

    doc = pipeline_dict(
        clusters,
        name,
        [topic],
        features={"exactlyOnce": "enabled", "offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_maps-{name}"},
        coordination={"assignment": {"topic": f"__k2k_assign-{name}", "graceWindow": "5 seconds"}},
    )
    doc["source"]["kafka"]["common"]["bootstrap.servers"] = source
    doc["source"]["kafka"]["consumer"] = {
        "max.partition.fetch.bytes": "1024",
        "fetch.max.bytes": "4096",
        "message.max.bytes": "4096",
    }
    path = write_pipeline(tmp_path, doc)
    overlay = write_pipeline(
        tmp_path, {"groups": {"consumerGroups": groups, "pollInterval": "1 second"}}, "groups.yaml"
    )
    files = ["-f", str(path), "-f", str(overlay)]
    app = subprocess.Popen(
        [*K2K, "offset-mapping", "start", *files],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        member = running_pipeline(path, lambda got: sum(got.values()) > 1500)
        eventually(
            lambda: all(len(target_commits(target, g)) == 3 for g in groups),
            expected=True,
            timeout=120,
            interval=0.3,
        )
        # A zombie: the member freezes mid-copy (open transactions, claims held) and only
        # resumes after the failover returned.
        member.signal_tree(signal.SIGSTOP)
        os.kill(own_source.pid, signal.SIGKILL)
    finally:
        app.terminate()
        app.wait(60)

    started = time.monotonic()
    result = k2k_cli("failover", *files, "--yes", "--json", timeout=BOUND_S * 3)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert took < BOUND_S, f"failover took {took:.1f} s"
    report = json.loads(result.stdout)
    assert report["cutover"]["steps"] == ["cut", "drain", "stop", "groups"]

    # The recovery point: exactly what the source held beyond the committed progress.
    progress = committed_progress(target, f"__k2k_progress-{name}", name)
    truth = {p: held[p] - progress[(topic, p)] for p in range(3)}
    assert sum(truth.values()) > 0, "the replicator had caught up before the kill"
    for row in report["recovery"]["partitions"]:
        assert row["committed"] == progress[(row["topic"], row["partition"])]
        assert row["lastSeenEnd"] == held[row["partition"]]
        assert row["notReplicated"] == truth[row["partition"]]
    assert report["recovery"]["total"]["notReplicated"] == sum(truth.values())

    # No member writes after the command returned: the zombie resumes, is fenced, reads the
    # record and ends; the target stands still all along.
    ends = end_offsets(target, topic, "read_uncommitted")
    member.signal_tree(signal.SIGCONT)
    eventually(lambda: member.proc.poll(), expected=0, timeout=90)
    assert "failed over to the target by k2k failover" in member.output()
    assert end_offsets(target, topic, "read_uncommitted") == ends

    # Exactly-once: the target holds the committed source records, in order, nothing else.
    dst = read_all(target, topic)
    for p in range(3):
        assert len(dst[p]) == progress[(topic, p)]
    # Groups at their last exact positions: the next record is the one they would read (the
    # source topic has no gaps, so its k-th record is the target's k-th).
    for group in groups:
        commits = target_commits(target, group)
        for (t, p), position in positions[group].items():
            got = [r.value for r in dst[p] if r.offset >= commits[(t, p)]]
            assert got == [r.value for r in dst[p][position:]], (group, p)
    rows = [r for r in report["positions"] if r["group"] in groups]
    assert rows and {r["confidence"] for r in rows} == {"exact"}

    again = k2k_cli("failover", *files, "--yes")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.startswith(f"pipeline {name}: already failed over at ")
