"""The reverse pipeline: every route inverts by name (or is refused in one line), and the
reversed config swaps the clusters, keeps the control topics and renames the commit group."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from k2k.config import PipelineConfig, load_pipeline
from k2k.config.loader import deep_merge
from k2k.config.routing import ExplicitTopicMap, SameTopicName
from k2k.errors import ConfigError
from k2k.migration.reverse import check_reversible, reverse_pipeline, reverse_routes
from tests.helpers.config import pipeline

ON_TARGET = [
    "orders",
    "orders.eu",
    "eu.orders",
    "eu.orders.copy",
    "orders.copy",
    "A.orders",
    "A.orders.eu",
    "B.orders",
    "A.heartbeats",
    "heartbeats",
    "payments",
    "__k2k_assignment",
    "orders-dr",
]


def forward(selection: Any = "orders.*", sink: Any = "source", **extra: Any) -> PipelineConfig:
    stages = [{"source": {"topic": selection}}, {"sink": {"topic": sink}}]
    return load_pipeline([pipeline(extra, replication=stages)])


#: What ``orders.*`` selects on the target under a name-keeping route.
SAME = {t: t for t in ("orders", "orders.eu", "orders.copy", "orders-dr")}

ALIASES = {"source": {"alias": "A"}, "target": {"alias": "B"}}


@pytest.mark.parametrize(
    ("sink", "extra", "routes"),
    [
        (
            "source",
            {},
            SAME,
        ),
        ({"prefix": "eu."}, {}, {"eu.orders": "orders", "eu.orders.copy": "orders.copy"}),
        ({"suffix": ".copy"}, {}, {"orders.copy": "orders", "eu.orders.copy": None}),
        ({"prefix": "eu.", "suffix": ".copy"}, {}, {"eu.orders.copy": "orders"}),
        ({"map": {"orders": "orders-dr", "payments": "x"}}, {}, {"orders-dr": "orders"}),
        ({"policy": "alias"}, ALIASES, {"A.orders": "orders", "A.orders.eu": "orders.eu"}),
        (
            {"policy": "identity"},
            ALIASES,
            SAME,
        ),
    ],
)
def test_every_invertible_route_reads_back_the_names_it_wrote(sink, extra, routes):
    expected = {t: s for t, s in routes.items() if s is not None}
    assert reverse_routes(forward(sink=sink, **extra), ON_TARGET) == expected


def test_a_list_selection_takes_only_the_routed_names_of_listed_topics():
    cfg = forward(["orders", "payments"], {"prefix": "eu."})
    assert reverse_routes(cfg, [*ON_TARGET, "eu.payments", "eu.refunds"]) == {
        "eu.orders": "orders",
        "eu.payments": "payments",
    }


def test_excluded_internal_and_control_topics_never_go_back():
    cfg = load_pipeline(
        [
            pipeline(
                replication=[{"source": {"topic": ".*", "exclude": "orders\\..*"}}, {"sink": {}}]
            )
        ]
    )
    routes = reverse_routes(cfg, [*ON_TARGET, "__consumer_offsets", "x.internal"])
    assert "orders.eu" not in routes and "__k2k_assignment" not in routes
    assert "x.internal" not in routes and "orders" in routes and "payments" in routes


def test_heartbeats_topics_of_a_policy_never_go_back():
    cfg = forward(".*", {"policy": "alias"}, **ALIASES)
    routes = reverse_routes(cfg, ON_TARGET)
    assert "A.heartbeats" not in routes and routes["A.orders"] == "orders"
    assert "B.orders" not in routes  # not a name the route writes


@pytest.mark.parametrize(
    ("sink", "partition", "line"),
    [
        (
            "all-events",
            "source",
            "replication.sink.topic: a static topic name cannot be reversed (records of every "
            "source topic share it), got 'all-events'; expected 'source', {prefix, suffix}, a "
            "one-to-one {map: ...} or {policy: alias | identity}",
        ),
        (
            {"map": {"orders": "all", "orders.eu": "all"}},
            "source",
            "replication.sink.topic.map.orders.eu: many-to-one map cannot be reversed ('orders' "
            "goes there too), got 'all'; expected a target topic of its own for every source topic",
        ),
        (
            "source",
            "hash",
            "replication.sink.partition: cannot run in reverse (a target partition holds "
            "records of many source partitions, and which one each came from is not "
            "recorded), got 'hash'; expected source",
        ),
    ],
)
def test_what_does_not_invert_is_one_line(sink, partition, line):
    stages = [{"source": {"topic": "orders.*"}}, {"sink": {"topic": sink, "partition": partition}}]
    cfg = load_pipeline([pipeline(replication=stages)])
    with pytest.raises(ConfigError) as err:
        check_reversible(cfg)
    assert err.value.problems == [line]


def test_no_topic_to_reverse_is_one_line():
    with pytest.raises(ConfigError) as err:
        reverse_routes(forward(sink={"prefix": "eu."}), ["orders", "payments"])
    (line,) = err.value.problems
    assert line.startswith("replication.source.topic: selects no topic to reverse")
    assert "got 'orders.*'" in line


SECURE: dict[str, Any] = {
    "source": {
        "alias": "A",
        "connectTimeout": "5 seconds",
        "kafka": {
            "common": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
            "consumer": {"fetch.min.bytes": "10"},
            "admin": {"request.timeout.ms": "7000"},
        },
        "registry": {"config": {"schema.registry.url": "http://reg-a:8081"}},
    },
    "target": {
        "alias": "B",
        "kafka": {
            "common": {"ssl.ca.location": "/b.pem", "security.protocol": "SSL"},
            "producer": {
                "linger.ms": "7",
                "sasl.username": "writer",
                "transaction.timeout.ms": "90000",
            },
            "consumer": {"fetch.max.bytes": "1000000"},
        },
    },
    "features": {"exactlyOnce": "enabled", "offsetMapping": "enabled"},
    "coordination": {
        "commit": {"topic": "k2k-progress", "group": "dr-group"},
        "assignment": {"topic": "k2k-assign"},
    },
    "offsetMapping": {"topic": "k2k-maps"},
    "metrics": {"kafka": {"topic": "k2k-metrics"}},
}


def test_the_reversed_config_swaps_the_clusters_with_all_their_settings():
    cfg = forward(sink={"prefix": "eu."}, **SECURE)
    rev = reverse_pipeline(cfg, ON_TARGET)
    assert rev.source.bootstrap_servers() == cfg.target.bootstrap_servers()
    assert rev.target.bootstrap_servers() == cfg.source.bootstrap_servers()
    assert (rev.source.alias, rev.target.alias) == ("B", "A")
    assert rev.target.connect_timeout == timedelta(seconds=5)
    assert rev.target.registry == cfg.source.registry
    assert rev.source_client("consumer") == cfg.target_client("consumer")
    assert rev.target_client("admin") == cfg.source_client("admin")
    # The forward target's producer map: how k2k produces goes along, whom it is does not.
    producer = rev.target_client("producer")
    assert producer["linger.ms"] == "7" and producer["transaction.timeout.ms"] == "90000"
    assert "sasl.username" not in producer and producer["security.protocol"] == "SASL_SSL"


def test_the_reversed_config_keeps_control_topics_and_renames_the_commit_group():
    cfg = forward(sink={"prefix": "eu."}, **SECURE)
    rev = reverse_pipeline(cfg, ON_TARGET)
    assert rev.name == cfg.name
    assert rev.commit_group == "dr-group-reverse"
    assert rev.coordination.commit.topic == "k2k-progress"
    assert rev.coordination.assignment.topic == "k2k-assign"
    assert rev.offset_mapping.topic == "k2k-maps"
    assert rev.metrics.kafka.topic == "k2k-metrics"
    assert rev.features == cfg.features
    assert rev.replication.source.topic == ["eu.orders", "eu.orders.copy"]
    assert rev.replication.sink.topic == ExplicitTopicMap(
        {"eu.orders": "orders", "eu.orders.copy": "orders.copy"}
    )
    assert rev.replication.sink.partition == "source"


def test_the_commit_group_defaults_from_the_name_and_identity_stays_source():
    rev = reverse_pipeline(forward(), ON_TARGET)
    assert rev.commit_group == "orders-dr-reverse"
    assert rev.replication.sink.topic == SameTopicName()
    assert rev.replication.source.exclude is None


def test_secrets_travel_with_their_cluster():
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="s3cret";'
    )
    cfg = forward(
        source={"kafka": {"common": {"sasl.jaas.config": jaas, "sasl.mechanism": "PLAIN"}}}
    )
    rev = reverse_pipeline(cfg, ON_TARGET)
    assert rev.target_client("producer")["sasl.password"] == "s3cret"
    assert isinstance(rev.target.kafka.common["sasl.jaas.config"], SecretStr)
    assert "sasl.password" not in rev.source_client("consumer")


def test_the_offset_mapping_app_of_the_reverse_swaps_the_clusters_and_keeps_the_groups():
    from k2k.config import load_migration
    from k2k.migration.reverse import reverse_app

    data = pipeline(
        deep_merge(SECURE, {"groups": {"consumerGroups": ["billing"]}}),
        replication=[{"source": {"topic": "orders.*"}}, {"sink": {"topic": {"prefix": "eu."}}}],
    )
    _, app = load_migration([data])
    rev = reverse_app(app)
    assert rev.source.bootstrap_servers() == app.target.bootstrap_servers()
    assert rev.target.bootstrap_servers() == app.source.bootstrap_servers()
    assert (rev.source.alias, rev.target.alias) == ("B", "A")
    assert (rev.name, rev.groups, rev.offset_mapping) == (app.name, app.groups, app.offset_mapping)
