"""``k2k start --mm2`` with Connect transforms on real brokers: a Filter whose negated
TopicNameMatches keeps one of two topics (matched on the remote name, as MM2 matches it), an
InsertHeader applied to records with a `trace` header (HasHeaderKey) and a MaskField$Value
copy exactly the records those transforms' documented semantics give, record by record.
MaskField is expected as Connect defines it for schemaless maps, here JSON values (MM2 itself
hands transforms raw bytes, on which it fails: docs/mm2.md#transforms-and-predicates)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kafka import Rec, create_topic, list_topics, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."


def _properties(source: str, target: str, alias: str, keep: str, drop: str) -> str:
    flow = f"{alias}->backup"
    # Written as in the file: `\\.` is the regex `\.`, a literal dot.
    pattern = f"{alias}\\\\.{keep}"
    return f"""\
clusters = {alias}, backup
{alias}.bootstrap.servers = {source}
backup.bootstrap.servers = {target}
{flow}.enabled = true
{flow}.topics = {keep}, {drop}
replication.policy.class = org.apache.kafka.connect.mirror.DefaultReplicationPolicy
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
sync.topic.acls.enabled = false
transforms = onlyKept, tag, mask
{flow}.transforms.onlyKept.type = {T}Filter
{flow}.transforms.onlyKept.predicate = isKept
{flow}.transforms.onlyKept.negate = true
{flow}.transforms.tag.type = {T}InsertHeader
{flow}.transforms.tag.header = origin
{flow}.transforms.tag.value.literal = {alias}
{flow}.transforms.tag.predicate = traced
{flow}.transforms.mask.type = {T}MaskField$Value
{flow}.transforms.mask.fields = ssn, pin
{flow}.predicates = isKept, traced
{flow}.predicates.isKept.type = {T}predicates.TopicNameMatches
{flow}.predicates.isKept.pattern = {pattern}
{flow}.predicates.traced.type = {T}predicates.HasHeaderKey
{flow}.predicates.traced.name = trace
"""


def _records(partitions: int, n: int) -> list[tuple]:
    out = []
    for i in range(n):
        headers = [("trace", b"t%d" % i)] if i % 3 == 0 else [("h", b"%d" % i)]
        value = {"id": i, "ssn": f"123-45-{i:04d}", "pin": 1000 + i, "name": f"n{i}"}
        out.append((i % partitions, b"k%d" % i, json.dumps(value).encode(), headers, BASE_TS + i))
    return out


def _expected(alias: str) -> Callable[[Rec], tuple[Any, ...]]:
    """The three transforms of the kept topic, in the chain's order, written out plainly."""

    def expect(rec: Rec) -> tuple[Any, ...]:
        # Filter: kept, the negated predicate is false (the remote name matches the pattern).
        headers = list(rec.headers)
        if any(name == "trace" for name, _ in rec.headers):  # InsertHeader, when HasHeaderKey
            headers.append(("origin", alias.encode()))  # appended after the record's own
        value = json.loads(rec.value)  # MaskField: each field gets its type's empty value
        value["ssn"], value["pin"] = "", 0
        return rec.key, value, headers, rec.timestamp

    return expect


def _content(rec: Rec) -> tuple[Any, ...]:
    """A record as compared: the value as JSON (MaskField defines fields, not spacing)."""
    return rec.key, json.loads(rec.value), rec.headers, rec.timestamp


def test_start_mm2_applies_the_files_transforms(
    clusters, tmp_path: Path, topic_name: Callable[[str], str]
) -> None:
    alias = f"src_{uuid.uuid4().hex[:8]}"
    keep, drop = topic_name("keep"), topic_name("drop")
    create_topic(clusters.source, keep, 2)
    create_topic(clusters.source, drop, 1)
    produce(clusters.source, keep, _records(2, 60))
    produce(clusters.source, drop, _records(1, 10))
    path = tmp_path / "mm2.properties"
    text = _properties(clusters.source, clusters.target, alias, keep, drop)
    path.write_text(text, encoding="utf-8")

    done = k2k_cli("start", "--mm2", str(path), "--until-caught-up", timeout=400)

    assert done.returncode == 0, done.stderr[-3000:]
    flow = f"{alias}->backup"
    noted = [line for line in done.stderr.splitlines() if f"{flow}.transforms" in line]
    assert noted == []  # every transform property was mapped, none left out
    source = read_all(clusters.source, keep)
    copied = read_all(clusters.target, f"{alias}.{keep}")
    expect = _expected(alias)
    assert sorted(copied) == sorted(source) == [0, 1]
    for partition, recs in source.items():
        assert [_content(r) for r in copied[partition]] == [expect(r) for r in recs]
    tagged = [
        r for recs in copied.values() for r in recs if ("origin", alias.encode()) in r.headers
    ]
    assert len(tagged) == 20  # one record in three has a trace header
    # Every record of the other topic is dropped: its remote name does not match.
    dropped = f"{alias}.{drop}"
    if dropped in list_topics(clusters.target):
        assert sum(len(recs) for recs in read_all(clusters.target, dropped).values()) == 0
