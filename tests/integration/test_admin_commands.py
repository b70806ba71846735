"""``k2k status`` and ``k2k offsets`` against real brokers: the numbers they report, that
status writes nothing, and that moved positions are where the next start replicates from."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from k2k.formats import MetricsRecord
from tests.helpers.kafka import create_topic, eventually, produce, read_all, when_ready
from tests.helpers.pipelines import (
    BASE_TS,
    K2K,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)

pytestmark = pytest.mark.integration

HOST = socket.gethostname()
#: The member name of a planner run inside this test process (the default, host-pid).
IN_PROCESS_MEMBER = f"{HOST}-{os.getpid()}"


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real ``k2k`` CLI with no terminal on stdin (so it never asks for confirmation)."""
    return subprocess.run(
        [*K2K, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def ok(*args: str) -> str:
    result = cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess, code: int) -> str:
    """The single ``error: ...`` line of a deliberate failure with exit ``code``."""
    assert result.returncode == code, (result.returncode, result.stderr[-3000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def status(path: Path) -> dict[str, Any]:
    return json.loads(ok("status", "--json", "-f", str(path)))


def by_partition(doc: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(p["topic"], p["partition"]): p for p in doc["partitions"]}


def positions(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    doc = json.loads(ok("offsets", "describe", "--json", "-f", str(path)))
    return {(p["topic"], p["partition"]): p for p in doc["positions"]}


def offsets_of(path: Path) -> dict[tuple[str, int], int]:
    return {tp: p["offset"] for tp, p in positions(path).items()}


def pipeline(
    clusters, name: str, topics: list[str], *, eos: bool = False, grace: str = "5 seconds"
):
    return pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled"} if eos else {},
        coordination={
            "assignment": {"topic": f"__k2k_assignment-{name}", "graceWindow": grace},
        },
    )


def cluster_state(
    bootstrap: str, mine: Callable[[str], bool]
) -> tuple[dict[tuple[str, int], int], set[str]]:
    """The high watermark of every partition of the topics ``mine`` names, and the consumer
    groups it names: anything the pipeline's commands write changes one of them. Limited
    to the pipeline's own, so a process of another test cannot make a difference."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=30)
    request = {
        TopicPartition(t, p): OffsetSpec.latest()
        for t, tmd in md.topics.items()
        if mine(t)
        for p in tmd.partitions
    }

    def high_watermarks() -> dict[tuple[str, int], int]:
        futures = admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=30
        )
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    ends = when_ready(high_watermarks)
    listed = admin.list_consumer_groups(request_timeout=30).result().valid
    return ends, {g.group_id for g in listed if mine(g.group_id)}


def offsets_topic_created(bootstrap: str) -> None:
    """Make the broker create ``__consumer_offsets`` if it has not yet. It does so lazily,
    on the first coordinator lookup of any client with a group id, which librdkafka
    consumers (k2k's assigned readers too) always make; on a fresh test cluster that would
    look like a topic created by the command under test."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    probe = admin.describe_consumer_groups(["k2k-test-probe"], request_timeout=30)
    with contextlib.suppress(KafkaException):  # NOT_COORDINATOR while the topic is created
        probe["k2k-test-probe"].result()
    eventually(lambda: "__consumer_offsets" in admin.list_topics(timeout=30).topics, timeout=60)


def records(n: int, partitions: int, ts: int, step_ms: int = 1) -> list:
    """``n`` records per partition, key ``k<p>-<i>``, timestamps ``ts + i * step_ms``."""
    return [
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [], ts + i * step_ms)
        for i in range(n)
        for p in range(partitions)
    ]


# -- status ----------------------------------------------------------------------------------


def test_status_of_a_stopped_pipeline_reports_lag_and_writes_nothing(
    clusters, spark, tmp_path, topic_name
):
    t = topic_name("st")
    name = topic_name("pst")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, records(15, 2, BASE_TS))
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t]))
    doc = pipeline(clusters, name, [t])

    # Never started: no control topics (and status creates none), everything behind.
    offsets_topic_created(clusters.source)
    offsets_topic_created(clusters.target)

    def mine(name_: str) -> bool:
        """The pipeline's topics and groups (its control topics and readers carry its name),
        and the offsets topic a group commit would write to."""
        return name_ in (t, "__consumer_offsets") or name in name_

    def state() -> tuple:
        return cluster_state(clusters.source, mine), cluster_state(clusters.target, mine)

    before = state()
    fresh = status(path)
    assert fresh["members"] == []
    for p in (0, 1):
        part = by_partition(fresh)[(t, p)]
        assert part["committed"] is None and part["owner"] is None
        assert (part["position"], part["end"], part["recordsBehind"]) == (0, 15, 15)
        assert part["lagSeconds"] >= 3600  # the first record is BASE_TS, an hour old
    assert state() == before

    run_until_caught_up(spark, tmp_path, doc)
    caught_up = status(path)
    assert caught_up["pipeline"] == name and caught_up["exactlyOnce"] is False
    [member] = caught_up["members"]
    assert member["member"] == IN_PROCESS_MEMBER
    assert (member["state"], member["host"], member["standby"]) == ("left", HOST, False)
    replicated = {p: len(recs) for p, recs in read_all(clusters.target, t).items()}
    for p in (0, 1):
        part = by_partition(caught_up)[(t, p)]
        assert part["committed"] == replicated[p] == part["end"] == 15
        assert (part["recordsBehind"], part["lagSeconds"]) == (0, 0.0)
        assert part["committedBy"] == IN_PROCESS_MEMBER
        assert part["owner"]["member"] == IN_PROCESS_MEMBER and part["owner"]["released"]
    assert caught_up["totals"] == {
        "partitions": 2,
        "recordsBehind": 0,
        "maxLagSeconds": 0.0,
        "membersAlive": 0,
        "problems": 0,
        "foreignRecords": 0,
    }

    # Ten records behind on partition 0, the oldest two minutes old.
    two_minutes_ago = int(time.time() * 1000) - 120_000
    produce(clusters.source, t, [(0, b"late", b"x", [], two_minutes_ago + i) for i in range(10)])
    before = state()
    behind = status(path)
    late = by_partition(behind)[(t, 0)]
    assert (late["committed"], late["end"], late["recordsBehind"]) == (15, 25, 10)
    assert 119 <= late["lagSeconds"] < 200
    assert by_partition(behind)[(t, 1)]["recordsBehind"] == 0
    assert behind["totals"]["recordsBehind"] == 10
    assert behind["totals"]["maxLagSeconds"] == late["lagSeconds"]

    table = ok("status", "-f", str(path))
    assert "MEMBER" in table and "LAG" in table and IN_PROCESS_MEMBER in table
    assert "total: 2 partitions, 10 records behind" in table
    # Neither cluster saw a write: no record, no topic, no consumer group.
    assert state() == before


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_status_of_a_running_pipeline_and_refusal_to_move_its_positions(
    clusters, tmp_path, topic_name, running_pipeline, mode
):
    eos = mode == "exactly-once"
    t = topic_name("run")
    name = topic_name("prun")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, records(10, 2, BASE_TS))
    # A long grace window: a member slowed down by a loaded machine must not look dead and
    # let the refusal pass.
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t], eos=eos, grace="60 seconds"))
    copied = {(t, 0): 10, (t, 1): 10}
    proc = running_pipeline(path, copied, "--instance", "inst-a", timeout=240)
    try:

        def running() -> dict[str, Any]:
            doc = status(path)
            parts = by_partition(doc)
            if not all(parts[(t, p)]["owner"] and parts[(t, p)]["committed"] == 10 for p in (0, 1)):
                return {}
            # Heartbeats every 2 s: a fresh one shows within a few polls.
            if not doc["members"] or doc["members"][0]["ageSeconds"] >= 3:
                return {}
            return doc

        doc = eventually(running, timeout=60, interval=0.5)
        [member] = doc["members"]
        assert (member["member"], member["state"], member["host"]) == ("inst-a", "alive", HOST)
        assert member["standby"] is False and 0 <= member["ageSeconds"] < 3
        replicated = {p: len(recs) for p, recs in read_all(clusters.target, t).items()}
        for p in (0, 1):
            part = by_partition(doc)[(t, p)]
            assert part["committed"] == replicated[p] == 10
            assert (part["end"], part["recordsBehind"], part["lagSeconds"]) == (10, 0, 0.0)
            owner = part["owner"]
            assert (owner["member"], owner["released"]) == ("inst-a", False)
            if eos:
                assert owner["transactionalId"].startswith(f"k2k-{name}-inst-a-")
            else:
                assert owner["transactionalId"] is None
        assert doc["totals"]["membersAlive"] == 1

        refused = cli("offsets", "set", "-f", str(path), "--topic", t, "--to-earliest", "--yes")
        line = one_line_error(refused, 1)
        assert f"members of pipeline {name} are alive: inst-a on {HOST}" in line
        assert offsets_of(path) == {(t, 0): 10, (t, 1): 10}
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]
    gone = status(path)
    assert [(m["member"], m["state"]) for m in gone["members"]] == [("inst-a", "left")]
    assert all(p["owner"]["released"] for p in gone["partitions"])


