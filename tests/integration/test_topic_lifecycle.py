"""Topics that change under a running pipeline (docs/operations.md#topic-lifecycle).

* A source topic that gains partitions: the target topic grows with it (``partition:
  source`` with ``autoCreateTopics``) and the new partitions are copied from their start.
* A source topic that is deleted: no longer replicated, the other topics flow on; one
  created again under the same name (a new topic id) is a new topic, copied from its start,
  whether that happens while k2k runs or while it is stopped. Without topic ids, the old
  committed position would skip the new topic's first records.
* A target topic deleted while replicating: k2k stops with one line saying so (the records
  replicated to it are gone from the target; writing on would hide that).
* A deleted source topic with records never replicated: ``onSourceRecordsLost`` decides.
"""

from __future__ import annotations

import logging
import re

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewPartitions

from k2k.config import load_pipeline
from k2k.errors import ReplicationError
from k2k.pipeline.driver.discovery import Discovery
from k2k.pipeline.driver.positions import StartPositions
from tests.helpers.kafka import create_topic, eventually, list_topics, produce, read_all
from tests.helpers.pipelines import BASE_TS, k2k_cli, latest_progress, pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration


def _records(first: int, count: int, partitions: int, label: str = "") -> list:
    return [
        (
            i % partitions,
            f"k{i}".encode(),
            f"{label}v{i}".encode(),
            [("h", f"{label}{i}".encode())],
            BASE_TS + i,
        )
        for i in range(first, first + count)
    ]


def _contents(bootstrap: str, topic: str) -> dict[int, list]:
    return {p: [r.content() for r in recs] for p, recs in read_all(bootstrap, topic).items()}


def _delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], request_timeout=30)[topic].result()
    eventually(lambda: topic in list_topics(bootstrap), False, timeout=30)


def _topic_id(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)


def _progress(target: str, doc: dict) -> dict:
    """The progress records of ``doc``'s pipeline: (topic, partition) -> record."""
    return latest_progress(target, doc)


def _offsets(target: str, doc: dict, topic: str) -> dict[int, int]:
    return {p: r.offset for (t, p), r in _progress(target, doc).items() if t == topic}


def _lifecycle_pipeline(clusters, topic_name, selection) -> dict:
    return pipeline_dict(
        clusters,
        topic_name("plife"),
        selection,
        replication=[
            {"source": {"name": "source", "topic": selection, "discoveryInterval": "1 second"}},
            {"sink": {"name": "sink", "topic": "source", "partition": "source"}},
        ],
    )


def test_running_pipeline_follows_growth_deletion_and_recreation(
    clusters, tmp_path, topic_name, running_pipeline
):
    """One ``k2k start`` over ``<base>.a`` and ``<base>.b`` (a regular expression):

    1. ``b`` grows from 2 to 3 partitions: the target ``b`` grows too, and the records
       written to the new partition (before k2k noticed it) all arrive there;
    2. ``a`` is deleted: ``b`` keeps flowing, the log says ``a`` is no longer replicated;
    3. ``a`` is created again with more records per partition than the old one had: the
       target ``a`` holds the old records followed by every new one, in order, and the
       progress of ``a`` is the new topic's, carrying its id.
    """
    base = topic_name("life")
    a, b = f"{base}.a", f"{base}.b"
    create_topic(clusters.source, a, 2)
    create_topic(clusters.source, b, 2)
    produce(clusters.source, a, _records(0, 300, 2, "old"))
    produce(clusters.source, b, _records(0, 300, 2))
    doc = _lifecycle_pipeline(clusters, topic_name, re.escape(base) + r"\..*")
    started = {(a, 0): 150, (a, 1): 150}
    proc = running_pipeline(write_pipeline(tmp_path, doc), started)
    try:
        old_a = _contents(clusters.source, a)

        # 1. Growth: the new partition's records were written before k2k saw the partition.
        admin = AdminClient({"bootstrap.servers": clusters.source})
        admin.create_partitions([NewPartitions(b, 3)])[b].result()
        eventually(lambda: len(read_all(clusters.source, b)), 3, timeout=30)
        produce(clusters.source, b, _records(300, 90, 3))
        src_b = eventually(lambda: _contents(clusters.source, b))
        eventually(lambda: _contents(clusters.target, b), src_b, 120, 0.5)
        assert [len(src_b[p]) for p in range(3)] == [180, 180, 30]

        # 2. Deletion: the other topic flows on.
        _delete(clusters.source, a)
        produce(clusters.source, b, _records(390, 60, 3))
        src_b = _contents(clusters.source, b)
        eventually(lambda: _contents(clusters.target, b), src_b, 120, 0.5)
        eventually(lambda: f"source topic {a} was deleted" in proc.output(), True, 60, 0.5)

        # 3. Re-creation with 250 records per partition, past the old position 150.
        create_topic(clusters.source, a, 2)
        new_id = _topic_id(clusters.source, a)
        produce(clusters.source, a, _records(0, 500, 2, "new"))
        new_a = _contents(clusters.source, a)
        expected = {p: old_a[p] + new_a[p] for p in (0, 1)}
        eventually(lambda: _contents(clusters.target, a), expected, 120, 0.5)
        eventually(lambda: _offsets(clusters.target, doc, a), {0: 250, 1: 250}, 60, 0.5)
        progress = _progress(clusters.target, doc)
        assert {progress[(a, p)].topic_id for p in (0, 1)} == {new_id}
        assert "was deleted and created again" in proc.output()
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
    assert "Traceback" not in proc.output()


