"""One control topic for commit and assignment records, shared by two pipelines (K2K allows
it): each pipeline reads only its own commit group's records, of the family it wants."""

from __future__ import annotations

import json

import pytest

from k2k.formats import ProgressKey
from k2k.formats.codec import key_family
from k2k.kafka.admin import ClusterView
from tests.helpers.eos import (
    assert_exact,
    assert_single_writer,
    owner_history,
    progress_history,
)
from tests.helpers.kafka import create_topic, end_offsets, eventually, produce, read_all
from tests.helpers.pipelines import pipeline_dict, run_until_caught_up, write_pipeline
from tests.helpers.procs import K2KProcess

pytestmark = pytest.mark.integration


def _shared(clusters, name: str, topic: str, control: str):
    return pipeline_dict(
        clusters,
        name,
        [topic],
        features={"exactlyOnce": "enabled"},
        coordination={  # both spellings: the flat one and the Helm chart's
            "commit": {"topic": control},
            "kafka": {"assignment": {"topic": control, "graceWindow": "5 seconds"}},
        },
    )


def _batch(label: str, start: int, n: int) -> list:
    return [(i % 3, f"k{i}", f"{label}-{i}", [("h", b"x")], None) for i in range(start, start + n)]


def test_two_pipelines_share_one_control_topic(clusters, spark, tmp_path, topic_name):
    """Scenario: pipelines P (topic a) and Q (topic b), exactly-once, with commit and
    assignment records in one topic. P runs as a live ``k2k start`` while Q runs to caught
    up in-process twice, with records arriving between. Both copy exactly; the shared topic
    holds both families of both groups; each group's progress and claims name its own topic
    only, and a restart of Q resumes from its own progress (copies nothing again)."""
    a, b, control = topic_name("a"), topic_name("b"), topic_name("__ctl")
    p_name, q_name = topic_name("pp"), topic_name("pq")
    for t in (a, b):
        create_topic(clusters.source, t, 3)
    produce(clusters.source, a, _batch("a", 0, 300))
    produce(clusters.source, b, _batch("b", 0, 300))
    p_doc = _shared(clusters, p_name, a, control)
    q_doc = _shared(clusters, q_name, b, control)

    p = K2KProcess(write_pipeline(tmp_path, p_doc, "p.yaml"), tmp_path / "p.log")
    try:
        first = run_until_caught_up(spark, tmp_path, q_doc)
        assert first.records == 300
        produce(clusters.source, a, _batch("a", 300, 200))
        produce(clusters.source, b, _batch("b", 300, 200))
        second = run_until_caught_up(spark, tmp_path, q_doc)
        assert second.records == 200  # resumed from Q's own progress in the shared topic
        eventually(  # read back: transaction markers occupy target offsets too
            lambda: sum(len(v) for v in read_all(clusters.target, a).values()),
            expected=500,
            timeout=120,
        )
    finally:
        code = p.stop()
    assert code == 0, p.output()[-3000:]

    assert assert_exact(clusters.source, clusters.target, a) == 500
    assert assert_exact(clusters.source, clusters.target, b) == 500
    again = run_until_caught_up(spark, tmp_path, q_doc)
    assert again.records == 0

    # Both families of both groups live in the one topic.
    families: dict[tuple[str, str], int] = {}
    for part, recs in read_all(clusters.target, control).items():
        for r in recs:
            key = json.loads(r.key)
            fam = key_family(key)
            assert fam is not None, key
            families[(fam, key["group"])] = families.get((fam, key["group"]), 0) + 1
            if fam == "progress":
                assert ProgressKey.decode_shared(r.key, f"{control}[{part}]") is not None
    assert set(families) == {
        (fam, g) for fam in ("progress", "assignment") for g in (p_name, q_name)
    }, families

    # Each group's progress and claims name its own topic only, and end at the source's end.
    for group, topic in ((p_name, a), (q_name, b)):
        history = progress_history(clusters.target, control, group)
        assert {t for t, _ in history} == {topic}
        assert_single_writer(history)
        ends = end_offsets(clusters.source, topic)
        assert {tp[1]: recs[-1].offset for tp, recs in history.items()} == ends
        claims = owner_history(clusters.target, control, group)
        assert {t for t, _ in claims} == {topic}
        assert all(c[-1].transactional_id.startswith(f"k2k-{group}-") for c in claims.values())
    # The shared topic was created with broker timestamps (assignment liveness needs them).
    view = ClusterView("target", {"bootstrap.servers": clusters.target}, 30)
    assert view.topic_config(control)["message.timestamp.type"] == "LogAppendTime"