# -- offsets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_offsets_set_then_start_replicates_from_the_new_position(
    clusters, spark, tmp_path, topic_name, mode
):
    eos = mode == "exactly-once"
    t = topic_name("set")
    name = topic_name("pset")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, records(20, 2, BASE_TS))
    doc = pipeline(clusters, name, [t], eos=eos)
    path = write_pipeline(tmp_path, doc)
    run_until_caught_up(spark, tmp_path, doc)

    described = positions(path)
    assert {tp: p["offset"] for tp, p in described.items()} == {(t, 0): 20, (t, 1): 20}
    assert all(p["committedBy"] == IN_PROCESS_MEMBER for p in described.values())
    assert all(p["pipeline"] == name for p in described.values())
    assert "WRITTEN AT" in ok("offsets", "describe", "-f", str(path))

    out = ok(
        "offsets",
        "set",
        "-f",
        str(path),
        "--topic",
        t,
        "--partition",
        "0",
        "--offset",
        "5",
        "--yes",
    )
    assert f"{t}[0]: 20 -> 5" in out and "wrote 1 committed position" in out
    moved = positions(path)
    assert (moved[(t, 0)]["offset"], moved[(t, 0)]["committedBy"]) == (5, "k2k-offsets")
    assert moved[(t, 1)] == described[(t, 1)]
    # The tool claimed the partition like a member, and released it again.
    owner = by_partition(status(path))[(t, 0)]["owner"]
    assert (owner["member"], owner["released"]) == ("k2k-offsets", True)
    assert owner["transactionalId"] == (f"k2k-{name}-k2k-offsets-0" if eos else None)

    result = cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    assert [r.content() for r in dst[0]] == [r.content() for r in src[0] + src[0][5:]]
    assert [r.content() for r in dst[1]] == [r.content() for r in src[1]]
    assert offsets_of(path) == {(t, 0): 20, (t, 1): 20}


