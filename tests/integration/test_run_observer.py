"""The per-run observer hook, on real brokers: every replicated record is reported in exactly
one run, and each run's source offsets map to the target offsets the records really got.

The runner runs in-process here (no Spark): the hook is the runner's, and the planner only
passes the observer factory through the lease spec.
"""

from __future__ import annotations

import pytest

from k2k.pipeline.plan import PartitionRange, RunnerGroup
from k2k.pipeline.task.observe import ProducedRun
from k2k.pipeline.task.runner import Runner
from k2k.stages import KeyHash, SourcePartition, TopicPlan
from tests.helpers.inprocess import inprocess_spec
from tests.helpers.kafka import (
    ProducedRecord,
    create_topic,
    end_offsets,
    produce,
    produce_bulk,
    produce_transaction,
    read_all,
)

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self) -> None:
        self.runs: list[ProducedRun] = []

    def on_run(self, run: ProducedRun) -> None:
        self.runs.append(run)


def _source_with_gaps(bootstrap: str, topic: str) -> None:
    """Two partitions; an aborted and a committed transaction leave offset gaps."""
    create_topic(bootstrap, topic, 2)
    produce_bulk(bootstrap, topic, 3000, 2)
    aborted: list[ProducedRecord] = [(0, b"aborted-%d" % i, b"x", None, None) for i in range(5)]
    produce_transaction(bootstrap, topic, aborted, outcome="abort")
    committed: list[ProducedRecord] = [(0, b"txn-%d" % i, b"y", None, None) for i in range(5)]
    produce_transaction(bootstrap, topic, committed, outcome="commit")
    produce_bulk(bootstrap, topic, 1000, 2)


def _run(clusters, source: str, target: str, *, eos: bool, hash_: bool, name: str) -> Recorder:
    ends = end_offsets(clusters.source, source)
    recorder = Recorder()
    plan = TopicPlan(source, target, KeyHash() if hash_ else SourcePartition(), True, True, None)
    spec = inprocess_spec(
        clusters,
        name,
        {source: plan},
        spreads=hash_,
        exactly_once=eos,
        observer=lambda strategy: recorder,
    )
    ranges = tuple(PartitionRange(source, p, 0, end, False) for p, end in sorted(ends.items()))
    group = RunnerGroup(0, ranges, transactional_id=f"{name}-txn" if eos else None)
    summary = Runner(spec, group).run()
    assert summary.error is None and summary.fenced is None
    assert {(o.partition, o.committed) for o in summary.partitions} == set(ends.items())
    return recorder


def _assert_runs_map_exactly(clusters, source: str, target: str, runs: list[ProducedRun]) -> None:
    src = {p: {r.offset: r for r in recs} for p, recs in read_all(clusters.source, source).items()}
    dst = {p: {r.offset: r for r in recs} for p, recs in read_all(clusters.target, target).items()}
    reported: list[tuple[int, int]] = []
    for run in runs:
        source_offsets = sorted(
            o for o in src[run.source_partition] if run.source_first <= o <= run.source_last
        )
        assert len(source_offsets) == run.count
        target_records = [
            dst[run.target_partition][o]
            for o in range(run.target_first, run.target_last + 1)
            if o in dst[run.target_partition]
        ]
        assert [r.key for r in target_records] == [
            src[run.source_partition][o].key for o in source_offsets
        ]
        reported += [(run.source_partition, o) for o in source_offsets]
    every = sorted((p, o) for p, recs in src.items() for o in recs)
    assert sorted(reported) == every  # each record in exactly one run


@pytest.mark.parametrize("eos", [False, True], ids=["at-least-once", "exactly-once"])
def test_observer_maps_every_run_to_its_target_offsets(clusters, topic_name, eos):
    source, target = topic_name("obs-src"), topic_name("obs-dst")
    _source_with_gaps(clusters.source, source)
    create_topic(clusters.target, target, 2)
    # Records already on the target shift its offsets away from the source's.
    produce(clusters.target, target, [(0, b"old", b"o", None, None)] * 7)
    recorder = _run(clusters, source, target, eos=eos, hash_=False, name=topic_name("obs"))
    assert recorder.runs
    assert any(not r.contiguous for r in recorder.runs) or any(
        r.target_first != r.source_first for r in recorder.runs
    )
    _assert_runs_map_exactly(clusters, source, target, recorder.runs)


def test_observer_reports_hash_partitioned_records_one_by_one(clusters, topic_name):
    source, target = topic_name("obsh-src"), topic_name("obsh-dst")
    _source_with_gaps(clusters.source, source)
    create_topic(clusters.target, target, 3)
    recorder = _run(clusters, source, target, eos=False, hash_=True, name=topic_name("obsh"))
    assert all(r.count == 1 and r.target_first == r.target_last for r in recorder.runs)
    _assert_runs_map_exactly(clusters, source, target, recorder.runs)
