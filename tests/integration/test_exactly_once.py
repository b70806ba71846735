"""Exactly-once replication on real brokers: transactions, aborted source transactions,
replays after failures, refused settings, control-topic error policies."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaException

from k2k.formats import ReleaseRecord, decode_assignment
from tests.helpers.eos import (
    assert_exact,
    assert_single_writer,
    eos_pipeline,
    mixed_workload,
    owner_history,
    progress_history,
)
from tests.helpers.kafka import (
    create_topic,
    end_offsets,
    eventually,
    produce,
    produce_bulk,
    produce_transaction,
    read_all,
)
from tests.helpers.pipelines import (
    k2k_cli,
    run_until_caught_up,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration


def test_exactly_once_copies_committed_source_records_once(clusters, spark, tmp_path, topic_name):
    t = topic_name("eos")
    name = topic_name("peos")
    create_topic(clusters.source, t, 4)
    counts = mixed_workload(clusters.source, t, 40_000, 4, chunk=1_000)
    assert counts["aborted"] > 0 and counts["committed"] > 0
    doc = eos_pipeline(clusters, name, [t])
    stats = run_until_caught_up(spark, tmp_path, doc)
    compared = assert_exact(clusters.source, clusters.target, t)
    assert compared == counts["plain"] + counts["committed"]
    assert stats.records == compared
    # The target holds transactions: read_uncommitted sees nothing more (no aborted copies).
    raw = read_all(clusters.target, t, isolation="read_uncommitted")
    assert sum(len(v) for v in raw.values()) == compared
    # Progress and claims name this process as the writer; every claim was released.
    history = progress_history(clusters.target, f"__k2k_progress-{name}", name)
    assert set(history) == {(t, p) for p in range(4)}
    writers = assert_single_writer(history)
    assert all(len(w) == 1 and w[0] for w in writers.values()), writers
    claims = owner_history(clusters.target, f"__k2k_assignment-{name}", name)
    assert set(claims) == {(t, p) for p in range(4)}
    assert all(c[-1].transactional_id.startswith(f"k2k-{name}-") for c in claims.values())
    releases = {}
    for _p, recs in read_all(clusters.target, f"__k2k_assignment-{name}").items():
        for r in recs:
            g, rec = decode_assignment(r.key, r.value, "x")
            if g == name and isinstance(rec, ReleaseRecord):
                releases[(rec.topic, rec.partition)] = rec.claim
    assert releases == {tp: c[-1].claim for tp, c in claims.items()}


def _seeded(clusters, spark, tmp_path, topic_name, label: str, **sections):
    """A topic with 3,000 records replicated once exactly-once; returns (topic, name, doc)."""
    t = topic_name(label)
    name = topic_name("p" + label)
    create_topic(clusters.source, t, 2)
    mixed_workload(clusters.source, t, 3_000, 2, chunk=500)
    doc = eos_pipeline(clusters, name, [t], **sections)
    run_until_caught_up(spark, tmp_path, doc)
    assert_exact(clusters.source, clusters.target, t)
    return t, name, doc


@pytest.mark.parametrize(("batch_size", "markers"), [(None, range(1, 2)), (1000, range(3, 8))])
def test_exactly_once_default_batch_is_one_transaction_per_10000_records_per_partition(
    clusters, spark, tmp_path, topic_name, batch_size, markers
):
    """Each transaction leaves one commit marker in every target partition it wrote. Two
    runners copy 5,000 records from each of their two partitions: with the default 10,000
    per partition that is one transaction per runner, with K2K's 1,000 five."""
    t = topic_name("eosbatch")
    create_topic(clusters.source, t, 4)
    per_partition = produce_bulk(clusters.source, t, 20_000, 4)
    doc = eos_pipeline(clusters, topic_name("peosbatch"), [t])
    commit = doc["coordination"]["commit"]
    commit["batchTimeout"] = "20 seconds"  # only the size seals a batch here
    if batch_size is None:
        del commit["batchSize"]
    else:
        commit["batchSize"] = batch_size
    run_until_caught_up(spark, tmp_path, doc)
    assert assert_exact(clusters.source, clusters.target, t) == 20_000
    ends = end_offsets(clusters.target, t, "read_uncommitted")
    written = {p: ends[p] - per_partition[p] for p in sorted(ends)}
    assert all(n in markers for n in written.values()), written


def test_on_commit_sync_timeout_fail_and_ignore(clusters, spark, tmp_path, topic_name):
    policy = {"coordination": {"commit": {"syncTimeout": "2 seconds"}}}
    t, _name, doc = _seeded(clusters, spark, tmp_path, topic_name, "synctimeout", **policy)
    commit_topic = doc["coordination"]["commit"]["topic"]
    # A transaction left open on the commit topic (one partition) holds its last stable
    # offset back: progress behind it cannot be read to the end until it finishes.
    blocker = produce_transaction(
        clusters.target,
        commit_topic,
        [(0, b"blocker", b"x", [], None)],
        outcome="open",
    )
    try:
        mixed_workload(clusters.source, t, 2_000, 2, seed=11, chunk=500)
        doc["errorHandling"] = {"onCommitSyncTimeout": "fail"}
        result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert lines[-1].startswith(f"error: could not read progress from {commit_topic}")
        assert "within 2 s (coordination.commit.syncTimeout)" in lines[-1]
        assert lines[-1].endswith("errorHandling.onCommitSyncTimeout is 'fail'")
        assert "Traceback" not in result.stderr
        # ignore: continue with the progress read so far (everything before the blocker).
        doc["errorHandling"] = {"onCommitSyncTimeout": "ignore"}
        run_until_caught_up(spark, tmp_path, doc)
        assert_exact(clusters.source, clusters.target, t)
    finally:
        blocker.abort_transaction(30)