def test_offsets_by_timestamp_earliest_latest_and_reset_before_a_first_start(
    clusters, tmp_path, topic_name
):
    t1, t2 = topic_name("ts1"), topic_name("ts2")
    name = topic_name("pts")
    create_topic(clusters.source, t1, 2)
    create_topic(clusters.source, t2, 1)
    produce(clusters.source, t1, records(10, 2, BASE_TS, step_ms=1000))
    produce(clusters.source, t2, records(5, 1, BASE_TS))
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t1, t2]))

    # No control topics yet: set creates them, as a first start would.
    out = ok(
        "offsets",
        "set",
        "-f",
        str(path),
        "--topic",
        t1,
        "--to-timestamp",
        str(BASE_TS + 3000),
        "--yes",
    )
    assert f"{t1}[0]: none -> 3" in out and f"{t1}[1]: none -> 3" in out
    assert offsets_of(path) == {(t1, 0): 3, (t1, 1): 3}

    iso = datetime.fromtimestamp((BASE_TS + 6500) / 1000, UTC).isoformat()
    ok(
        "offsets",
        "set",
        "-f",
        str(path),
        "--topic",
        t1,
        "--partition",
        "1",
        "--to-timestamp",
        iso,
        "--yes",
    )
    assert offsets_of(path) == {(t1, 0): 3, (t1, 1): 7}

    future = str(int(time.time() * 1000) + 3_600_000)
    ok(
        "offsets",
        "set",
        "-f",
        str(path),
        "--topic",
        t1,
        "--partition",
        "0",
        "--to-timestamp",
        future,
        "--yes",
    )
    assert offsets_of(path) == {(t1, 0): 10, (t1, 1): 7}

    ok("offsets", "reset", "-f", str(path), "--topic", t1, "--partition", "0", "--yes")
    assert offsets_of(path) == {(t1, 0): 0, (t1, 1): 7}

    ok("offsets", "set", "-f", str(path), "--all-topics", "--to-latest", "--yes")
    assert offsets_of(path) == {(t1, 0): 10, (t1, 1): 10, (t2, 0): 5}

    out = ok("offsets", "set", "-f", str(path), "--all-topics", "--to-latest", "--yes")
    assert "nothing to change" in out

    ok("offsets", "reset", "-f", str(path), "--all-topics", "--yes")
    assert offsets_of(path) == {(t1, 0): 0, (t1, 1): 0, (t2, 0): 0}
    assert all(p["committedBy"] == "k2k-offsets" for p in positions(path).values())


