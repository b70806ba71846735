"""Bidirectional replication on real brokers: two pipelines A -> B and B -> A with the same
topic names, both running, producers writing to both sides."""

from __future__ import annotations

from collections import Counter

import pytest

from k2k.kafka.admin import ClusterView
from tests.helpers.kafka import create_topic, eventually, produce, read_all
from tests.helpers.pipelines import pipeline_dict, wait_progress_past, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration

H = "__k2k_bidirectional"


def _direction(name: str, topic: str, source: str, target: str, mode: str) -> dict:
    class Pair:  # pipeline_dict reads .source / .target
        pass

    pair = Pair()
    pair.source, pair.target = source, target  # type: ignore[attr-defined]
    return pipeline_dict(
        pair,
        name,
        [topic],
        features={"exactlyOnce": "enabled", "bidirectionalReplication": "enabled"},
        bidirectional={"mode": mode},
        coordination={"assignment": {"topic": f"__k2k_assignment-{name}"}},
    )


def _values(bootstrap: str, topic: str) -> Counter:
    return Counter(r.value for recs in read_all(bootstrap, topic).values() for r in recs)


@pytest.mark.parametrize("mode", ["cluster", "pipeline"])
def test_two_directions_copy_every_record_once_without_loops(clusters, tmp_path, topic_name, mode):
    """Scenario: topic t exists on A (the source cluster) and B (the target cluster);
    pipelines A -> B and B -> A (exactly-once, ``topic: source``) run as two
    ``k2k start`` processes while producers write 3 rounds to each side. Every record ends
    up exactly once on each side, the copies carry the marker of the cluster they came
    from and keep their partition order, and once both pipelines' progress covers the
    sources' ends nothing more is written: no loop."""
    a, b = clusters.source, clusters.target
    t = topic_name("bidi")
    for side in (a, b):
        create_topic(side, t, 3)
    # Mode pipeline: both directions share the name (their control topics are on
    # different clusters); mode cluster: any names.
    ab = topic_name("ab")
    ba = ab if mode == "pipeline" else topic_name("ba")
    procs = [
        K2KProcess(
            write_pipeline(tmp_path, _direction(ab, t, a, b, mode), "ab.yaml"),
            tmp_path / "ab.log",
        ),
        K2KProcess(
            write_pipeline(tmp_path, _direction(ba, t, b, a, mode), "ba.yaml"),
            tmp_path / "ba.log",
        ),
    ]
    rounds, per_round = 3, 200
    try:
        for r in range(rounds):  # live producers on both sides while both pipelines run
            for side, label in ((a, "A"), (b, "B")):
                produce(
                    side,
                    t,
                    [
                        (i % 3, f"k{i}", f"{label}-{r}-{i}", [("origin", label.encode())], None)
                        for i in range(per_round)
                    ],
                )
        total = 2 * rounds * per_round
        for side in (a, b):
            eventually(
                lambda side=side: sum(_values(side, t).values()), expected=total, timeout=180
            )
        # Quiet: both pipelines' committed progress is past every record of their source
        # (replicated or skipped), so any copy going back would be visible by now.
        for side, target, name in ((a, b, ab), (b, a, ba)):
            wait_progress_past(side, target, t, name)
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0], [p.output()[-3000:] for p in procs]
    # Each direction read every copy the other wrote and left it: counted in its summary.
    for proc in procs:
        assert f"{rounds * per_round} records of the other direction not copied back" in (
            proc.output()
        ), proc.output()[-3000:]

    expected = Counter(
        f"{label}-{r}-{i}".encode()
        for label in "AB"
        for r in range(rounds)
        for i in range(per_round)
    )
    for side in (a, b):
        assert _values(side, t) == expected  # each record exactly once, no loop copies
    ids = {
        "A": ClusterView("source", {"bootstrap.servers": a}, 30).cluster_id().encode(),
        "B": ClusterView("target", {"bootstrap.servers": b}, 30).cluster_id().encode(),
    }
    if mode == "pipeline":
        ids = dict.fromkeys(ids, ab.encode())
    for side, here, there in ((a, "A", "B"), (b, "B", "A")):
        for p, recs in read_all(side, t).items():
            originals = [r for r in recs if dict(r.headers)["origin"] == here.encode()]
            copies = [r for r in recs if dict(r.headers)["origin"] == there.encode()]
            assert all(H not in dict(r.headers) for r in originals)
            assert all(r.headers[-1] == (H, ids[there]) for r in copies)
            # Copies keep the other side's per-partition order.
            assert [r.value for r in copies] == [
                f"{there}-{rnd}-{i}".encode()
                for rnd in range(rounds)
                for i in range(per_round)
                if i % 3 == p
            ]
