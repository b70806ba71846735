"""``k2k verify`` with a partition cut into several tasks (slices), on real brokers and
real Spark: corruptions placed at and next to the even cuts are each named once, at their
own offsets; a replay across a cut is duplicates, also when it reaches back further than a
slice's context (the two slices are verified again as one).

The source topic has one partition of 400 records, so ``slice_records=100`` wants cuts at
source offsets 100, 200 and 300 (:mod:`k2k.verify.slicing` moves a cut to the nearest
place where both sides agree).
"""

from __future__ import annotations

import json
import uuid

import pytest

from k2k.verify import slicing
from tests.helpers.kafka import Rec, create_topic, produce
from tests.helpers.pipelines import BASE_TS, k2k_cli, pipeline_dict, write_pipeline
from tests.helpers.pipelines import run_until_caught_up as replicate
from tests.integration.test_verify import copy_topic, places, routed_to, verify

pytestmark = pytest.mark.integration

RECORDS = 400


@pytest.fixture(scope="module", params=[False, True], ids=["no-tracing", "tracing-headers"])
def one_partition(request, clusters, spark, tmp_path_factory):
    """One partition of 400 records replicated at-least-once, with or without the tracing
    headers: (topic, pipeline doc)."""
    tmp = tmp_path_factory.mktemp("slices")
    t = f"slices-src-{uuid.uuid4().hex[:8]}"
    create_topic(clusters.source, t, 1)
    produce(
        clusters.source,
        t,
        [
            (0, b"key-%d" % i, b"value-%d" % i, [("i", b"%d" % i)], BASE_TS + i)
            for i in range(RECORDS)
        ],
    )
    doc = pipeline_dict(
        clusters,
        f"pslices-{uuid.uuid4().hex[:8]}",
        [t],
        features={"tracingHeaders": "enabled" if request.param else "disabled"},
    )
    replicate(spark, tmp, doc)
    return t, doc


def corrupt_at_cuts(parts: dict[int, list[Rec]]) -> None:
    """Target offsets equal source offsets before the edits (one partition, no replays)."""
    p = parts[0]
    p[100] = p[100]._replace(value=b"CHANGED")  # at the cut wanted at 100
    del p[199]  # one before the cut wanted at 200: source s >= 200 now at target s - 1
    p.insert(201, Rec.make(b"intruder", b"not from the source", [], BASE_TS))  # after @201
    p.insert(301, p[300])  # source @300 (target @300) twice: at the cut wanted at 300


def test_equal_data_in_slices_matches_and_the_cli_exits_0(clusters, spark, tmp_path, one_partition):
    _, doc = one_partition

    report = verify(spark, tmp_path, doc, slice_records=100)

    assert report.ok, report.render()
    (r,) = report.results
    assert (r.slices, r.start, r.until, r.source_records, r.matched) == (4, 0, 400, 400, 400)
    assert (r.duplicates, r.differences, r.source_digest) == (0, (), r.target_digest)
    whole = verify(spark, tmp_path, doc, slice_records=0).results[0]
    assert (whole.slices, whole.source_digest) == (1, r.source_digest)  # slicing-independent

    run = k2k_cli(
        "verify", "-f", str(write_pipeline(tmp_path, doc)), "--slice-records", "100", "--json"
    )

    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["ok"] is True
    assert [(p["slices"], p["matched"]) for p in out["partitions"]] == [(4, 400)]


def test_corruptions_at_and_next_to_cuts_are_each_named_once_at_their_place(
    clusters, spark, tmp_path, topic_name, one_partition
):
    t, doc = one_partition
    corrupt = topic_name("cuts")
    copy_topic(clusters.target, t, corrupt, corrupt_at_cuts)

    report = verify(spark, tmp_path, routed_to(doc, t, corrupt), slice_records=100)

    assert not report.ok
    (r,) = report.results
    assert r.slices == 4
    assert places(report, t, 0) == [
        ("changed", (100,), 0, (100,), ("value",)),
        ("missing", (199,), None, (), ()),
        ("extra", (), 0, (201,), ()),
    ]
    assert (r.difference_count, r.duplicates, r.matched, r.target_records) == (3, 1, 398, 401)
    whole = verify(spark, tmp_path, routed_to(doc, t, corrupt), slice_records=0).results[0]
    assert (whole.differences, whole.duplicates, whole.matched) == (
        r.differences,
        r.duplicates,
        r.matched,
    )


@pytest.mark.parametrize("lookbehind", [5, slicing.LOOKBEHIND], ids=["short-context", "default"])
def test_a_replay_across_a_cut_is_duplicates_even_past_the_slices_context(
    clusters, spark, tmp_path, topic_name, one_partition, monkeypatch, lookbehind
):
    """A runner died after source @249 with progress committed at @150: the target holds
    150..249 twice. With a search window too small to see both copies, the cut lands in
    the replayed range; the slice after it must still see the replay as duplicates."""
    t, doc = one_partition
    replayed = topic_name("replayed")

    def replay(parts: dict[int, list[Rec]]) -> None:
        p = parts[0]
        parts[0] = p[:250] + p[150:250] + p[250:]

    copy_topic(clusters.target, t, replayed, replay)
    monkeypatch.setattr(slicing, "SEARCH", 8)
    monkeypatch.setattr(slicing, "WINDOW", 16)
    monkeypatch.setattr(slicing, "LOOKBEHIND", lookbehind)

    report = verify(spark, tmp_path, routed_to(doc, t, replayed), slice_records=200)

    assert report.ok, report.render()
    (r,) = report.results
    assert (r.matched, r.duplicates, r.target_records) == (400, 100, 500)
    # Cut at 200 (inside the replayed range): with 5 records of context the slice after it
    # cannot tell the replay from extra records, so both slices are verified again as one.
    assert r.slices == (1 if lookbehind == 5 else 2)
