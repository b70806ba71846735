"""The member side of ``k2k cutover`` on real brokers: the test writes the cut-over record
into the pipeline's assignment topic as the command would, and ``k2k start`` (the real CLI,
an exactly-once pipeline) reacts.

* a record with step ``cut`` only changes nothing: the member keeps copying;
* once the record says ``drain`` the running member ends its lease, releases its claims,
  leaves (``left``) and exits 0 with one line naming the cut-over; so does a standby
  beside it (no partitions: it waits idle);
* a ``k2k start`` after that exits 0 at once with the same line, before Spark, and copies
  nothing, not even records the source received since; ``Replicator.run`` returns at once
  with the record in ``stats.cutover``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

import k2k
from k2k.admin.status import read_status
from k2k.config import load_pipeline
from k2k.formats import CutoverRecord
from k2k.kafka.murmur2 import murmur2_partition
from tests.helpers.eos import eos_pipeline
from tests.helpers.kafka import create_topic, end_offsets, eventually, produce
from tests.helpers.pipelines import (
    BASE_TS,
    committed_progress,
    k2k_cli,
    wait_for_progress,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

PARTITIONS = 2
#: How long a drained member may take to stop: a tick to read the record, the runners'
#: last commit (at most the 15 s stop grace), the release, the "left" record, Spark's stop.
STOP_BOUND_S = 90


def _records(topic_offset: int, n: int) -> list[tuple]:
    return [
        (i % PARTITIONS, f"k{topic_offset + i}", f"v{topic_offset + i}", None, BASE_TS + i)
        for i in range(n)
    ]


def _write_cutover(bootstrap: str, topic: str, record: CutoverRecord) -> None:
    """Write ``record`` as ``k2k cutover`` would: the partition of its key's murmur2."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    key, value = record.encode()
    errors: list[object] = []
    producer.produce(
        topic,
        value,
        key,
        murmur2_partition(key, partitions),
        on_delivery=lambda err, _msg: errors.append(err) if err else None,
    )
    assert producer.flush(30) == 0 and not errors, errors


def _line(name: str) -> str:
    return f"k2k start {name}: stopped: the pipeline was cut over to the target by k2k cutover"


def test_members_stop_once_the_pipeline_is_drained_and_never_start_again(
    clusters, tmp_path, topic_name, running_pipeline
):
    t, name = topic_name("cut"), topic_name("pcut")
    create_topic(clusters.source, t, PARTITIONS)
    produce(clusters.source, t, _records(0, 40))
    doc = eos_pipeline(clusters, name, [t])
    path = write_pipeline(tmp_path, doc)
    member = running_pipeline(path, {(t, 0): 20, (t, 1): 20}, "--instance", "member-a")
    standby = K2KProcess(path, tmp_path / "standby.log", "--instance", "member-s", "--standby")
    try:
        eventually(lambda: "Spark started" in standby.output(), timeout=120)
        _cut_then_drain(clusters, path, t, member, standby)
    finally:
        for proc in (member, standby):
            if proc.proc.poll() is None:
                proc.kill()
    _start_after_the_cut_over(clusters, path, t)


def _cut_then_drain(clusters, path, t: str, member: K2KProcess, standby: K2KProcess) -> None:
    cfg = load_pipeline([path])
    name, assignment_topic = cfg.name, cfg.coordination.assignment.topic

    # (c) The cut alone: the member keeps copying up to (and past) it.
    cut = {(t, p): o for p, o in end_offsets(clusters.source, t).items()}
    now = int(time.time() * 1000)
    record = CutoverRecord(name, name, ("cut",), cut, {}, (), (), now, now, "host-cut")
    _write_cutover(clusters.target, assignment_topic, record)
    produce(clusters.source, t, _records(40, 10))
    wait_for_progress(path, {(t, 0): 25, (t, 1): 25}, timeout=120)
    assert member.proc.poll() is None, member.output()[-3000:]
    assert standby.proc.poll() is None, standby.output()[-3000:]

    # (a) Drained: the running member stops by itself, cleanly.
    started = time.monotonic()
    drained = record.with_step("drain", int(time.time() * 1000), cut={(t, 0): 25, (t, 1): 25})
    _write_cutover(clusters.target, assignment_topic, drained)
    code = member.proc.wait(STOP_BOUND_S)
    took = time.monotonic() - started
    out = member.output()
    assert code == 0, out[-3000:]
    assert _line(name) in out, out[-3000:]
    assert "host host-cut)" in out
    assert took < STOP_BOUND_S
    assert standby.proc.wait(STOP_BOUND_S) == 0, standby.output()[-3000:]
    assert _line(name) in standby.output()
    assert "ending the lease and stopping" in standby.output()  # it was waiting idle
    status = read_status(cfg)
    states = {m.record.member: m.state for m in status.members}
    assert states == {"member-a": "left", "member-s": "left"}, states
    assert all(p.owner and p.owner["released"] for p in status.partitions), status.partitions
    assert status.to_json()["cutover"]["steps"] == ["cut", "drain"]
    assert status.to_json()["cutover"]["host"] == "host-cut"


def _start_after_the_cut_over(clusters, path, t: str) -> None:
    """(b) A start after the cut-over: exit 0 at once, nothing copied, even new source
    records."""
    cfg = load_pipeline([path])
    name, commit_topic = cfg.name, cfg.coordination.commit.topic
    produce(clusters.source, t, _records(50, 10))
    target_before = end_offsets(clusters.target, t, "read_uncommitted")
    commit_before = end_offsets(clusters.target, commit_topic, "read_uncommitted")
    progress_before = committed_progress(clusters.target, commit_topic, name)
    fresh = k2k_cli("start", "-f", str(path), "--instance", "member-b", timeout=120)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert fresh.stderr.strip().splitlines()[-1].startswith(_line(name)), fresh.stderr[-3000:]
    assert "starting Spark" not in fresh.stderr  # decided before Spark starts
    assert end_offsets(clusters.target, t, "read_uncommitted") == target_before
    assert end_offsets(clusters.target, commit_topic, "read_uncommitted") == commit_before
    assert committed_progress(clusters.target, commit_topic, name) == progress_before
    # The Python API, --until-caught-up: returns at once, saying why.
    stats = k2k.Replicator(cfg, instance="member-c").run(until_caught_up=True)
    assert stats.cutover is not None and stats.cutover.steps == ("cut", "drain")
    assert (stats.leases, stats.records) == (0, 0)
    assert end_offsets(clusters.target, t, "read_uncommitted") == target_before
    after = read_status(cfg)
    states = {m.record.member: m.state for m in after.members}
    assert set(states) == {"member-a", "member-s", "member-b", "member-c"}, states
    assert set(states.values()) == {"left"}, states
