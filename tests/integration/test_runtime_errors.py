"""Runtime faults at start-up: bounded, named, one line, non-zero exit, no traceback."""

from __future__ import annotations

import time

import pytest

from k2k.local import free_port
from tests.integration.conftest import k2k_cli, pipeline_dict, write_pipeline
from tests.kafkautil import create_topic, list_topics

pytestmark = pytest.mark.integration


def _fails_with(tmp_path, doc, *needles, within_s: float = 60):
    path = write_pipeline(tmp_path, doc)
    started = time.monotonic()
    result = k2k_cli("start", "--until-caught-up", "-f", str(path), timeout=within_s + 30)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert elapsed < within_s
    return lines[0]


@pytest.mark.parametrize("cluster", ["source", "target"])
def test_unreachable_cluster_fails_within_connect_timeout_naming_it(
    clusters, tmp_path, topic_name, cluster
):
    dead = f"127.0.0.1:{free_port()}"
    doc = pipeline_dict(clusters, topic_name("punreach"), ["x"])
    doc[cluster]["kafka"]["common"]["bootstrap.servers"] = dead
    doc[cluster]["connectTimeout"] = "3 seconds"
    _fails_with(tmp_path, doc, f"{cluster} cluster unreachable at {dead}", within_s=20)


def test_missing_target_topic_without_auto_create(clusters, tmp_path, topic_name):
    t = topic_name("notarget")
    create_topic(clusters.source, t, 1)
    doc = pipeline_dict(
        clusters, topic_name("pnotarget"), [t], features={"autoCreateTopics": "disabled"}
    )
    _fails_with(tmp_path, doc, f"target topic '{t}'", "missing", "autoCreateTopics")
    assert t not in list_topics(clusters.target)


def test_target_topic_with_too_few_partitions(clusters, tmp_path, topic_name):
    t = topic_name("fewparts")
    create_topic(clusters.source, t, 4)
    create_topic(clusters.target, t, 2)
    doc = pipeline_dict(clusters, topic_name("pfew"), [t])
    _fails_with(tmp_path, doc, f"target topic '{t}' has 2 partitions", "partition: hash")


def test_missing_control_topic_without_auto_create(clusters, tmp_path, topic_name):
    name = topic_name("pnoctl")
    doc = pipeline_dict(clusters, name, ["x"], features={"autoCreateControlTopics": "disabled"})
    _fails_with(
        tmp_path,
        doc,
        f"control topic '__k2k_progress-{name}'",
        "coordination.commit.topic",
        "autoCreateControlTopics",
    )


def test_control_topic_that_is_not_compacted(clusters, tmp_path, topic_name):
    name = topic_name("pdelete")
    create_topic(clusters.target, f"__k2k_progress-{name}", 1, config={"cleanup.policy": "delete"})
    doc = pipeline_dict(clusters, name, ["x"])
    _fails_with(tmp_path, doc, "cleanup.policy='delete'", "compact")


def test_listed_source_topic_that_does_not_exist(clusters, tmp_path, topic_name):
    t = topic_name("nosource")
    doc = pipeline_dict(clusters, topic_name("pnosrc"), [t])
    _fails_with(tmp_path, doc, f"'{t}'", "do not exist on the source cluster")
