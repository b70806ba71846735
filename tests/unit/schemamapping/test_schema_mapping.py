"""Schema mapping without brokers: config rules, subjects, the per-record fast path and the
failure policies (registry calls are only made
on a cache miss, and the misses tested here never reach a registry)."""

from __future__ import annotations

import pickle

import pytest
from confluent_kafka import Message

from k2k.config.loader import build_pipeline
from k2k.config.schema_mapping import SchemaMapping
from k2k.errors import ConfigError, SchemaMappingError
from k2k.schemamapping import SchemaIdRewrite, SchemaMapper, schema_transforms
from k2k.schemamapping.mapper import (
    clear_process_caches,
    process_caches,
    record_name,
    subject_for,
)
from k2k.schemamapping.registry import (
    RegistryClient,
    RegistryEndpoint,
    RegistryFailure,
    RegistryUnavailable,
    SchemaRecord,
)
from tests.helpers.config import pipeline


def build(**sections):
    """MINIMAL (tests/config) with ``sections`` deep-merged, validated."""
    return build_pipeline(pipeline(sections), {})


def consumed(key: bytes | None, value: bytes | None, offset: int = 0) -> Message:
    """A consumed record of ``orders[0]`` as confluent_kafka builds it."""
    return Message(topic="orders", partition=0, offset=offset, key=key, value=value)


def _mapper(policy: str = "pass") -> SchemaMapper:
    down = RegistryEndpoint("source", ("http://127.0.0.1:9",), retry_timeout_s=0.1)
    return SchemaMapper(down, down, on_non_wire_format=policy)  # type: ignore[arg-type]


def test_rules_first_match_wins_and_unmatched_topics_get_both_facets():
    rules = SchemaMapping.model_validate(
        {
            "topics": [
                {"pattern": "orders-.*", "key": "disabled", "value": "enabled"},
                {"pattern": "orders-eu", "key": "enabled", "value": "disabled"},
                {"pattern": "logs", "key": "disabled", "value": "disabled"},
            ]
        }
    )
    assert rules.facets("orders-eu") == (False, True)
    assert rules.facets("logs") == (False, False)
    assert rules.facets("logs-2") == (True, True)  # patterns match whole names
    assert SchemaMapping().facets("anything") == (True, True)


def test_transforms_per_topic_share_one_mapper_and_skip_unmapped_topics():
    cfg = build(
        features={"schemaMapping": "enabled"},
        source={"registry": {"config": {"schema.registry.url": "http://s:8081"}}},
        target={"registry": {"config": {"schema.registry.url": "http://t:8081"}}},
        schemaMapping={"topics": [{"pattern": "raw", "key": "disabled", "value": "disabled"}]},
    )
    make = schema_transforms(cfg)
    assert make is not None
    orders, raw = make("orders", "dr.orders"), make("raw", "dr.raw")
    payments = make("payments", "dr.payments")
    assert raw is None
    assert orders is not None and payments is not None and orders.mapper is payments.mapper
    assert orders.mapper.target.urls == ("http://t:8081",)
    assert schema_transforms(build()) is None  # feature off: the fast path everywhere


def test_enabled_without_registries_and_bad_registry_keys_are_one_line_errors():
    with pytest.raises(ConfigError) as missing:
        build(features={"schemaMapping": "enabled"})
    assert "source.registry.config.schema.registry.url: missing" in str(missing.value)
    with pytest.raises(ConfigError) as bad:
        build(
            source={
                "registry": {
                    "config": {
                        "schema.registry.urls": "http://s",
                        "basic.auth.user.info": "nocolon-secret",
                    }
                }
            }
        )
    text = str(bad.value)
    assert "source.registry.config.schema.registry.urls: unknown key; did you mean " in text
    assert "'schema.registry.url'?" in text
    assert "not of the form user:password" in text and "nocolon-secret" not in text
    assert "\n" not in text


