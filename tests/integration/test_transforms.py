"""Transforms on real brokers and real Spark: a pipeline that filters by a header and by a
JSON field, drops a header, inserts two and masks a JSON field copies exactly the records
and bytes a plain model of those steps expects; its progress reaches the source's end even
when the last records were dropped; and groups positioned on dropped records fail over
exactly through the Offset Mapping app."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import time

import pytest

from k2k.config import load_pipeline
from k2k.verify.job import run_verify
from tests.helpers.eos import background_load, eos_pipeline
from tests.helpers.groups import failover_reads
from tests.helpers.kafka import Rec, create_topic, end_offsets, eventually, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    committed_total,
    k2k_cli,
    latest_progress,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)
from tests.helpers.procs import K2KProcess
from tests.integration.test_offset_mapping_app import app_config, cli_once, commit_source

pytestmark = pytest.mark.integration

SECRET = "mask-key"
STEPS = [
    {"filter": {"drop": 'has(headers.env) && headers.env == "test"'}},
    {"filter": {"keep": "valueJson == null || valueJson.amount >= 5"}},
    {"dropHeaders": {"names": ["x-internal"]}},
    {"insertHeader": {"name": "origin", "value": "eu-west"}},
    {"insertHeader": {"name": "from", "expression": 'topic + ":" + string(offset)'}},
    {"maskFields": {"fields": ["value.email"], "hashSecret": SECRET}},
]


def _source_records(part: int, n: int) -> list[tuple]:
    """Varied records of one partition; the last two of each are dropped by the filters."""
    out = []
    for i in range(n):
        headers = [("trace", b"t%d" % i)]
        if i % 7 == 3 or i == n - 1:
            headers.append(("env", b"test"))
        if i % 2:
            headers.append(("x-internal", b"secret"))
        amount = 1 if i % 5 == 0 or i == n - 2 else 10 + i
        value = json.dumps({"id": i, "email": f"u{i}@example.com", "amount": amount}).encode()
        if i == 4:
            value = None  # a tombstone passes the JSON steps
        out.append((part, b"k%d" % i, value, headers, BASE_TS + i))
    return out


def _expected(topic: str, rec: Rec) -> Rec | None:
    """The steps above, written out plainly: what the target must hold for ``rec``."""
    headers = dict(rec.headers)
    if headers.get("env") == b"test":
        return None
    value = json.loads(rec.value) if rec.value is not None else None
    if value is not None and value["amount"] < 5:
        return None
    kept = [(k, v) for k, v in rec.headers if k != "x-internal"]
    kept += [("origin", b"eu-west"), ("from", f"{topic}:{rec.offset}".encode())]
    data = rec.value
    if value is not None:
        digest = hmac.new(SECRET.encode(), json.dumps(value["email"]).encode(), hashlib.sha256)
        value["email"] = digest.hexdigest()
        data = json.dumps(value, separators=(",", ":")).encode()
    return Rec(rec.key, data, kept, rec.timestamp, -1)


def test_filters_header_steps_and_a_mask_copy_exactly_what_the_steps_say(
    clusters, spark, tmp_path, topic_name
):
    t = topic_name("xf")
    create_topic(clusters.source, t, 2)
    n = 40
    produce(clusters.source, t, [r for p in (0, 1) for r in _source_records(p, n)])
    doc = pipeline_dict(clusters, topic_name("pxf"), t, features={"offsetMapping": "enabled"})
    doc["replication"].insert(1, {"transforms": STEPS})
    doc["offsetMapping"] = {"topic": f"__k2k_offset_mappings-{doc['name']}"}
    stats = run_until_caught_up(spark, tmp_path, doc)

    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    dropped = 0
    for part in (0, 1):
        expected = [e for r in src[part] if (e := _expected(t, r)) is not None]
        dropped += len(src[part]) - len(expected)
        got = [Rec(r.key, r.value, r.headers, r.timestamp, -1) for r in dst.get(part, [])]
        assert got == expected, f"partition {part}"
    assert stats.filtered == dropped and stats.records == 2 * n - dropped
    # The last records of each partition were dropped; progress still covers them.
    progress = latest_progress(clusters.target, doc)
    assert {p: progress[(t, p)].offset for p in (0, 1)} == end_offsets(clusters.source, t)

    # verify compares the target with the source as the steps write it; the same pipeline
    # without its mask finds every copied record with an email changed.
    report = run_verify(load_pipeline([write_pipeline(tmp_path, doc, "v.yaml")]), spark=spark)
    assert report.ok, report.render()
    assert "compared after the pipeline's transforms" in report.summary()
    assert sum(r.source_records for r in report.results) == 2 * n - dropped
    unmasked = {**doc, "replication": [*doc["replication"]]}
    unmasked["replication"][1] = {"transforms": STEPS[:-1]}
    wrong = run_verify(load_pipeline([write_pipeline(tmp_path, unmasked, "u.yaml")]), spark=spark)
    assert not wrong.ok
    assert sum(r.difference_count for r in wrong.results) > 0

    # Groups on a dropped record (3, 5: env=test, amount 1), on a kept one, at the end:
    # each resumes on the target at the next copied record, nothing skipped or read again.
    positions = {"on-dropped": {(t, 0): 3, (t, 1): 5}, "between": {(t, 0): 6, (t, 1): n - 2}}
    groups = {kind: f"{doc['name']}-{kind}" for kind in positions}
    for kind, where in positions.items():
        commit_source(clusters, groups[kind], where)
    app = app_config(clusters, doc["name"], doc["offsetMapping"]["topic"], list(groups.values()))
    assert cli_once(tmp_path, app).returncode == 0

    for kind, group in groups.items():
        copy = lambda rec: _expected(t, rec)  # noqa: E731
        total, skipped, again = failover_reads(clusters, group, positions[kind], str, copy)
        assert (skipped, again) == (0, 0), kind
        assert total > 0 or kind == "between"


EOS_STEPS = [
    {"filter": {"drop": 'headers["h-seq"].endsWith("3")'}},
    {"dropHeaders": {"names": ["h-kind"]}},
    {"insertHeader": {"name": "origin", "value": "eu-west"}},
]


def _eos_expected(rec: Rec) -> Rec | None:
    seq = dict(rec.headers)["h-seq"]
    if seq.endswith(b"3"):
        return None
    headers = [(k, v) for k, v in rec.headers if k != "h-kind"] + [("origin", b"eu-west")]
    return Rec(rec.key, rec.value, headers, rec.timestamp, -1)


def test_exactly_once_with_a_filter_across_kill_9_is_exact(clusters, tmp_path, topic_name):
    """Exactly-once with steps that drop and rewrite records, the process SIGKILLed mid-copy
    while a mixed transactional load arrives: the target holds each kept record once, as
    the steps write it, and nothing else."""
    t = topic_name("xfeos")
    name = topic_name("pxfeos")
    create_topic(clusters.source, t, 4)
    create_topic(clusters.target, t, 4)
    doc = eos_pipeline(clusters, name, [t])
    doc["replication"].insert(1, {"transforms": EOS_STEPS})
    path = write_pipeline(tmp_path, doc)
    commit_topic = doc["coordination"]["commit"]["topic"]
    with background_load(clusters.source, t, 400_000, 4, rate=5_000) as counts:
        proc = K2KProcess(path, tmp_path / "killed.log")
        # Killed once it has committed a few transactions, mid-way through the next ones.
        eventually(
            lambda: committed_total(clusters.target, commit_topic, name) > 2_000,
            expected=True,
            timeout=120,
            interval=0.2,
        )
        time.sleep(random.Random(49).uniform(0.0, 2.0))  # the kill's moment, not a wait
        proc.kill()
    result = k2k_cli("start", "--until-caught-up", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    src, dst = read_all(clusters.source, t), read_all(clusters.target, t)
    kept = 0
    for part in range(4):
        expected = [e for r in src[part] if (e := _eos_expected(r)) is not None]
        got = [Rec(r.key, r.value, r.headers, r.timestamp, -1) for r in dst.get(part, [])]
        assert len(got) == len(expected), f"partition {part}: {len(got)} != {len(expected)}"
        assert got == expected, f"partition {part}"
        kept += len(expected)
    assert 0 < kept < counts["plain"] + counts["committed"]


def test_a_json_step_on_data_that_is_not_json_stops_with_one_line(clusters, tmp_path, topic_name):
    t = topic_name("xfbad")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, [(0, b"k", b'{"email": "a@b"}', [], BASE_TS)])
    produce(clusters.source, t, [(0, b"k", b"plain text", [], BASE_TS + 1)])
    doc = pipeline_dict(clusters, topic_name("pxfbad"), t)
    doc["replication"].insert(1, {"transforms": [{"maskFields": {"fields": ["value.email"]}}]})
    path = write_pipeline(tmp_path, doc)
    result = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert result.returncode == 1
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [
        f"error: transform failed on {t}[0]@1: replication.transforms[0] (maskFields): "
        "the value is not JSON"
    ], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    # Nothing of the failing record was written (the steps run before a batch is produced).
    written = [r.value for r in read_all(clusters.target, t).get(0, [])]
    assert b"plain text" not in written and written in ([], [b'{"email":""}'])
