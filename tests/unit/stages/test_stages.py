"""Stage policies: one config-to-behaviour test per policy, and murmur2 against Kafka's vectors."""

import pickle

import pytest

from k2k import stages
from k2k.kafka import murmur2
from k2k.pipeline.plan import (
    ClientSpec,
    CommitSpec,
    ControlTopicSpec,
    LeaseSpec,
    PartitionRange,
    PolicySpec,
    RunnerGroup,
    plan_groups,
)

# Kafka's own test vectors (UtilsTest.testMurmur2).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), JAVA_MURMUR2.items())
def test_murmur2_matches_java(data, expected):
    assert murmur2.murmur2(data) == expected


def test_murmur2_partition_is_positive_modulo():
    assert murmur2.murmur2_partition(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10
    assert all(0 <= murmur2.murmur2_partition(bytes([i]), 7) < 7 for i in range(256))


def test_selection_regex_is_full_match_and_skips_internal_topics():
    sel = stages.TopicSelection("orders.*", excluded=["orders-control"])
    assert sel.should_replicate("orders")
    assert sel.should_replicate("orders.eu")
    assert not sel.should_replicate("my-orders")
    assert not sel.should_replicate("orders-control")
    for internal in ["__orders", ".orders", "orders.internal", "__consumer_offsets"]:
        assert not stages.TopicSelection(".*").should_replicate(internal)


def test_selection_by_names_is_exact():
    sel = stages.TopicSelection(["a", "b.c"])
    assert [sel.should_replicate(t) for t in ["a", "b.c", "bxc", "aa"]] == [
        True,
        True,
        False,
        False,
    ]


def test_routing_policies():
    assert stages.SameTopicName().route("t") == "t"
    assert stages.PrefixSuffixTopicName("dr.", "").route("t") == "dr.t"
    assert stages.PrefixSuffixTopicName("", ".copy").route("t") == "t.copy"
    assert stages.StaticTopicName("all").route("x") == "all"
    explicit = stages.ExplicitTopicMap({"a": "b"})
    assert explicit.route("a") == "b"
    assert explicit.route("z") is None


def test_plan_groups_balances_by_weight_and_never_exceeds_slots():
    ranges = [PartitionRange("t", p, 0, w, False) for p, w in enumerate([100, 90, 10, 5, 1, 1])]
    groups = plan_groups(ranges, 2, lambda r: r.end)
    assert len(groups) == 2
    loads = sorted(sum(r.end for r in g.ranges) for g in groups)
    assert loads == [102, 105]  # greedy: heaviest first onto the lightest group
    assert sorted(r.partition for g in groups for r in g.ranges) == list(range(6))
    assert len(plan_groups(ranges[:1], 8, lambda r: 1)) == 1


def test_everything_sent_to_tasks_pickles():
    tracing = stages.TracingHeaders("a", "b", "c", "d", "p")
    plan = stages.TopicPlan("t", "u", stages.SourcePartition(), True, True, tracing)
    spec = LeaseSpec(
        lease_id=1,
        topics={"t": plan},
        topic_ids={"t": "id"},
        lease_s=0.0,
        live=False,
        control=("h", 1, "token"),
        observer=None,
        telemetry=True,
        clients=ClientSpec({"bootstrap.servers": "x"}, {}, {}, None),
        commit=CommitSpec(
            exactly_once=True,
            batch_size=10,
            batch_timeout_s=1.0,
            ack_timeout_s=9,
            identical_offsets=False,
        ),
        control_topics=ControlTopicSpec("p", "m", "g", "ctl", 1, "asg", 1, 30.0, 0.0),
        policies=PolicySpec(
            on_sync_timeout="fail",
            on_bad_record="ignore",
            on_records_lost="fail",
            on_foreign_writes="warn",
            on_offset_gap="fail",
        ),
    )
    group = RunnerGroup(0, (PartitionRange("t", 0, 5, None, True),))
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert pickle.loads(pickle.dumps(group)) == group


def test_selection_exclude_wins_in_both_forms():
    by_regex = stages.TopicSelection(["a", "a.test", "b"], exclude=".*\\.test")
    assert [t for t in ["a", "a.test", "b"] if by_regex.should_replicate(t)] == ["a", "b"]
    by_names = stages.TopicSelection("a.*", exclude=["a.2"])
    assert [t for t in ["a.1", "a.2", "a.3"] if by_names.should_replicate(t)] == ["a.1", "a.3"]
    # A regex exclude matches whole names only, as the topic regex does.
    assert stages.TopicSelection(".*", exclude="test").should_replicate("test-orders")