def test_registry_credentials_never_show():
    cfg = build(
        source={
            "registry": {
                "config": {
                    "schema.registry.url": "https://u:urlpw@s:8081",
                    "basic.auth.credentials.source": "URL",
                }
            }
        },
        target={
            "registry": {
                "config": {"schema.registry.url": "http://t", "basic.auth.user.info": "u:pw123"}
            }
        },
    )
    shown = repr(cfg) + str(cfg)
    assert "pw123" not in shown and "urlpw" not in shown
    endpoint = RegistryEndpoint.from_config("target", cfg.target.registry, 1, 1)
    assert endpoint.user_info == "u:pw123" and "pw123" not in repr(endpoint)
    url_auth = RegistryEndpoint.from_config("source", cfg.source.registry, 1, 1)
    assert "urlpw" not in url_auth.shown() and "urlpw" not in repr(url_auth)


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"schema.registry.url": "u:s3cret@sr:8081"}, "url: not an http(s) URL"),
        ({"schema.registry.url": "htps://u:s3cret@sr:8081"}, "url: not an http(s) URL"),
        ({"schema.registry.url": "https://u:s3/cret@sr:8081"}, "url: user:password with an"),
        ({"schema.registry.url": "https://u:s3?cret@sr"}, "url: user:password with an"),
        ({"schema.registry.url": ["http://u:s3cret@sr"]}, "url: wrong type"),
        ("http://u:s3cret@sr", "config: wrong type"),
    ],
)
def test_a_url_with_credentials_never_shows_in_an_error(config, problem):
    with pytest.raises(ConfigError) as failure:
        build(source={"registry": {"config": config}})
    text = str(failure.value)
    assert "s3" not in text and "cret" not in text and "u:" not in text, text
    assert problem in text and "******" in text, text


def test_unreadable_tls_files_fail_as_a_registry_failure_naming_the_connection(tmp_path):
    missing = RegistryEndpoint("target", ("https://t:8081",), ca_location=str(tmp_path / "ca.pem"))
    with pytest.raises(RegistryFailure) as failure:
        RegistryClient(missing)
    text = str(failure.value)
    assert text.startswith("target registry https://t:8081: cannot set up TLS from the CA, ")
    assert "target.registry.config" in text and "No such file" in text and "\n" not in text


def test_exactly_once_bounds_the_registry_retry_window():
    with pytest.raises(ConfigError, match=r"schemaMapping\.retryTimeout: too long"):
        build(
            features={"schemaMapping": "enabled", "exactlyOnce": "enabled"},
            source={
                "kafka": {"consumer": {"isolation.level": "read_committed"}},
                "registry": {"config": {"schema.registry.url": "http://s"}},
            },
            target={"registry": {"config": {"schema.registry.url": "http://t"}}},
            schemaMapping={"retryTimeout": "45 seconds"},
        )


def test_subjects_under_each_strategy():
    avro = SchemaRecord('{"type":"record","name":"Person","namespace":"k2k","fields":[]}')
    assert subject_for("TopicNameStrategy", "dr.t", "key", avro) == "dr.t-key"
    assert subject_for("RecordNameStrategy", "dr.t", "value", avro) == "k2k.Person"
    assert subject_for("TopicRecordNameStrategy", "dr.t", "value", avro) == "dr.t-k2k.Person"
    assert record_name(SchemaRecord('{"title":"Order"}', "JSON")) == "Order"
    with pytest.raises(Exception, match="Protobuf"):
        record_name(SchemaRecord("syntax = 'proto3';", "PROTOBUF"))