def test_topic_recreated_while_stopped_is_copied_from_its_start(clusters, tmp_path, topic_name):
    """Replicate a topic, stop; delete it and create it again with more records per partition
    than were committed; the next run copies the whole new topic (the old position would have
    skipped its first 100 records per partition) and says why."""
    t = topic_name("again")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(0, 200, 2, "old"))
    old = _contents(clusters.source, t)
    doc = pipeline_dict(clusters, topic_name("pagain"), [t])
    path = write_pipeline(tmp_path, doc)
    first = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert first.returncode == 0, first.stderr

    _delete(clusters.source, t)
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(0, 400, 2, "new"))
    new = _contents(clusters.source, t)
    second = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert second.returncode == 0, second.stderr
    assert f"source topic {t} was deleted and created again" in second.stderr
    assert _contents(clusters.target, t) == {p: old[p] + new[p] for p in (0, 1)}
    assert _offsets(clusters.target, doc, t) == {0: 200, 1: 200}


def test_target_topic_deleted_while_running_stops_with_one_line(
    clusters, tmp_path, topic_name, running_pipeline
):
    """Deleting the target topic under a running pipeline stops it with exit 1 and one line
    naming the topic and the ways on; the broker never re-creates the topic on k2k's writes."""
    t = topic_name("tgtdel")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(0, 200, 2))
    doc = _lifecycle_pipeline(clusters, topic_name, [t])
    started = {(t, 0): 100, (t, 1): 100}
    proc = running_pipeline(write_pipeline(tmp_path, doc), started)
    try:
        _delete(clusters.target, t)
        produce(clusters.source, t, _records(200, 100, 2))
        code = proc.proc.wait(120)
    except BaseException:
        proc.kill()
        raise
    out = proc.output()
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert code == 1, out[-3000:]
    assert len(errors) == 1, out[-3000:]
    assert f"target topic '{t}' was deleted while replicating" in errors[0]
    assert f"k2k offsets reset -f <pipeline file> --topic {t}" in errors[0]
    assert "Traceback" not in out
    assert t not in list_topics(clusters.target)  # nothing wrote it back into existence
    assert _offsets(clusters.target, doc, t) == {0: 100, 1: 100}  # progress did not move


