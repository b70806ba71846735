"""The compiled per-topic plan: from the pipeline config to what the runner does per topic."""

import pickle

from k2k.stages import KeyHash, SourcePartition, TracingHeaders, compile_topic_plans


def test_plan_follows_the_config(build):
    cfg = build(
        {
            "features": {
                "headerReplication": "enabled",
                "keepRecordCreationTimestamp": "disabled",
                "tracingHeaders": {"topic": "enabled", "offset": "enabled"},
            },
            "tracing": {"headers": {"topic": "src_topic"}},
        }
    )
    plans = compile_topic_plans(cfg, {"orders": "dr.orders", "orders.eu": "dr.orders.eu"})
    assert sorted(plans) == ["orders", "orders.eu"]
    plan = plans["orders"]
    assert (plan.source, plan.target) == ("orders", "dr.orders")
    assert isinstance(plan.partitioning, SourcePartition)
    assert plan.partitioning.target_partition(5) == 5
    assert plan.keep_headers is True
    assert plan.keep_timestamp is False
    assert plan.tracing == TracingHeaders("src_topic", None, "k2k_offset", None, "orders-dr")
    assert plan.transform is None  # the fast path: no per-record rewrite


def test_defaults_keep_timestamps_drop_headers_add_no_tracing(build):
    plan = compile_topic_plans(build(), {"orders": "orders"})["orders"]
    assert plan.keep_headers is False
    assert plan.keep_timestamp is True
    assert plan.tracing is None


def test_hash_partitioning_lets_the_producer_choose_and_spreads_runs(build):
    cfg = build({"replication": [{"source": {"topic": "orders"}}, {"sink": {"partition": "hash"}}]})
    plan = compile_topic_plans(cfg, {"orders": "orders"})["orders"]
    assert isinstance(plan.partitioning, KeyHash)
    assert plan.partitioning.target_partition(3) == -1
    assert plan.partitioning.spreads is True
    assert SourcePartition.spreads is False


def test_tracing_headers_go_around_the_offset_in_order(build):
    cfg = build({"features": {"tracingHeaders": "enabled"}})
    tracing = compile_topic_plans(cfg, {"orders": "orders"})["orders"].tracing
    assert tracing is not None
    before, after = tracing.around_offset("orders", 7)
    assert before == [("k2k_topic", b"orders"), ("k2k_partition", b"7")]
    assert after == [("k2k_pipeline", b"orders-dr")]
    assert tracing.offset == "k2k_offset"


def test_plans_pickle_for_the_executors(build):
    plans = compile_topic_plans(build({"features": {"tracingHeaders": "enabled"}}), {"a": "b"})
    assert pickle.loads(pickle.dumps(plans)) == plans


def test_producer_partitioning_lets_the_producer_choose_with_its_own_partitioner(build):
    from k2k.kafka.factory import producer_settings
    from k2k.stages import ProducerPartitioner

    sink = {"sink": {"partition": "producer"}}
    cfg = build({"replication": [{"source": {"topic": "orders"}}, sink]})
    plan = compile_topic_plans(cfg, {"orders": "orders"})["orders"]
    assert isinstance(plan.partitioning, ProducerPartitioner)
    assert (plan.partitioning.target_partition(3), plan.partitioning.spreads) == (-1, True)
    # Java's default placement unless the target producer names its own partitioner.
    assert producer_settings(cfg.target_client("producer"), True)["partitioner"] == (
        "murmur2_random"
    )
    own = build(
        {
            "replication": [{"source": {"topic": "orders"}}, sink],
            "target": {"kafka": {"producer": {"partitioner": "consistent_random"}}},
        }
    )
    conf = producer_settings(own.target_client("producer"), True, exactly_once=True)
    assert conf["partitioner"] == "consistent_random"
    assert "partitioner" not in producer_settings(cfg.target_client("producer"), False)