def test_known_ids_are_spliced_and_payload_bytes_kept():
    rewrite = SchemaIdRewrite(_mapper(), "dr.orders", keys=True, values=True)
    rewrite.table("value")[b"\x00\x00\x00\x00\x07"] = b"\x00\x00\x00\x01\x2c"
    rewrite.table("key")[b"\x00\x00\x00\x00\x03"] = b"\x00\x00\x00\x00\x09"
    # A Protobuf value: the message indexes after the id are payload, kept as they are.
    msgs = [
        consumed(b"\x00\x00\x00\x00\x03key", b"\x00\x00\x00\x00\x07\x00payload"),
        consumed(None, None),
    ]
    keys, values = rewrite(msgs)
    assert keys == [b"\x00\x00\x00\x00\x09key", None]
    assert values == [b"\x00\x00\x00\x01\x2c\x00payload", None]


def test_non_wire_format_records_pass_or_fail_by_policy():
    plain = [
        consumed(b"k", b"plain"),
        consumed(b"k", b"\x01\x00\x00\x00\x01x"),
        consumed(b"k", b"\x00ab", 7),
    ]
    passing = SchemaIdRewrite(_mapper("pass"), "dr.orders", keys=False, values=True)
    assert passing(plain) == ([b"k"] * 3, [b"plain", b"\x01\x00\x00\x00\x01x", b"\x00ab"])
    failing = SchemaIdRewrite(_mapper("fail"), "dr.orders", keys=False, values=True)
    with pytest.raises(SchemaMappingError, match=r"orders\[0\]@7 \(value\): not in wire format"):
        failing(plain[2:])


def test_unreachable_registry_fails_naming_subject_and_id_after_retries():
    rewrite = SchemaIdRewrite(_mapper(), "dr.orders", keys=False, values=True)
    with pytest.raises(SchemaMappingError) as failure:
        rewrite([consumed(None, b"\x00\x00\x00\x00\x2a{}", 5)])
    text = str(failure.value)
    assert "orders[0]@5 (value): subject 'dr.orders-value', source schema id 42" in text
    assert "did not answer" in text and "\n" not in text
    assert rewrite.table("value") == {}  # nothing cached: the next attempt asks again


def test_a_reference_that_cannot_be_resolved_is_named_in_the_error():
    schema = SchemaRecord('{"type":"record","name":"P","fields":[]}', "AVRO", (("a", "A", 1),))
    with pytest.raises(RegistryUnavailable) as failure:  # the class survives the prefix
        _mapper().target_id(5, "dr.orders-value", schema)
    assert str(failure.value).startswith(
        "reference 'a' (subject 'A' version 1): source registry http://127.0.0.1:9 did not answer"
    )


def test_pickled_transforms_share_their_mapper_and_carry_no_cache():
    mapper = _mapper()
    a = SchemaIdRewrite(mapper, "a", True, True)
    b = SchemaIdRewrite(mapper, "b", True, True)
    a.table("value")[b"\x00\x00\x00\x00\x01"] = b"\x00\x00\x00\x00\x02"
    mapper.cache.ids[("a-value", 1)] = 2
    a2, b2 = pickle.loads(pickle.dumps((a, b)))
    assert a2.mapper is b2.mapper
    assert a2.table("value") == {} and a2.mapper._cache is None and a2.mapper._clients == {}
    clear_process_caches()


def test_known_ids_survive_the_runner_task_in_the_process_cache():
    """A mapper unpickled for the next lease finds what an earlier lease resolved: no
    registry call (the endpoints here answer nothing, so a call would fail)."""
    clear_process_caches()
    first = _mapper()
    first.cache.schemas[42] = SchemaRecord('"string"')
    first.cache.ids[("dr.orders-value", 42)] = 7
    later = pickle.loads(pickle.dumps(SchemaIdRewrite(first, "dr.orders", False, True)))
    assert later.mapper.cache is first.cache
    _, values = later([consumed(None, b"\x00\x00\x00\x00\x2apayload")])
    assert values == [b"\x00\x00\x00\x00\x07payload"]
    assert later.mapper.registered == 0  # answered by the cache
    # Another registry pair (here: other credentials) never sees these answers.
    other = RegistryEndpoint("target", ("http://127.0.0.1:9",), user_info="u:p")
    assert process_caches(first.source, other) is not first.cache
    clear_process_caches()