@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_deleted_topic_with_unreplicated_records_follows_the_policy(
    clusters, tmp_path, topic_name, caplog, policy
):
    """Discovery on real brokers: a selected topic is deleted while its committed position
    (10) is below the end last seen (40). ``fail`` stops naming the range; ``continue``
    logs it and drops the topic."""
    t = topic_name("lost")
    create_topic(clusters.source, t, 1)
    produce(clusters.source, t, _records(0, 40, 1))
    doc = pipeline_dict(
        clusters, topic_name("plost"), [t], errorHandling={"onSourceRecordsLost": policy}
    )
    discovery = Discovery(load_pipeline([write_pipeline(tmp_path, doc)]))
    positions = StartPositions()
    positions.load({(t, 0): 10})
    assert list(discovery.discover(positions)) == [t]
    _delete(clusters.source, t)
    seen = {(t, 0): 40}
    if policy == "fail":
        with pytest.raises(ReplicationError, match=rf"records {re.escape(t)}\[0\]@10\.\.39 were"):
            discovery.discover(positions, latest=seen)
        return
    with caplog.at_level(logging.WARNING, logger="k2k.planner"):
        assert discovery.discover(positions, latest=seen) == {}
    assert f"records {t}[0]@10..39 were deleted with it" in caplog.text


def test_partitions_added_while_stopped_start_at_earliest(clusters, tmp_path, topic_name):
    """With ``auto.offset.reset: latest`` the first run copies nothing of what was there;
    partitions added while k2k is stopped are still copied from their start (their records
    are not "history" of the pipeline), the old ones from their committed positions."""
    t = topic_name("grownstopped")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(0, 100, 2, "before"))
    doc = pipeline_dict(clusters, topic_name("pgrown"), [t])
    doc["source"]["kafka"]["consumer"] = {"auto.offset.reset": "latest"}
    path = write_pipeline(tmp_path, doc)
    first = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert first.returncode == 0, first.stderr
    assert _offsets(clusters.target, doc, t) == {0: 50, 1: 50}
    assert _contents(clusters.target, t) == {0: [], 1: []}

    admin = AdminClient({"bootstrap.servers": clusters.source})
    admin.create_partitions([NewPartitions(t, 3)])[t].result()
    eventually(lambda: len(read_all(clusters.source, t)), 3, timeout=30)
    after = _records(100, 90, 3, "after")
    produce(clusters.source, t, after)
    second = k2k_cli("start", "--until-caught-up", "-f", str(path))
    assert second.returncode == 0, second.stderr
    src = _contents(clusters.source, t)
    assert _contents(clusters.target, t) == {0: src[0][50:], 1: src[1][50:], 2: src[2]}
    assert len(src[2]) == 30
    assert _offsets(clusters.target, doc, t) == {0: 80, 1: 80, 2: 30}


def test_topic_recreated_within_a_lease_is_planned_again(
    clusters, tmp_path, topic_name, running_pipeline
):
    """Deleted and created again between two checks (no discovery pass sees it missing): the
    runners fail on a position past the new topic's end, and the planner plans again instead
    of stopping; the new topic is copied from its start after the old one's records."""
    t = topic_name("quick")
    create_topic(clusters.source, t, 2)
    produce(clusters.source, t, _records(0, 300, 2, "old"))
    doc = pipeline_dict(
        clusters,
        topic_name("pquick"),
        [t],
        replication=[
            {"source": {"name": "source", "topic": [t], "discoveryInterval": "1 hour"}},
            {"sink": {"name": "sink", "topic": "source", "partition": "source"}},
        ],
        spark={"leaseDuration": "30 minutes"},
    )
    started = {(t, 0): 150, (t, 1): 150}
    proc = running_pipeline(write_pipeline(tmp_path, doc), started)
    try:
        old = _contents(clusters.source, t)
        _delete(clusters.source, t)
        create_topic(clusters.source, t, 2)
        produce(clusters.source, t, _records(0, 100, 2, "new"))
        new = _contents(clusters.source, t)
        expected = {p: old[p] + new[p] for p in (0, 1)}
        eventually(lambda: _contents(clusters.target, t), expected, 180, 0.5)
        eventually(lambda: _offsets(clusters.target, doc, t), {0: 50, 1: 50}, 60, 0.5)
        assert "failed while source topics changed; planning again" in proc.output()
        assert proc.proc.poll() is None
    finally:
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]
