"""``k2k verify`` on real brokers and real Spark: equal data matches, and every corruption
of a replicated topic is named by its place (topic, partition, offsets on both sides).

Corruptions are made on a copy of a replicated target topic (read back, edited, written to a
fresh topic) and the pipeline's routing is pointed at the copy: its committed progress
stays the same, so verify compares the same source range with the corrupted target.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from k2k.config import load_pipeline
from k2k.kafka.murmur2 import murmur2_partition
from k2k.verify.job import run_verify
from k2k.verify.report import VerifyReport
from tests.helpers.eos import mixed_workload
from tests.helpers.kafka import Rec, create_topic, end_offsets, list_topics, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)

pytestmark = pytest.mark.integration


def verify(spark: Any, tmp_path: Path, doc: dict[str, Any], **kw: Any) -> VerifyReport:
    cfg = load_pipeline([write_pipeline(tmp_path, doc, f"{doc['name']}-verify.yaml")])
    return run_verify(cfg, spark=spark, **kw)


def routed_to(doc: dict[str, Any], source_topic: str, target_topic: str) -> dict[str, Any]:
    """The same pipeline (same progress) with its routing pointed at ``target_topic``."""
    out = copy.deepcopy(doc)
    out["replication"][1]["sink"]["topic"] = {"map": {source_topic: target_topic}}
    return out


def copy_topic(
    bootstrap: str,
    topic: str,
    into: str,
    edit: Callable[[dict[int, list[Rec]]], None] = lambda parts: None,
) -> None:
    """Write ``topic``'s records, after ``edit`` changed them in place, to the new topic
    ``into`` (same partitions, same keys, values, headers and timestamps)."""
    parts = read_all(bootstrap, topic)
    edit(parts)
    create_topic(bootstrap, into, len(parts))
    records = [
        (p, r.key, r.value, r.headers, r.timestamp) for p, recs in parts.items() for r in recs
    ]
    produce(bootstrap, into, records)


def places(report: VerifyReport, topic: str, partition: int) -> list[tuple[Any, ...]]:
    """(kind, source offsets, target partition, target offsets, fields) of each difference."""
    (result,) = [r for r in report.results if (r.topic, r.partition) == (topic, partition)]
    return [
        (d.kind, d.source_offsets, d.target_partition, d.target_offsets, d.fields)
        for d in result.differences
    ]


def written_state(clusters: Any, topics: list[str]) -> dict[str, Any]:
    """What a write to either cluster would change: the topics (but ``__consumer_offsets``,
    which a consumer's coordinator lookup may create), the end offsets of ``topics`` and
    of the group-commit log."""
    state: dict[str, Any] = {}
    for side, bootstrap in (("source", clusters.source), ("target", clusters.target)):
        names = list_topics(bootstrap)
        state[f"{side} topics"] = names - {"__consumer_offsets"}
        for name in [*topics, "__consumer_offsets"]:
            if name in names:
                state[f"{side} {name}"] = end_offsets(bootstrap, name, "read_uncommitted")
    return state


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_equal_data_with_transactions_and_renaming_matches(
    clusters, spark, tmp_path, topic_name, exactly_once
):
    t = topic_name("eq")
    create_topic(clusters.source, t, 3)
    counts = mixed_workload(clusters.source, t, 1_200, 3, chunk=50, seed=3)
    assert counts["aborted"] > 0 and counts["committed"] > 0, counts
    doc = pipeline_dict(
        clusters,
        topic_name("peq"),
        [t],
        features={"exactlyOnce": "enabled" if exactly_once else "disabled"},
    )
    doc["replication"][1]["sink"]["topic"] = {"prefix": "dr."}
    run_until_caught_up(spark, tmp_path, doc)
    before = written_state(clusters, [t, f"dr.{t}", f"__k2k_progress-{doc['name']}"])

    report = verify(spark, tmp_path, doc)

    assert report.ok, report.render()
    assert written_state(clusters, [t, f"dr.{t}", f"__k2k_progress-{doc['name']}"]) == before
    ends = end_offsets(clusters.source, t)
    readable = counts["plain"] + counts["committed"]
    assert [(r.topic, r.partition, r.target_topic) for r in report.results] == [
        (t, p, f"dr.{t}") for p in range(3)
    ]
    assert [(r.start, r.until) for r in report.results] == [(0, ends[p]) for p in range(3)]
    assert sum(r.source_records for r in report.results) == readable
    assert sum(r.matched for r in report.results) == readable
    assert all(r.duplicates == 0 and r.source_digest == r.target_digest for r in report.results)
    assert report.summary().endswith("all match")


@pytest.fixture(scope="module")
def replicated(clusters, spark, tmp_path_factory):
    """One topic of 2 x 30 records replicated at-least-once: (topic, pipeline doc, dir)."""
    import uuid

    tmp = tmp_path_factory.mktemp("verify")
    t = f"verify-src-{uuid.uuid4().hex[:8]}"
    create_topic(clusters.source, t, 2)
    produce(
        clusters.source,
        t,
        [
            (i % 2, b"key-%d" % i, b"value-%d" % i, [("seq", b"%d" % i)], BASE_TS + i)
            for i in range(60)
        ],
    )
    doc = pipeline_dict(clusters, f"pverify-{uuid.uuid4().hex[:8]}", [t])
    run_until_caught_up(spark, tmp, doc)
    return t, doc


def corrupt_it(parts: dict[int, list[Rec]]) -> None:
    """The corruptions the tests look for (the ``replicated`` topic: 30 records each in
    partitions 0 and 1, target offsets = source offsets)."""
    p0, p1 = parts[0], parts[1]
    p0[5] = p0[5]._replace(value=b"CHANGED")  # source @5 -> target @5
    del p0[12]  # source @12 missing; later target offsets are one less
    p0[19], p0[20] = p0[20], p0[19]  # source @20, @21 at target @20, @19
    p0[26] = p0[26]._replace(timestamp=p0[26].timestamp + 1)  # source @27 -> target @26
    p1.insert(8, Rec.make(b"intruder", b"not from the source", [], BASE_TS))


def test_changed_missing_reordered_and_extra_records_are_named_by_place(
    clusters, spark, tmp_path, topic_name, replicated
):
    t, doc = replicated
    corrupt = topic_name("corrupt")

    copy_topic(clusters.target, t, corrupt, corrupt_it)

    report = verify(spark, tmp_path, routed_to(doc, t, corrupt))

    assert not report.ok
    assert places(report, t, 0) == [
        ("changed", (5,), 0, (5,), ("value",)),
        ("missing", (12,), None, (), ()),
        ("reordered", (20, 21), 0, (19, 20), ()),
        ("changed", (27,), 0, (26,), ("timestamp",)),
    ]
    assert places(report, t, 1) == [("extra", (), 1, (8,), ())]
    text = report.render()
    assert f"changed value: source {t}[0]@5 vs target {corrupt}[0]@5" in text
    assert f"missing: source {t}[0]@12 is not on the target" in text
    assert f"extra: target {corrupt}[1]@8 matches no source record" in text
    assert "2 partitions differ (5 differences" in report.summary()


def test_a_range_from_a_timestamp_or_a_sample_names_only_the_places_inside_it(
    clusters, spark, tmp_path, topic_name, replicated
):
    t, doc = replicated
    corrupt = topic_name("corrupt")
    copy_topic(clusters.target, t, corrupt, corrupt_it)
    doc = routed_to(doc, t, corrupt)

    # Records i >= 24: source offsets 12.. in both partitions (record i is in i % 2, @i // 2).
    report = verify(spark, tmp_path, doc, from_timestamp_ms=BASE_TS + 24)

    assert [(r.partition, r.start, r.until) for r in report.results] == [(0, 12, 30), (1, 12, 30)]
    assert places(report, t, 0) == [
        ("missing", (12,), None, (), ()),
        ("reordered", (20, 21), 0, (19, 20), ()),
        ("changed", (27,), 0, (26,), ("timestamp",)),
    ]
    assert places(report, t, 1) == []  # the intruder at target @8 is before the range
    assert [r.before for r in report.results] == [12, 13]

    report = verify(spark, tmp_path, doc, sample=5)

    assert [(r.partition, r.start, r.until) for r in report.results] == [(0, 25, 30), (1, 25, 30)]
    assert places(report, t, 0) == [("changed", (27,), 0, (26,), ("timestamp",))]
    assert places(report, t, 1) == []


def test_an_extra_record_produced_to_the_target_fails_the_cli_naming_it(
    clusters, tmp_path, topic_name, replicated
):
    t, doc = replicated
    extra_target = topic_name("extra")
    copy_topic(clusters.target, t, extra_target)
    produce(clusters.target, extra_target, [(1, b"late", b"written on the target", [], BASE_TS)])
    path = write_pipeline(tmp_path, routed_to(doc, t, extra_target))

    run = k2k_cli("verify", "-f", str(path), "--json")

    assert run.returncode == 1, run.stderr
    out = json.loads(run.stdout)
    assert out["ok"] is False
    bad = [p for p in out["partitions"] if not p["ok"]]
    assert [(p["topic"], p["partition"]) for p in bad] == [(t, 1)]
    assert bad[0]["differences"] == [
        {
            "kind": "extra",
            "sourceOffsets": [],
            "targetPartition": 1,
            "targetOffsets": [30],
            "fields": [],
            "source": None,
            "target": {"key": "late", "value": "written on the target"},
        }
    ]
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {out['summary']}"], run.stderr
    assert "Traceback" not in run.stderr


def test_an_at_least_once_replay_is_reported_as_duplicates_not_differences(
    clusters, spark, tmp_path, topic_name, replicated
):
    t, doc = replicated
    replayed = topic_name("replayed")

    def replay(parts: dict[int, list[Rec]]) -> None:
        p0 = parts[0]
        parts[0] = p0[:20] + p0[14:20] + p0[20:]  # a runner died after @19, committed @14

    copy_topic(clusters.target, t, replayed, replay)

    report = verify(spark, tmp_path, routed_to(doc, t, replayed))

    assert report.ok, report.render()
    assert [(r.partition, r.duplicates, r.matched, r.target_records) for r in report.results] == [
        (0, 6, 30, 36),
        (1, 0, 30, 30),
    ]
    assert report.summary().endswith("all match, 6 at-least-once duplicates on the target")


@pytest.mark.parametrize("tracing", [True, False], ids=["tracing-headers", "no-tracing-headers"])
def test_hash_partitioning_matches_and_names_a_changed_record(
    clusters, spark, tmp_path, topic_name, tracing
):
    t = topic_name("hash")
    create_topic(clusters.source, t, 3)
    create_topic(clusters.target, t, 4)  # hash: the target has its own partition count
    records = []
    for i in range(90):
        key = None if i % 15 == 0 else b"k%d" % (i % 20)
        part = i % 3 if key is None else (i % 20) % 3  # each key lives in one source partition
        records.append((part, key, b"v%d" % i, [("i", b"%d" % i)], BASE_TS + i))
    produce(clusters.source, t, records)
    doc = pipeline_dict(
        clusters,
        topic_name("phash"),
        [t],
        features={"tracingHeaders": "enabled" if tracing else "disabled"},
    )
    doc["replication"][1]["sink"]["partition"] = "hash"
    run_until_caught_up(spark, tmp_path, doc)

    report = verify(spark, tmp_path, doc)

    assert report.ok, report.render()
    assert sum(r.matched for r in report.results) == (90 if tracing else 84)
    assert sum(r.not_compared for r in report.results) == (0 if tracing else 6)

    # Change the value of a target record in target partition 2.
    target = read_all(clusters.target, t)
    # Null keys land in a random partition: the victim is the first keyed record from @3 on.
    at = next(k for k, r in enumerate(target[2]) if k >= 3 and r.key is not None)
    victim = target[2][at]
    assert victim.key is not None and murmur2_partition(victim.key, 4) == 2
    source = read_all(clusters.source, t)
    ((src_part, src_offset),) = [
        (p, r.offset)
        for p, recs in source.items()
        for r in recs
        if (r.key, r.value) == (victim.key, victim.value)
    ]
    corrupt = topic_name("hcorrupt")
    stranger = murmur2_partition(b"stranger", 4)  # a key no source partition holds
    stranger_offset = len(target[stranger])

    def change(parts: dict[int, list[Rec]]) -> None:
        parts[2][at] = parts[2][at]._replace(value=b"CHANGED")
        parts[stranger].append(Rec.make(b"stranger", b"x", [], BASE_TS))

    copy_topic(clusters.target, t, corrupt, change)

    report = verify(spark, tmp_path, routed_to(doc, t, corrupt))

    assert not report.ok
    if tracing:
        # Untraced target records are reported by the task of source partition tp % 3.
        assert ("extra", (), stranger, (stranger_offset,), ()) in places(report, t, stranger % 3)
        assert report.unexplained == []
    else:
        assert report.unexplained == [(corrupt, stranger, 1)]
    assert {r.partition for r in report.results if not r.ok} == (
        {src_part, stranger % 3} if tracing else {src_part}
    )
    changed = [d for r in report.results for d in r.differences if d.kind == "changed"]
    assert [(d.source_offsets, d.target_partition, d.target_offsets) for d in changed] == [
        ((src_offset,), 2, (at,))
    ]


def test_offset_mappings_align_records_whose_keys_live_in_several_source_partitions(
    clusters, spark, tmp_path, topic_name
):
    """``partition: hash`` without tracing headers: keys k0..k4 are in both source
    partitions, so only the offset mappings tell which source record a target record is."""
    t = topic_name("map")
    create_topic(clusters.source, t, 2)
    create_topic(clusters.target, t, 3)
    produce(
        clusters.source,
        t,
        [
            (i % 2, None if i % 10 == 0 else b"k%d" % (i % 5), b"v%d" % i, [], BASE_TS + i)
            for i in range(60)
        ],
    )
    name = topic_name("pmap")
    doc = pipeline_dict(
        clusters,
        name,
        [t],
        features={"offsetMapping": "enabled"},
        offsetMapping={"topic": f"__k2k_maps-{name}"},
    )
    doc["replication"][1]["sink"]["partition"] = "hash"
    run_until_caught_up(spark, tmp_path, doc)

    report = verify(spark, tmp_path, doc)

    assert report.ok, report.render()
    assert [(r.matched, r.not_compared) for r in report.results] == [(30, 0), (30, 0)]

    end = end_offsets(clusters.target, t)[2]
    produce(clusters.target, t, [(2, b"k1", b"late", [], BASE_TS)])

    report = verify(spark, tmp_path, doc)

    assert not report.ok
    found = {d for r in report.results for d in places(report, t, r.partition)}
    assert found == {("extra", (), 2, (end,), ())}


def test_a_bad_pipeline_file_or_topic_is_a_one_line_error(clusters, tmp_path, replicated):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: [not, a, mapping]\n")
    run = k2k_cli("verify", "-f", str(bad))
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "Traceback" not in run.stderr
    assert run.stdout == ""

    t, doc = replicated
    path = write_pipeline(tmp_path, doc)
    run = k2k_cli("verify", "-f", str(path), "--topic", "no-such-topic")
    assert run.returncode == 2
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [
        f"error: --topic 'no-such-topic': not a source topic this pipeline replicates "
        f"(replicated now: {t})"
    ], run.stderr
    assert "Traceback" not in run.stderr
