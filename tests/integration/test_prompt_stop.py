"""A stop does not wait out an interval: leaving the commit group ends the heartbeats at
once, and still says so in the assignment topic."""

from __future__ import annotations

import time

import pytest

from k2k.config import load_pipeline
from k2k.coordination.controltopics import assignment_member, ensure_control_topics
from k2k.formats.assignment import MemberRecord
from k2k.kafka.admin import ClusterView
from tests.helpers.kafka import read_all
from tests.helpers.pipelines import pipeline_dict, write_pipeline

pytestmark = pytest.mark.integration


def test_leaving_right_after_joining_does_not_wait_out_a_heartbeat(clusters, tmp_path, topic_name):
    name = topic_name("prompt-stop")
    cfg = load_pipeline([write_pipeline(tmp_path, pipeline_dict(clusters, name, [name]))])
    partitions = ensure_control_topics(cfg, ClusterView.of(cfg.target)).assignment
    member = assignment_member(cfg, "prompt", standby=False, partitions=partitions)
    assert member.heartbeat_s == 2.0  # the default grace window's interval
    try:
        member.catch_up()  # the heartbeat thread starts, and sleeps its first interval
        started = time.monotonic()
        member.leave({})
        took = time.monotonic() - started
    finally:
        member.close()
    assert took < 1.0, f"leaving took {took:.2f} s"
    topic = cfg.coordination.assignment.topic
    members = [
        MemberRecord.decode(r.key, r.value, topic)
        for recs in read_all(clusters.target, topic, "read_uncommitted").values()
        for r in recs
        if b'"member"' in (r.key or b"")
    ]
    mine = [m.state for m in members if m.group == cfg.commit_group]
    # Heartbeats ("alive"; a second one if joining took longer than an interval), then "left".
    assert mine[-1] == "left" and set(mine[:-1]) == {"alive"}, members
