"""Exactly-once replication on real brokers: transactions, aborted source transactions,
replays after failures, refused settings, control-topic error policies."""

from __future__ import annotations

import pytest

from k2k.coordination.formats import ReleaseRecord, decode_assignment
from tests.integration.conftest import (
    K2K,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)
from tests.integration.eos_util import (
    assert_exact,
    assert_single_writer,
    mixed_workload,
    owner_history,
    progress_history,
)
from tests.kafkautil import create_topic, produce_transaction, read_all

pytestmark = pytest.mark.integration


def eos_pipeline(clusters, name: str, topics, **sections):
    doc = pipeline_dict(
        clusters,
        name,
        topics,
        features={"exactlyOnce": "enabled"},
        coordination={
            "commit": {"topic": f"__k2k_progress-{name}", "batchTimeout": "200 milliseconds"},
            "assignment": {"topic": f"__k2k_assignment-{name}", "graceWindow": "5 seconds"},
        },
    )
    from k2k.config.loader import deep_merge

    return deep_merge(doc, sections)


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
    for p, recs in read_all(clusters.target, f"__k2k_assignment-{name}").items():
        for r in recs:
            g, rec = decode_assignment(r.key, r.value, "x")
            if g == name and isinstance(rec, ReleaseRecord):
                releases[(rec.topic, rec.partition)] = rec.claim
    assert releases == {tp: c[-1].claim for tp, c in claims.items()}
