"""MirrorMaker 2's replication policies: naming, reading names back, cycles, internal topics."""

from __future__ import annotations

import pytest

from k2k.config.loader import build_pipeline
from k2k.stages.policies import AliasPolicy, IdentityPolicy, PolicyRule
from k2k.stages.selection import TopicSelection


def pipeline(sink_topic: object, selection: object = ".*") -> dict[str, object]:
    return {
        "name": "a-to-b",
        "source": {"alias": "A", "kafka": {"common": {"bootstrap.servers": "a:9092"}}},
        "target": {"alias": "B", "kafka": {"common": {"bootstrap.servers": "b:9092"}}},
        "replication": [{"source": {"topic": selection}}, {"sink": {"topic": sink_topic}}],
    }


@pytest.mark.parametrize(
    ("separator", "topic", "route", "source", "upstream", "original"),
    [
        (".", "orders", "A.orders", None, None, "orders"),
        (".", "C.orders", "A.C.orders", "C", "orders", "orders"),
        (".", "C.D.orders", "A.C.D.orders", "C", "D.orders", "orders"),
        ("_", "C_orders", "A_C_orders", "C", "orders", "orders"),
        ("_", "C.orders", "A_C.orders", None, None, "C.orders"),
        ("--", "C--x--y", "A--C--x--y", "C", "x--y", "y"),
        (".", "orders.", "A.orders.", None, None, "orders."),
    ],
)
def test_alias_policy_names_and_reads_names_back(
    separator: str, topic: str, route: str, source: str | None, upstream: str | None, original: str
) -> None:
    policy = AliasPolicy("A", "B", separator)
    assert policy.route(topic) == route
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream
    assert policy.original_topic(topic) == original
    assert policy.topic_source(route) == "A"
    assert policy.upstream_topic(route) == topic


@pytest.mark.parametrize(
    ("topic", "cycle"),
    [
        ("orders", False),
        ("A.orders", False),
        ("C.orders", False),
        ("B.orders", True),
        ("A.B.orders", True),
        ("B.A.orders", True),
        ("C.A.orders", False),
        ("B.heartbeats", True),
        ("C.heartbeats", False),
    ],
)
def test_alias_policy_detects_cycles_through_the_target(topic: str, cycle: bool) -> None:
    assert AliasPolicy("A", "B").is_cycle(topic) is cycle


def test_identity_policy_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityPolicy("A", "B")
    assert policy.route("orders") == "orders"
    assert policy.route("B.orders") == "B.orders"
    assert policy.route("heartbeats") == "A.heartbeats"
    assert policy.route("C.heartbeats") == "A.C.heartbeats"
    assert policy.topic_source("orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    # Cycles are found for heartbeats only: data topics carry no alias.
    assert not policy.is_cycle("orders")
    assert not policy.is_cycle("B.orders")
    assert policy.is_cycle("B.heartbeats")
    assert policy.is_heartbeats_topic("C.heartbeats")


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        ("__k2k_consumer-offsets", True),
        (".hidden", True),
        ("mm2-offset-syncs.B.internal", True),
        ("mm2-configs.A.internal", True),
        ("A.checkpoints.internal", True),
        ("connect-offsets-internal", True),
        ("A_checkpoints_internal", True),
        ("mm2-offset-syncs_B_internal", True),
        ("heartbeats", False),
        ("orders", False),
        ("internal", False),
        ("orders_internals", False),
    ],
)
def test_internal_topics_follow_mm2_with_the_policy_separator(topic: str, internal: bool) -> None:
    assert AliasPolicy("A", "B", "_").is_internal_topic(topic) is internal


def test_selection_under_a_policy_applies_mm2_rules() -> None:
    selection = TopicSelection("orders.*", excluded=["orders-ctl"], policy=AliasPolicy("A", "B"))
    chosen = {
        t: selection.should_replicate(t)
        for t in [
            "orders",
            "orders-ctl",
            "B.orders",
            "C.orders",
            "heartbeats",
            "C.heartbeats",
            "B.heartbeats",
            "payments",
            "orders-internal",
            "__orders",
        ]
    }
    assert chosen == {
        "orders": True,
        "orders-ctl": False,
        "B.orders": False,  # came from the target: a cycle (and not selected anyway)
        "C.orders": False,  # not matched by orders.*
        "heartbeats": True,  # heartbeats topics are selected whatever the regex
        "C.heartbeats": True,
        "B.heartbeats": False,  # ... unless they came from the target
        "payments": False,
        "orders-internal": False,
        "__orders": False,
    }


def test_selection_without_a_policy_keeps_k2k_rules() -> None:
    selection = TopicSelection(".*")
    assert selection.should_replicate("orders-internal")
    assert not selection.should_replicate("heartbeats-x.internal")


def test_pipeline_binds_the_policy_to_its_aliases() -> None:
    cfg = build_pipeline(pipeline({"policy": "alias", "separator": "_"}), {})
    assert cfg.replication.sink.topic == PolicyRule("alias", "_")
    assert cfg.topic_router() == AliasPolicy("A", "B", "_")
    assert cfg.topic_router().route("orders") == "A_orders"
    assert not cfg.topic_selection().should_replicate("B_orders")
    assert cfg.topic_selection().should_replicate("C_orders")

    identity = build_pipeline(pipeline({"policy": "identity"}), {})
    assert identity.topic_router() == IdentityPolicy("A", "B", ".")
    assert identity.topic_selection().should_replicate("B.orders")  # N.B. no cycle detection


def test_policy_round_trips_through_yaml() -> None:
    cfg = build_pipeline(pipeline({"policy": "identity"}), {})
    dumped = cfg.model_dump(by_alias=True)
    assert dumped["replication"][1]["sink"]["topic"] == {"policy": "identity", "separator": "."}
    assert dumped["source"]["alias"] == "A"
    again = build_pipeline(dumped, {})
    assert again.topic_router() == cfg.topic_router()


def test_other_routings_ignore_aliases() -> None:
    cfg = build_pipeline(pipeline({"prefix": "dr."}), {})
    assert cfg.replication_policy() is None
    assert cfg.topic_router().route("orders") == "dr.orders"
    assert not cfg.topic_selection().should_replicate("B.heartbeats.internal")


def test_heartbeats_replication_can_be_switched_off() -> None:
    """MM2's ``heartbeats.replication.enabled=false``: heartbeats topics are then selected
    like any other topic, and never when they are a cycle or internal."""
    doc = pipeline({"policy": "alias"}, selection="orders|C\\.heartbeats|B\\.heartbeats")
    cfg = build_pipeline({**doc, "heartbeats": {"replicate": False}}, {})
    chosen = {t: cfg.topic_selection().should_replicate(t) for t in _HEARTBEATS}
    assert chosen == {"heartbeats": False, "C.heartbeats": True, "B.heartbeats": False}
    default = build_pipeline(doc, {})
    chosen = {t: default.topic_selection().should_replicate(t) for t in _HEARTBEATS}
    assert chosen == {"heartbeats": True, "C.heartbeats": True, "B.heartbeats": False}


_HEARTBEATS = ["heartbeats", "C.heartbeats", "B.heartbeats"]
