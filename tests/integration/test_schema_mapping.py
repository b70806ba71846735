"""Schema mapping on real brokers, real Spark and two real registries (Apicurio Registry).

Records are produced through the *source* registry with Confluent's standard serializers,
replicated with renaming (prefix routing), and consumed on the target through the *target*
registry with the standard deserializers: every record must decode to the object produced.
The two registries have separate id spaces, and the target gets unrelated schemas first, so a
copied (unrewritten) id would point at the wrong schema or at nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from k2k.errors import ReplicationError
from k2k.local import free_port
from k2k.local.registry import LocalRegistry, start_registry, wait_ready
from tests.integration.conftest import BASE_TS, pipeline_dict, run_until_caught_up
from tests.kafkautil import create_topic, produce, read_all

pytestmark = pytest.mark.integration

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "k2k.test",
    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
}
PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "k2k.test",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "home", "type": "k2k.test.Address"},
    ],
}
JSON_ADDRESS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Address",
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
JSON_ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}},
    "required": ["id", "ship_to"],
}


@dataclass(frozen=True)
class Registries:
    source: str
    target: str


def _start_pair(tmp_path_factory: pytest.TempPathFactory) -> list[LocalRegistry]:
    root = tmp_path_factory.mktemp("registries")
    pair = [
        start_registry(name, root, free_port(), free_port(), owner_pid=os.getpid())
        for name in ("source-registry", "target-registry")
    ]
    for registry in pair:
        wait_ready(registry)
    return pair


@pytest.fixture(scope="session")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    """A source and a target registry for the session (their JVMs die with it)."""
    pair = _start_pair(tmp_path_factory)
    try:
        target = SchemaRegistryClient({"url": pair[1].url})
        # Unrelated schemas first: the target's ids never coincide with the source's.
        for i in range(7):
            target.register_schema(
                f"unrelated-{i}",
                Schema(json.dumps({"type": "fixed", "name": f"F{i}", "size": i + 1}), "AVRO"),
            )
        yield Registries(pair[0].url, pair[1].url)
    finally:
        for registry in pair:
            registry.stop()


def mapping_doc(clusters, registries: Registries, name: str, topics, **extra):
    return pipeline_dict(
        clusters,
        name,
        topics,
        features={"schemaMapping": "enabled"},
        source={"registry": {"config": {"schema.registry.url": registries.source}}},
        target={"registry": {"config": {"schema.registry.url": registries.target}}},
        replication=[
            {"source": {"name": "source", "topic": topics}},
            {"sink": {"name": "sink", "topic": {"prefix": "dr."}, "partition": "source"}},
        ],
        **extra,
    )


def _register_avro_address(client: SchemaRegistryClient) -> SchemaReference:
    subject = "k2k.test.Address"
    client.register_schema(subject, Schema(json.dumps(ADDRESS), "AVRO"))
    version = client.lookup_schema(subject, Schema(json.dumps(ADDRESS), "AVRO")).version
    return SchemaReference("k2k.test.Address", subject, version)


def _people(n: int) -> list[dict]:
    return [
        {"name": f"person-{i}", "age": 20 + i % 50, "home": {"city": f"c{i % 7}", "zip": i}}
        for i in range(n)
    ]


def _avro_records(
    registries: Registries, topic: str, people: list[dict], partitions: int = 1
) -> list[tuple]:
    client = SchemaRegistryClient({"url": registries.source})
    ref = _register_avro_address(client)
    values = AvroSerializer(client, Schema(json.dumps(PERSON), "AVRO", [ref]))
    keys = AvroSerializer(client, '"string"')
    records = []
    for i, person in enumerate(people):
        key = keys(person["name"], SerializationContext(topic, MessageField.KEY))
        value = values(person, SerializationContext(topic, MessageField.VALUE))
        records.append((i % partitions, key, value, [], BASE_TS + i))
    return records


def _decoded_avro(bootstrap: str, registries: Registries, topic: str) -> list[tuple]:
    client = SchemaRegistryClient({"url": registries.target})
    decode = AvroDeserializer(client)
    out = []
    for p, recs in sorted(read_all(bootstrap, topic).items()):
        for r in recs:
            key = decode(r.key, SerializationContext(topic, MessageField.KEY))
            value = decode(r.value, SerializationContext(topic, MessageField.VALUE))
            out.append((p, key, value))
    return out


def test_avro_with_references_decodes_identically_through_the_target_registry(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    topic = topic_name("people")
    create_topic(clusters.source, topic, 2)
    people = _people(500)
    produce(clusters.source, topic, _avro_records(registries, topic, people, 2))

    run_until_caught_up(spark, tmp_path, mapping_doc(clusters, registries, group_name(), [topic]))

    decoded = _decoded_avro(clusters.target, registries, f"dr.{topic}")
    expected = [(i % 2, p["name"], p) for i, p in enumerate(people)]
    assert sorted(decoded, key=lambda d: d[2]["home"]["zip"]) == expected
    # The ids were rewritten (the target's ids differ from the source's), payloads kept.
    source = read_all(clusters.source, topic)
    target = read_all(clusters.target, f"dr.{topic}")
    for p in (0, 1):
        for s, t in zip(source[p], target[p], strict=True):
            assert s.value[5:] == t.value[5:] and s.key[5:] == t.key[5:]
            assert s.value[:5] != t.value[:5]
    # The subjects follow the target topic (TopicNameStrategy); the reference kept its own.
    subjects = set(SchemaRegistryClient({"url": registries.target}).get_subjects())
    assert {f"dr.{topic}-key", f"dr.{topic}-value", "k2k.test.Address"} <= subjects


def test_json_schema_with_references_decodes_identically(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    topic = topic_name("orders")
    create_topic(clusters.source, topic, 1)
    client = SchemaRegistryClient({"url": registries.source})
    address = Schema(json.dumps(JSON_ADDRESS), "JSON")
    client.register_schema("address-json", address)
    version = client.lookup_schema("address-json", address).version
    ref = SchemaReference("address.json", "address-json", version)
    serialize = JSONSerializer(Schema(json.dumps(JSON_ORDER), "JSON", [ref]), client)
    orders = [{"id": i, "ship_to": {"city": f"city-{i}"}} for i in range(200)]
    ctx = SerializationContext(topic, MessageField.VALUE)
    produce(
        clusters.source,
        topic,
        [(0, str(i).encode(), serialize(o, ctx), [], BASE_TS + i) for i, o in enumerate(orders)],
    )

    run_until_caught_up(spark, tmp_path, mapping_doc(clusters, registries, group_name(), [topic]))

    decode = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": registries.target})
    )
    target_topic = f"dr.{topic}"
    got = read_all(clusters.target, target_topic)[0]
    tctx = SerializationContext(target_topic, MessageField.VALUE)
    assert [decode(r.value, tctx) for r in got] == orders
    # Keys are plain strings, not wire format: passed unchanged (onNonWireFormat: pass).
    assert [r.key for r in got] == [str(i).encode() for i in range(200)]


def test_per_topic_rules_and_the_fail_policy_for_non_wire_format_records(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    mapped, untouched = topic_name("mapped"), topic_name("raw")
    for t in (mapped, untouched):
        create_topic(clusters.source, t, 1)
    records = _avro_records(registries, mapped, _people(20))
    produce(clusters.source, mapped, records)
    produce(clusters.source, untouched, records)  # wire format too, but no rule maps it
    rules = {
        "topics": [
            {"pattern": ".*-raw-.*", "key": "disabled", "value": "disabled"},
            {"pattern": ".*", "key": "disabled", "value": "enabled"},
        ]
    }
    doc = mapping_doc(clusters, registries, group_name(), [mapped, untouched], schemaMapping=rules)
    run_until_caught_up(spark, tmp_path, doc)

    copied = read_all(clusters.target, f"dr.{untouched}")[0]
    assert [(r.key, r.value) for r in copied] == [(k, v) for _, k, v, _, _ in records]
    mapped_out = read_all(clusters.target, f"dr.{mapped}")[0]
    assert [r.key for r in mapped_out] == [k for _, k, _, _, _ in records]  # keys: disabled
    assert all(r.value[:5] != v[:5] for r, (_, _, v, _, _) in zip(mapped_out, records, strict=True))

    # A value that is not in wire format under onNonWireFormat: fail stops the pipeline,
    # naming the record; nothing of it reaches the target.
    bad = topic_name("bad")
    create_topic(clusters.source, bad, 1)
    produce(clusters.source, bad, [*records[:3], (0, None, b"plain text", [], BASE_TS)])
    doc = mapping_doc(
        clusters, registries, group_name(), [bad], schemaMapping={"onNonWireFormat": "fail"}
    )
    with pytest.raises(ReplicationError, match=r"not in wire format") as failure:
        run_until_caught_up(spark, tmp_path, doc)
    assert f"{bad}[0]@3 (value)" in str(failure.value)
    assert all(r.value != b"plain text" for r in read_all(clusters.target, f"dr.{bad}")[0])


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_source_registry_down_fails_naming_subject_and_id_and_writes_nothing_wrong(
    clusters, spark, registries, tmp_path_factory, tmp_path, topic_name, group_name, mode
):
    """Run 1 maps schema A; the source registry then stops; run 2 starts with a record of
    schema B (registered while the registry was up), retries for retryTimeout and fails
    naming it. The target holds run 1's records, rewritten, and nothing of run 2."""
    own = start_registry(
        "own-source",
        tmp_path_factory.mktemp("own"),
        free_port(),
        free_port(),
        owner_pid=os.getpid(),
    )
    try:
        wait_ready(own)
        mine = Registries(own.url, registries.target)
        topic = topic_name("down")
        create_topic(clusters.source, topic, 1)
        first = _avro_records(mine, topic, _people(10))
        produce(clusters.source, topic, first)
        client = SchemaRegistryClient({"url": own.url})
        other = AvroSerializer(
            client,
            json.dumps({"type": "record", "name": "B", "fields": [{"name": "b", "type": "long"}]}),
        )
        b_value = other({"b": 1}, SerializationContext(topic, MessageField.VALUE))
        b_id = int.from_bytes(b_value[1:5], "big")
        name = group_name()
        doc = mapping_doc(
            clusters, mine, name, [topic], schemaMapping={"retryTimeout": "2 seconds"}
        )
        if mode == "exactly-once":
            doc["features"]["exactlyOnce"] = "enabled"
            doc["source"]["kafka"]["consumer"] = {"isolation.level": "read_committed"}
            doc["coordination"]["assignment"] = {"topic": f"__k2k_assignment-{name}"}
        run_until_caught_up(spark, tmp_path, doc)
        own.stop()
        produce(clusters.source, topic, [(0, b"kb", b_value, [], BASE_TS), first[0], first[1]])
        # The planner reports a runner's SchemaMappingError as a ReplicationError (its base).
        with pytest.raises(ReplicationError) as failure:
            run_until_caught_up(spark, tmp_path, doc)
    finally:
        own.stop()
    message = str(failure.value)
    assert f"{topic}[0]@10 (value): subject 'dr.{topic}-value', source schema id {b_id}" in (
        message
    )
    assert "source registry" in message and "did not answer for 2 s" in message
    assert "\n" not in message
    got = read_all(clusters.target, f"dr.{topic}")[0]
    assert len(got) == 10  # run 1's records only: schema B's record was never written
    target = SchemaRegistryClient({"url": registries.target})
    decode = AvroDeserializer(target)
    ctx = SerializationContext(f"dr.{topic}", MessageField.VALUE)
    assert [decode(r.value, ctx)["name"] for r in got[:10]] == [f"person-{i}" for i in range(10)]