def test_offsets_need_yes_and_refuse_bad_input_in_one_line(clusters, tmp_path, topic_name):
    t, other = topic_name("bad"), topic_name("other")
    name = topic_name("pbad")
    create_topic(clusters.source, t, 2)
    create_topic(clusters.source, other, 1)
    produce(clusters.source, t, records(20, 2, BASE_TS))
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t]))
    f = ("-f", str(path))

    unconfirmed = cli("offsets", "set", *f, "--topic", t, "--partition", "0", "--offset", "4")
    assert one_line_error(unconfirmed, 1) == "error: nothing written: add --yes"
    assert f"{t}[0]: none -> 4" in unconfirmed.stdout
    assert offsets_of(path) == {}

    cases = {
        ("--topic", t, "--partition", "0", "--offset", "21"): (
            f"error: --offset 21: outside the valid range of {t}[0], 0..20 (earliest..latest)"
        ),
        ("--topic", t, "--offset", "-1"): "error: --offset -1: outside the valid range of",
        (
            "--topic",
            "no-such-topic",
            "--to-earliest",
        ): "error: --topic 'no-such-topic': no such topic",
        (
            "--topic",
            other,
            "--to-earliest",
        ): f"error: --topic '{other}': not a topic of pipeline {name}",
        ("--topic", t, "--partition", "2", "--to-earliest"): (
            f"error: --partition 2: topic '{t}' has partitions 0..1"
        ),
        ("--topic", t): "error: give exactly one of --offset O, --to-timestamp",
        ("--topic", t, "--to-earliest", "--to-latest"): "error: give exactly one of --offset O",
        ("--to-earliest",): "error: give exactly one of --topic T or --all-topics",
        (
            "--topic",
            t,
            "--to-timestamp",
            "yesterday",
        ): "error: --to-timestamp 'yesterday': expected",
    }
    for args, expected in cases.items():
        line = one_line_error(cli("offsets", "set", *f, *args, "--yes"), 2)
        assert line.startswith(expected), (args, line)
    assert one_line_error(cli("offsets", "reset", *f, "--partition", "0", "--yes"), 2).startswith(
        "error: give exactly one of --topic T or --all-topics"
    )
    assert offsets_of(path) == {}


def test_force_moves_positions_of_a_member_killed_within_grace_window(
    clusters, tmp_path, topic_name, running_pipeline
):
    t = topic_name("force")
    name = topic_name("pforce")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, records(10, 2, BASE_TS))
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t], eos=True, grace="20 seconds"))
    copied = {(t, 0): 10, (t, 1): 10}
    proc = running_pipeline(path, copied, "--instance", "victim", timeout=240)
    proc.kill()  # like a machine dying: no release, no "left", its heartbeat still recent
    args = ("offsets", "set", "-f", str(path), "--topic", t, "--partition", "0", "--offset", "4")
    line = one_line_error(cli(*args, "--yes"), 1)
    assert f"are alive: victim on {HOST}" in line

    forced = cli(*args, "--yes", "--force", "--verbose")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert f"{t}[0]: 10 -> 4" in forced.stdout
    # It waited for the victim's claim until the victim was dead, then fenced it.
    assert f"fenced k2k-{name}-victim-" in forced.stderr
    assert offsets_of(path) == {(t, 0): 4, (t, 1): 10}
    result = cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    assert [r.content() for r in dst[0]] == [r.content() for r in src[0] + src[0][4:]]
    assert [r.content() for r in dst[1]] == [r.content() for r in src[1]]


def recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again, empty (its offsets start from 0 again)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], request_timeout=30)[topic].result()
    eventually(lambda: topic not in admin.list_topics(timeout=30).topics, timeout=60)
    eventually(
        lambda: create_topic(bootstrap, topic, partitions) is None,
        timeout=60,
        interval=0.5,
        ignore=(KafkaException,),  # still being deleted
    )


