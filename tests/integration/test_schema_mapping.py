"""Schema mapping on real brokers, real Spark and two real registries (Apicurio Registry).

Records are produced through the *source* registry with Confluent's standard serializers,
replicated with renaming (prefix routing), and consumed on the target through the *target*
registry with the standard deserializers: every record must decode to the object produced.
The two registries have separate id spaces, and the target gets unrelated schemas first, so a
copied (unrewritten) id would point at the wrong schema or at nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from k2k.config import load_pipeline
from k2k.errors import ReplicationError, SchemaMappingError
from k2k.local import free_port
from k2k.local.registry import LocalRegistry, start_registry, wait_ready
from k2k.pipeline.driver.planner import Planner
from k2k.verify.job import run_verify
from tests.helpers.kafka import create_topic, produce, read_all
from tests.helpers.pipelines import (
    BASE_TS,
    k2k_cli,
    pipeline_dict,
    run_until_caught_up,
    write_pipeline,
)

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


def registry_client(url: str) -> SchemaRegistryClient:
    """A Confluent client whose requests time out (its default waits forever, so a stalled
    registry would hang a test past pytest-timeout's reach)."""
    return SchemaRegistryClient({"url": url, "timeout": 30})


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
        target = registry_client(pair[1].url)
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
    client = registry_client(registries.source)
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
    client = registry_client(registries.target)
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

    stats = run_until_caught_up(
        spark, tmp_path, mapping_doc(clusters, registries, group_name(), [topic])
    )
    # At least the new topic's key and value subjects (reference versions may be cached).
    assert stats.schemas_registered >= 2

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
    subjects = set(registry_client(registries.target).get_subjects())
    assert {f"dr.{topic}-key", f"dr.{topic}-value", "k2k.test.Address"} <= subjects


def test_verify_compares_the_schema_an_id_names_not_the_id(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    """``k2k verify`` on a schema-mapped topic: the rewritten ids match (they name the same
    schema in each registry); a target record whose id names another schema is a changed
    value at its place, though its bytes after the prefix are the source's."""
    topic = topic_name("verified")
    create_topic(clusters.source, topic, 1)
    records = _avro_records(registries, topic, _people(51))
    produce(clusters.source, topic, records[:50])
    doc = mapping_doc(clusters, registries, group_name(), [topic])
    run_until_caught_up(spark, tmp_path, doc)
    cfg = load_pipeline([write_pipeline(tmp_path, doc, "verify.yaml")])

    report = run_verify(cfg, spark=spark, whole_topics=True)
    assert report.ok, report.failing()
    assert [(r.source_records, r.matched) for r in report.results] == [(50, 50)]

    # One more source record; its copy, written here, names another schema on the target.
    produce(clusters.source, topic, records[50:])
    other = registry_client(registries.target).register_schema(
        f"{topic}-other", Schema('"int"', "AVRO")
    )
    mapped_key = read_all(clusters.target, f"dr.{topic}")[0][0].key[:5] + records[50][1][5:]
    wrong = b"\0" + other.to_bytes(4, "big") + records[50][2][5:]
    produce(clusters.target, f"dr.{topic}", [(0, mapped_key, wrong, [], records[50][4])])

    [result] = run_verify(cfg, spark=spark, whole_topics=True).results
    assert [(d.kind, d.source_offsets, d.target_offsets, d.fields) for d in result.differences] == [
        ("changed", (50,), (50,), ("value",))
    ]


def test_json_schema_with_references_decodes_identically(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    topic = topic_name("orders")
    create_topic(clusters.source, topic, 1)
    client = registry_client(registries.source)
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

    decode = JSONDeserializer(None, schema_registry_client=registry_client(registries.target))
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
    clusters, spark, registries, tmp_path_factory, tmp_path, topic_name, group_name, mode, caplog
):
    """Run 1 maps schema A; the source registry then stops; run 2 starts with a record of
    schema B (registered while the registry was up): its start warns that the registry does
    not answer, and its runner retries for retryTimeout and fails naming the record. The
    target holds run 1's records, rewritten, and nothing of run 2."""
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
        client = registry_client(own.url)
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
        # The planner reports a runner's SchemaMappingError as such, with its message.
        with (
            caplog.at_level(logging.WARNING, "k2k.schemamapping"),
            pytest.raises(SchemaMappingError) as failure,
        ):
            run_until_caught_up(spark, tmp_path, doc)
    finally:
        own.stop()
    warned = [r.getMessage() for r in caplog.records if r.name == "k2k.schemamapping"]
    assert len(warned) == 1 and warned[0].startswith("source.registry.config: source registry ")
    assert "did not answer" in warned[0], warned
    message = str(failure.value)
    assert f"{topic}[0]@10 (value): subject 'dr.{topic}-value', source schema id {b_id}" in (
        message
    )
    assert "source registry" in message and "did not answer for 2 s" in message
    assert "\n" not in message
    got = read_all(clusters.target, f"dr.{topic}")[0]
    assert len(got) == 10  # run 1's records only: schema B's record was never written
    target = registry_client(registries.target)
    decode = AvroDeserializer(target)
    ctx = SerializationContext(f"dr.{topic}", MessageField.VALUE)
    assert [decode(r.value, ctx)["name"] for r in got[:10]] == [f"person-{i}" for i in range(10)]


def _exactly_once(doc: dict, name: str) -> dict:
    doc["features"]["exactlyOnce"] = "enabled"
    doc["source"]["kafka"]["consumer"] = {"isolation.level": "read_committed"}
    doc["coordination"]["assignment"] = {"topic": f"__k2k_assignment-{name}"}
    return doc


# Protobuf: a Person in person.proto (its second message, so its message indexes are [1])
# with an Address imported from address.proto, registered as a reference.
ADDRESS_PROTO = """syntax = "proto3";
package k2k.test;

message Address {
  string city = 1;
  int32 zip = 2;
}
"""
PERSON_PROTO = """syntax = "proto3";
package k2k.test;

import "k2k/address.proto";

message Meta {
  string note = 1;
}

message Person {
  string name = 1;
  int32 age = 2;
  Address home = 3;
}
"""
PERSON_INDEXES = b"\x02\x02"  # Confluent's zigzag varints: one index, 1 (Person)


def _protobuf_person_class():
    """The generated-code equivalent of PERSON_PROTO, built from descriptors (no protoc)."""
    fd = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    address = descriptor_pb2.FileDescriptorProto(
        name="k2k/address.proto", package="k2k.test", syntax="proto3"
    )
    msg = address.message_type.add(name="Address")
    msg.field.add(name="city", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    msg.field.add(name="zip", number=2, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)
    pool.Add(address)
    person = descriptor_pb2.FileDescriptorProto(
        name="k2k/person.proto",
        package="k2k.test",
        syntax="proto3",
        dependency=["k2k/address.proto"],
    )
    meta = person.message_type.add(name="Meta")
    meta.field.add(name="note", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    msg = person.message_type.add(name="Person")
    msg.field.add(name="name", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    msg.field.add(name="age", number=2, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)
    msg.field.add(
        name="home",
        number=3,
        type=fd.TYPE_MESSAGE,
        type_name=".k2k.test.Address",
        label=fd.LABEL_OPTIONAL,
    )
    pool.Add(person)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("k2k.test.Person"))


def _words(text: str) -> str:
    return " ".join(text.split())


def test_protobuf_with_references_keeps_message_indexes_and_decodes_through_the_target(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    """Wire-format Protobuf records built with the source registry's id and message indexes
    (Confluent's layout); on the target the id resolves, through the target registry, to the
    same .proto with its reference, and the payload parses to the same message."""
    topic = topic_name("proto")
    create_topic(clusters.source, topic, 1)
    source = registry_client(registries.source)
    address = Schema(ADDRESS_PROTO, "PROTOBUF")
    source.register_schema("k2k/address.proto", address)
    version = source.lookup_schema("k2k/address.proto", address).version
    ref = SchemaReference("k2k/address.proto", "k2k/address.proto", version)
    source_id = source.register_schema(f"{topic}-value", Schema(PERSON_PROTO, "PROTOBUF", [ref]))
    person = _protobuf_person_class()
    people = [
        person(name=f"p{i}", age=i % 90, home={"city": f"c{i}", "zip": i}) for i in range(100)
    ]
    prefix = b"\x00" + source_id.to_bytes(4, "big") + PERSON_INDEXES
    produce(
        clusters.source,
        topic,
        [(0, None, prefix + p.SerializeToString(), [], BASE_TS + i) for i, p in enumerate(people)],
    )

    run_until_caught_up(spark, tmp_path, mapping_doc(clusters, registries, group_name(), [topic]))

    got = read_all(clusters.target, f"dr.{topic}")[0]
    assert len(got) == len(people)
    target = registry_client(registries.target)
    target_ids = {int.from_bytes(r.value[1:5], "big") for r in got}
    assert len(target_ids) == 1 and target_ids != {source_id}
    schema = target.get_schema(target_ids.pop())
    assert schema.schema_type == "PROTOBUF"
    assert _words(schema.schema_str) == _words(PERSON_PROTO)
    [target_ref] = schema.references
    assert (target_ref.name, target_ref.subject) == ("k2k/address.proto", "k2k/address.proto")
    referenced = target.get_version("k2k/address.proto", target_ref.version).schema
    assert _words(referenced.schema_str) == _words(ADDRESS_PROTO)
    for record, expected in zip(got, people, strict=True):
        assert record.value[0] == 0 and record.value[5:7] == PERSON_INDEXES
        assert person.FromString(record.value[7:]) == expected


def test_protobuf_through_the_standard_serializer_decodes_through_the_target_registry(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    """Protobuf records produced with Confluent's ProtobufSerializer through the source
    registry (it registers the .proto, in its serialized form, and the imported file as a
    reference): on the target each record carries a target id naming the same schema, with
    its reference registered there too, and the ProtobufDeserializer decodes every record
    to the message produced."""
    topic = topic_name("proto-std")
    create_topic(clusters.source, topic, 1)
    person = _protobuf_person_class()
    conf = {"use.deprecated.format": False}
    encode = ProtobufSerializer(person, registry_client(registries.source), conf)
    ctx = SerializationContext(topic, MessageField.VALUE)
    people = [person(name=f"p{i}", age=i % 90, home={"city": f"c{i}", "zip": i}) for i in range(50)]
    values = [encode(p, ctx) for p in people]
    source_id = int.from_bytes(values[0][1:5], "big")
    produce(clusters.source, topic, [(0, None, v, [], BASE_TS + i) for i, v in enumerate(values)])

    run_until_caught_up(spark, tmp_path, mapping_doc(clusters, registries, group_name(), [topic]))

    got = read_all(clusters.target, f"dr.{topic}")[0]
    target = registry_client(registries.target)
    target_id = target.get_latest_version(f"dr.{topic}-value").schema_id
    assert {int.from_bytes(r.value[1:5], "big") for r in got} == {target_id}
    assert target_id != source_id
    source = registry_client(registries.source)
    mapped, original = target.get_schema(target_id), source.get_schema(source_id)
    assert mapped.schema_str == original.schema_str
    [ref], [source_ref] = mapped.references, original.references
    assert (ref.name, ref.subject) == (source_ref.name, source_ref.subject)
    assert target.get_version(ref.subject, ref.version).schema.schema_str == (
        source.get_version(ref.subject, source_ref.version).schema.schema_str
    )
    # Without a registry client: Apicurio cannot hand a schema registered in serialized form
    # back in that form (HTTP 500 on the source as on the target), which the client asks for.
    decode = ProtobufDeserializer(person, conf)
    target_ctx = SerializationContext(f"dr.{topic}", MessageField.VALUE)
    assert [decode(r.value, target_ctx) for r in got] == people


def test_avro_record_name_strategies_against_real_registries(
    clusters, spark, registries, tmp_path, topic_name, group_name
):
    """Keys under TopicRecordNameStrategy, values under RecordNameStrategy: the subjects the
    target gets follow the record names; every record decodes through the target registry."""
    topic = topic_name("named")
    create_topic(clusters.source, topic, 1)
    client = registry_client(registries.source)
    ref = _register_avro_address(client)
    values = AvroSerializer(client, Schema(json.dumps(PERSON), "AVRO", [ref]))
    keys = AvroSerializer(client, json.dumps(ADDRESS))
    people = _people(50)
    kctx = SerializationContext(topic, MessageField.KEY)
    vctx = SerializationContext(topic, MessageField.VALUE)
    produce(
        clusters.source,
        topic,
        [
            (0, keys(p["home"], kctx), values(p, vctx), [], BASE_TS + i)
            for i, p in enumerate(people)
        ],
    )
    strategies = {"key": "TopicRecordNameStrategy", "value": "RecordNameStrategy"}
    doc = mapping_doc(
        clusters,
        registries,
        group_name(),
        [topic],
        schemaMapping={"subjectNameStrategy": strategies},
    )
    run_until_caught_up(spark, tmp_path, doc)

    target_topic = f"dr.{topic}"
    target = registry_client(registries.target)
    decode = AvroDeserializer(target)
    got = read_all(clusters.target, target_topic)[0]
    tk = SerializationContext(target_topic, MessageField.KEY)
    tv = SerializationContext(target_topic, MessageField.VALUE)
    assert [(decode(r.key, tk), decode(r.value, tv)) for r in got] == [
        (p["home"], p) for p in people
    ]
    subjects = set(target.get_subjects())
    assert {"k2k.test.Person", f"{target_topic}-k2k.test.Address"} <= subjects
    value_id = int.from_bytes(got[0].value[1:5], "big")
    assert target.get_latest_version("k2k.test.Person").schema_id == value_id


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_target_incompatibility_fails_naming_subject_and_id_and_writes_nothing(
    clusters, spark, registries, tmp_path, topic_name, group_name, mode
):
    """The target subject holds an incompatible Person under BACKWARD compatibility: the
    registration is refused (409), the pipeline stops with one line naming the subject and the
    source id, and no record reaches the target."""
    topic = topic_name("incompat")
    create_topic(clusters.source, topic, 1)
    target_topic = f"dr.{topic}"
    target = registry_client(registries.target)
    existing = {
        "type": "record",
        "name": "Person",
        "namespace": "k2k.test",
        "fields": [{"name": "legacy", "type": "string"}],
    }
    target.register_schema(f"{target_topic}-value", Schema(json.dumps(existing), "AVRO"))
    target.set_compatibility(f"{target_topic}-value", "BACKWARD")
    records = _avro_records(registries, topic, _people(5))
    produce(clusters.source, topic, records)
    source_id = int.from_bytes(records[0][2][1:5], "big")
    name = group_name()
    doc = mapping_doc(clusters, registries, name, [topic])
    if mode == "exactly-once":
        _exactly_once(doc, name)

    with pytest.raises(SchemaMappingError) as failure:
        run_until_caught_up(spark, tmp_path, doc)

    message = str(failure.value)
    assert "\n" not in message
    assert f"{topic}[0]@0 (value): subject '{target_topic}-value', source schema id " in message
    assert f"source schema id {source_id}:" in message and "HTTP 409" in message
    assert all(not recs for recs in read_all(clusters.target, target_topic).values())
    if mode == "at-least-once":  # the CLI prints that one line, and nothing else of it
        result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
        assert result.returncode == 1 and "Traceback" not in result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: cannot map the schema id of ")
        assert f"subject '{target_topic}-value', source schema id {source_id}:" in last
    assert (
        all(
            not recs
            for recs in read_all(clusters.target, target_topic, "read_uncommitted").values()
        )
        or mode == "exactly-once"
    )  # EOS: an aborted batch may occupy offsets, never readable


def test_a_registry_url_that_is_not_the_confluent_api_stops_the_start_with_one_line(
    clusters, registries, tmp_path, topic_name, group_name
):
    """The target's ``schema.registry.url`` lacks Apicurio's Confluent API path, or the
    source's says https for a plain port: ``k2k start`` checks both registries before it
    reads a record and stops with exit 1 and one line naming the connection and what to
    check (not after a record met the registry)."""
    topic = topic_name("wrongurl")
    create_topic(clusters.source, topic, 1)
    produce(clusters.source, topic, _avro_records(registries, topic, _people(3)))
    wrong = registries.target.removesuffix("/apis/ccompat/v7")
    doc = mapping_doc(clusters, Registries(registries.source, wrong), group_name(), [topic])
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: target.registry.config: target registry {wrong} answered without the schema "
        "types (HTTP 404); is schema.registry.url the registry's Confluent-compatible API?"
    )
    assert "starting Spark" not in result.stderr  # stopped before any record was read
    # https to the registry's plain port: the handshake fails, which no retry mends.
    https = registries.source.replace("http://", "https://")
    doc = mapping_doc(clusters, Registries(https, registries.target), group_name(), [topic])
    result = k2k_cli("start", "--until-caught-up", "-f", str(write_pipeline(tmp_path, doc)))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: source.registry.config: GET {https}: TLS failed: "), last


class _Switch:
    """A TCP forwarder to a registry that can be turned off (connection refused) and on again
    on the same port: a registry that goes away and comes back with the same schemas."""

    def __init__(self, upstream_url: str) -> None:
        parts = urllib.parse.urlsplit(upstream_url)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._path = parts.path
        self.port = free_port()
        self._server: socket.socket | None = None
        self._open: list[socket.socket] = []
        self.on()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self._path}"

    def on(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        server.settimeout(0.1)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def off(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in self._open:
            conn.close()
        self._open.clear()

    def _accept(self, server: socket.socket) -> None:
        while self._server is server:
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(self._upstream)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_source_registry_down_mid_lease_then_back_replicates_the_rest_exactly(
    clusters, spark, registries, tmp_path, topic_name, group_name, mode
):
    """A running lease has mapped schema A; the source registry goes away; a record of schema
    B (not cached) arrives, followed by more A records. The lease retries for retryTimeout
    and stops with the one-line error; the target holds only the A records before B, with the
    right ids. With the registry back, a restart replicates the rest: every record decodes
    through the target registry, exactly once under exactly-once."""
    switch = _Switch(registries.source)
    try:
        mine = Registries(switch.url, registries.target)
        topic = topic_name("midlease")
        target_topic = f"dr.{topic}"
        create_topic(clusters.source, topic, 1)
        people = _people(16)
        first = _avro_records(registries, topic, people[:10])
        later = _avro_records(registries, topic, people[10:])
        other = AvroSerializer(
            registry_client(registries.source),
            json.dumps({"type": "record", "name": "B", "fields": [{"name": "b", "type": "long"}]}),
        )
        b_value = other({"b": 1}, SerializationContext(topic, MessageField.VALUE))
        b_id = int.from_bytes(b_value[1:5], "big")
        produce(clusters.source, topic, first)
        name = group_name()
        doc = mapping_doc(
            clusters, mine, name, [topic], schemaMapping={"retryTimeout": "3 seconds"}
        )
        if mode == "exactly-once":
            _exactly_once(doc, name)
        planner = Planner(load_pipeline([write_pipeline(tmp_path, doc)]), spark=spark)
        outcome: list[BaseException] = []

        def run() -> None:
            try:
                planner.run()
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            _wait_for(
                lambda: len(read_all(clusters.target, target_topic).get(0, [])) == 10,
                180,
                "run 1's records on the target",
            )
            switch.off()
            produce(clusters.source, topic, [(0, b"kb", b_value, [], BASE_TS), *later])
            thread.join(180)
        finally:
            if thread.is_alive():
                planner.request_stop()
                thread.join(60)
        assert outcome and isinstance(outcome[0], SchemaMappingError), outcome
        message = str(outcome[0])
        assert "\n" not in message
        assert (
            f"{topic}[0]@10 (value): subject '{target_topic}-value', source schema id {b_id}"
            in message
        )
        assert "source registry" in message and "did not answer for 3 s" in message
        got = read_all(clusters.target, target_topic)[0]
        assert len(got) == 10  # nothing of B or after it

        switch.on()
        run_until_caught_up(spark, tmp_path, doc)
    finally:
        switch.off()
    target = registry_client(registries.target)
    decode = AvroDeserializer(target)
    ctx = SerializationContext(target_topic, MessageField.VALUE)
    got = read_all(clusters.target, target_topic)[0]
    decoded = [decode(r.value, ctx) for r in got]
    expected = [*people[:10], {"b": 1}, *people[10:]]
    if mode == "exactly-once":
        assert decoded == expected
    else:  # at-least-once: a replayed tail may repeat, in order, never a wrong record
        assert decoded[:10] == people[:10]
        assert [d for i, d in enumerate(decoded) if d not in decoded[:i]] == expected