def test_on_control_message_deserialization_error_fail_and_ignore(
    clusters, spark, tmp_path, topic_name
):
    t, _name, doc = _seeded(clusters, spark, tmp_path, topic_name, "badrecord")
    commit_topic = doc["coordination"]["commit"]["topic"]
    assign_topic = doc["coordination"]["assignment"]["topic"]
    produce(clusters.target, commit_topic, [(0, b"not json", b"{}", [], None)])
    produce(clusters.target, assign_topic, [(0, b'{"k":9}', b"{}", [], None)])
    mixed_workload(clusters.source, t, 2_000, 2, seed=12, chunk=500)
    doc["errorHandling"] = {"onControlMessageDeserializationError": "fail"}
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ")
    assert f"{assign_topic}[0]@" in last or f"{commit_topic}[0]@" in last
    assert last.endswith("(errorHandling.onControlMessageDeserializationError: fail)")
    assert "Traceback" not in result.stderr
    # ignore: both unreadable records are skipped with a warning; replication goes on exactly.
    doc["errorHandling"] = {"onControlMessageDeserializationError": "ignore"}
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "skipping unreadable control record" in result.stderr
    assert_exact(clusters.source, clusters.target, t)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            {"source": {"kafka": {"consumer": {"isolation.level": "read_uncommitted"}}}},
            "source.kafka.consumer.isolation.level: managed by k2k, got 'read_uncommitted'",
        ),
        (
            {"target": {"kafka": {"producer": {"enable.idempotence": "false"}}}},
            "target.kafka.producer.enable.idempotence: managed by k2k, got 'false'",
        ),
        (
            {"target": {"kafka": {"producer": {"acks": "1"}}}},
            "target.kafka.producer.acks: managed by k2k, got '1'",
        ),
        (
            {"target": {"kafka": {"producer": {"transactional.id": "mine"}}}},
            "target.kafka.producer.transactional.id: managed by k2k, got 'mine'",
        ),
    ],
    ids=["read-uncommitted", "idempotence-off", "acks-1", "manual-transactional-id"],
)
def test_settings_that_break_exactly_once_are_refused(clusters, tmp_path, section, expected):
    doc = eos_pipeline(clusters, "refused", ["t"], **section)
    result = k2k_cli("start", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_open_source_transaction_stalls_only_its_partition(clusters, tmp_path, topic_name):
    t = topic_name("opentxn")
    name = topic_name("popentxn")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, [(p, b"k", b"before-%d" % p, [], None) for p in (0, 1)])
    # produce_transaction keeps an open transaction for ten minutes, longer than the waits
    # below (120 + 60 s).
    blocker = produce_transaction(
        clusters.source,
        t,
        [(0, b"k", b"in-open-txn", [], None)],
        outcome="open",
    )
    produce(clusters.source, t, [(p, b"k", b"after-%d" % p, [], None) for p in (0, 1)])
    doc = eos_pipeline(clusters, name, [t])
    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        # Partition 1 is copied completely; partition 0 stops at its last stable offset.
        def values() -> dict[int, list[bytes]]:
            return {p: [r.value for r in recs] for p, recs in read_all(clusters.target, t).items()}

        eventually(
            values,
            expected={0: [b"before-0"], 1: [b"before-1", b"after-1"]},
            timeout=120,
            interval=0.2,
            ignore=(AssertionError,),
        )
        blocker.commit_transaction(30)
        eventually(
            values,
            expected={0: [b"before-0", b"in-open-txn", b"after-0"], 1: [b"before-1", b"after-1"]},
            timeout=60,
            interval=0.2,
        )
        assert proc.stop() == 0, proc.output()[-2000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    assert_exact(clusters.source, clusters.target, t)


def test_a_steady_load_becomes_visible_fetch_by_fetch_not_at_batch_timeout(
    clusters, tmp_path, topic_name
):
    """Under a steady load every partition gets records in every fetch, so the consumer
    sends no EOF event; the runner must still see that it copied all a fetch brought and
    commit then, not only at ``batchTimeout`` (30 s here, longer than the load)."""
    t = topic_name("steady")
    name = topic_name("psteady")
    create_topic(clusters.source, t, 4)
    doc = eos_pipeline(
        clusters,
        name,
        [t],
        coordination={"commit": {"batchSize": 1_000_000, "batchTimeout": "30 seconds"}},
    )
    produce(clusters.source, t, [(p, b"k", b"first-%d" % p, [], None) for p in range(4)])

    def copied() -> int:
        return sum(len(records) for records in read_all(clusters.target, t).values())

    def end() -> int:  # the last stable offsets: they move with every commit, and only then
        return sum(end_offsets(clusters.target, t).values())

    proc = K2KProcess(write_pipeline(tmp_path, doc), tmp_path / "k2k.log")
    try:
        eventually(copied, expected=4, timeout=120, interval=0.2, ignore=(KafkaException,))
        counts: dict[str, int] = {}
        load = threading.Thread(
            target=lambda: counts.update(
                mixed_workload(clusters.source, t, 12_000, 4, txn_share=0, chunk=10, rate=1_000)
            )
        )
        load.start()
        ends = set()
        while load.is_alive():
            ends.add(end())
            time.sleep(0.2)  # sampling the target while the load runs, not synchronisation
        load.join()
        assert len(ends) >= 15, f"the target's end moved {len(ends) - 1} times in 12 s"
        eventually(copied, expected=4 + counts["plain"], timeout=60, interval=0.5)
        assert proc.stop() == 0, proc.output()[-2000:]
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    assert assert_exact(clusters.source, clusters.target, t) == 4 + 12_000
    print(f"\nsteady load: the target's read_committed end moved {len(ends) - 1} times in 12 s")
