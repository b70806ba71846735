"""Topics created while running are picked up; internal and control topics never are."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from k2k.formats import ProgressRecord
from tests.helpers.kafka import (
    create_topic,
    end_offsets,
    eventually,
    list_topics,
    produce,
    read_all,
)
from tests.helpers.pipelines import BASE_TS, K2K, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration


def _count(bootstrap: str, topic: str) -> int:
    if topic not in list_topics(bootstrap):
        return 0
    return sum(len(v) for v in read_all(bootstrap, topic, timeout=10).values())


def test_new_topic_is_replicated_while_running_internal_topics_never(
    clusters, tmp_path, topic_name
):
    stem = topic_name("disc")
    first = f"{stem}-first"
    later = f"{stem}-later"
    internal = [f"__{stem}-x", f".{stem}-hidden", f"{stem}.checkpoints.internal"]
    name = topic_name("pdisc")
    control = f"{stem}-control"  # a control topic the regex also matches
    create_topic(clusters.source, first, 2)
    produce(
        clusters.source,
        first,
        [(i % 2, b"k", b"first", [], BASE_TS + i) for i in range(100)],
    )
    doc = pipeline_dict(
        clusters,
        name,
        f"(__|\\.)?{re.escape(stem)}.*",
        coordination={"commit": {"topic": control}},
    )
    doc["replication"][0]["source"]["discoveryInterval"] = "1 second"
    path = write_pipeline(tmp_path, doc)
    proc = subprocess.Popen(
        [*K2K, "start", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        eventually(lambda: _count(clusters.target, first), expected=100, timeout=120)
        for t in [*internal, control]:  # a source topic named like our control topic, too
            create_topic(clusters.source, t, 1)
            produce(clusters.source, t, [(0, b"k", b"internal", [], BASE_TS)])
        create_topic(clusters.source, later, 3)
        produce(
            clusters.source,
            later,
            [(i % 3, b"k", b"later", [], BASE_TS + i) for i in range(30)],
        )
        source_ends = {
            t: end_offsets(clusters.source, t) for t in [first, later, control, *internal]
        }

        eventually(lambda: _count(clusters.target, later), expected=30, timeout=60)

        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    src, dst = read_all(clusters.source, later), read_all(clusters.target, later)
    assert {p: [(r.key, r.value, r.timestamp) for r in v] for p, v in dst.items()} == {
        p: [(r.key, r.value, r.timestamp) for r in v] for p, v in src.items()
    }
    target_topics = list_topics(clusters.target)
    for t in internal:
        assert t not in target_topics
    # The target's control topic holds progress records only: the source topic that
    # carries the same name was not copied into it.
    for recs in read_all(clusters.target, control).values():
        for r in recs:
            assert ProgressRecord.decode(r.key, r.value, control, 0, r.offset).group == name
    # Nothing was written to the source: end offsets unchanged since the test's own writes.
    assert {t: end_offsets(clusters.source, t) for t in source_ends} == source_ends