def test_status_flags_positions_the_source_lost_and_offsets_recover_them(
    clusters, tmp_path, topic_name
):
    """Retention passing a committed position is flagged and stops the pipeline until an
    ``offsets reset``; a topic deleted and created again after ``offsets set`` is flagged
    as recreated (the position carries the old topic's id) and replicated from its start."""
    t, gone = topic_name("lost"), topic_name("recreated")
    name = topic_name("plost")
    create_topic(clusters.source, t, 1)
    create_topic(clusters.source, gone, 1)
    produce(clusters.source, t, records(20, 1, BASE_TS))
    produce(clusters.source, gone, records(10, 1, BASE_TS))
    path = write_pipeline(tmp_path, pipeline(clusters, name, [t, gone]))
    f = ("-f", str(path))
    ok("offsets", "set", *f, "--topic", t, "--offset", "5", "--yes")
    ok("offsets", "set", *f, "--topic", gone, "--to-latest", "--yes")

    # Retention passes position 5 of t; gone is recreated and holds 3 records now.
    admin = AdminClient({"bootstrap.servers": clusters.source})
    [deleted] = admin.delete_records([TopicPartition(t, 0, 12)], request_timeout=30).values()
    assert deleted.result().low_watermark == 12
    recreate_topic(clusters.source, gone, 1)
    produce(clusters.source, gone, [(0, b"new", f"n{i}".encode(), [], BASE_TS) for i in range(3)])

    doc = status(path)
    lost, new = by_partition(doc)[(t, 0)], by_partition(doc)[(gone, 0)]
    assert (lost["problem"], lost["position"], lost["earliest"], lost["end"]) == (
        "below-earliest",
        5,
        12,
        20,
    )
    assert lost["recordsBehind"] == 8  # what is still there to replicate
    assert (new["problem"], new["committed"], new["position"], new["end"]) == (
        "recreated",
        10,
        0,
        3,
    )
    assert new["recordsBehind"] == 3
    assert doc["totals"]["problems"] == 2
    text = ok("status", *f)
    assert f"! {t}[0]: committed position below the source's earliest offset" in text
    assert f"! {gone}[0]: committed position belongs to a topic of this name that was" in text

    # The pipeline stops rather than skip what retention deleted, and says how to go on
    # (run on t alone: the same commit group, so gone stays untouched until the end).
    only_t = write_pipeline(tmp_path, pipeline(clusters, name, [t]), "only-t.yaml")
    stopped = cli("start", "--until-caught-up", "-f", str(only_t))
    assert stopped.returncode == 1, stopped.stderr[-3000:]
    assert "k2k offsets reset" in stopped.stderr

    ok("offsets", "reset", *f, "--topic", t, "--yes")
    assert offsets_of(path) == {(t, 0): 12, (gone, 0): 10}
    assert by_partition(status(path))[(t, 0)]["problem"] is None
    result = cli("start", "--until-caught-up", *f)
    assert result.returncode == 0, result.stderr[-3000:]
    for topic in (t, gone):
        src, dst = read_all(clusters.source, topic), read_all(clusters.target, topic)
        assert [r.content() for r in dst[0]] == [r.content() for r in src[0]]
    # t from the earliest offset still there (12), gone's new records from its start.
    assert [r.key for r in read_all(clusters.target, t)[0]][:1] == [b"k0-12"]
    assert [r.value for r in read_all(clusters.target, gone)[0]] == [b"n0", b"n1", b"n2"]
    assert offsets_of(path) == {(t, 0): 20, (gone, 0): 3}
    assert by_partition(status(path))[(gone, 0)]["problem"] is None


def test_records_lost_to_retention_are_skipped_only_when_the_policy_says_continue(
    clusters, tmp_path, topic_name
):
    t = topic_name("cont")
    name = topic_name("pcont")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, records(20, 1, BASE_TS))
    lenient = pipeline(clusters, name, [t])
    lenient["errorHandling"] = {"onSourceRecordsLost": "continue"}
    metrics_topic = f"__k2k-metrics-{name}"
    lenient["metrics"] = {"kafka": {"topic": metrics_topic}}
    path = write_pipeline(tmp_path, lenient)
    ok("offsets", "set", "-f", str(path), "--topic", t, "--offset", "5", "--yes")
    admin = AdminClient({"bootstrap.servers": clusters.source})
    [deleted] = admin.delete_records([TopicPartition(t, 0, 12)], request_timeout=30).values()
    assert deleted.result().low_watermark == 12

    result = k2k_cli(
        "start", "--until-caught-up", "-t", "-f", str(path), env={"OTEL_METRICS_EXPORTER": "kafka"}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The jump is counted: 7 records (5..11), by retention.
    lost = [
        (point["attributes"], point["value"])
        for part, recs in read_all(clusters.target, metrics_topic).items()
        for offset, r in enumerate(recs)
        for rec in [MetricsRecord.decode(r.key, r.value, metrics_topic, part, offset)]
        if rec.metric == "k2k.source.records.lost"
        for point in rec.points
    ]
    assert lost and lost[-1] == (
        {"pipeline": name, "topic": t, "partition": 0, "reason": "retention"},
        7,
    ), lost
    assert (
        f"source {t}[0]: records 5..11 were deleted (retention) before they were replicated; "
        "continuing from 12" in result.stderr
    ), result.stderr[-3000:]
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    assert [r.key for r in src[0]][:1] == [b"k0-12"]
    assert [r.content() for r in dst[0]] == [r.content() for r in src[0]]
    assert offsets_of(path) == {(t, 0): 20}
