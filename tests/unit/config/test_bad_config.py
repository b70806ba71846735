"""The bad-config suite: each case names the key path and echoes the offending value.

Every case asserts one exact problem line (no line breaks) that starts with the dotted key path
as written in YAML and contains the offending value, or the "did you mean" sentence for unknown
keys. pydantic's own vocabulary and URLs must never reach the user.
"""

from __future__ import annotations

from typing import Any

import pytest

JKS = {"ssl.truststore.location": "/etc/kafka/truststore.jks", "ssl.truststore.type": "JKS"}
KRB5 = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true password="hunter2";'
SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="k2k" password="hunter2";'
)


def src(role: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"source": {"kafka": {role: props}}}


def tgt(role: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"target": {"kafka": {role: props}}}


def stages(source: Any, sink: Any) -> dict[str, Any]:
    return {"replication": [{"source": source}, {"sink": sink}]}


def policy(rule: dict[str, Any], source_alias: str | None, target_alias: str) -> dict[str, Any]:
    """A pipeline whose sink names topics by MM2 ``rule`` between the two aliases."""
    aliases = {"target": {"alias": target_alias}}
    if source_alias is not None:
        aliases["source"] = {"alias": source_alias}
    return {**stages({"topic": "a"}, {"topic": rule}), **aliases}


CASES = [
    # --- unknown keys -------------------------------------------------------------------
    pytest.param(
        {"featurez": {}}, "featurez: unknown key; did you mean 'features'?", id="unknown-top-level"
    ),
    pytest.param(
        {"features": {"exactlyOnse": "disabled"}},
        "features.exactlyOnse: unknown key; did you mean 'exactlyOnce'?",
        id="unknown-feature",
    ),
    pytest.param(
        {"coordination": {"kafka": {"commit": {"batchSise": 5}}}},
        "coordination.kafka.commit.batchSise: unknown key; did you mean 'batchSize'?",
        id="unknown-deep",
    ),
    pytest.param(
        {"spark": {"zzz": 1}},
        "spark.zzz: unknown key; expected one of: master, conf, parallelism, leaseDuration, "
        "controlHost, controlPort",
        id="unknown-nothing-close",
    ),
    pytest.param(
        {"features": {"tracingHeaders": {"topik": "enabled"}}},
        "features.tracingHeaders.topik: unknown key; did you mean 'topic'?",
        id="unknown-tracing-toggle",
    ),
    pytest.param(
        {"source": {"kafka": {"produser": {}}}},
        "source.kafka.produser: unknown key; expected one of: common, consumer, admin",
        id="unknown-client-role",
    ),
    pytest.param(
        {"replication": [{"source": {"topic": "a"}}, {"filter": {}}, {"sink": {}}]},
        "replication[1].filter: a transform step, not a stage; expected it inside a "
        "'- transforms: [...]' item",
        id="step-as-stage",
    ),
    pytest.param(
        {"replication": [{"source": {"topic": "a"}}, {"sinc": {}}, {"sink": {}}]},
        "replication[1].sinc: unknown key; did you mean 'sink'?",
        id="unknown-stage",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": {"prefix": "eu.", "sufix": ".copy"}}),
        "replication.sink.topic.sufix: unknown key; did you mean 'suffix'?",
        id="unknown-prefix-suffix-key",
    ),
    # --- wrong types and values ---------------------------------------------------------
    pytest.param({"name": 5}, "name: wrong type, got 5; expected a name made of", id="name-type"),
    pytest.param(
        {"name": "my pipeline"}, "name: invalid characters, got 'my pipeline'", id="name-chars"
    ),
    pytest.param(
        {"features": "enabled"},
        "features: wrong type, got 'enabled'; expected a mapping",
        id="section-type",
    ),
    pytest.param(
        {"features": {"headerReplication": "yes please"}},
        "features.headerReplication: invalid value, got 'yes please'; "
        "expected one of: enabled, disabled",
        id="bad-flag",
    ),
    pytest.param(
        {"errorHandling": {"onCommitSyncTimeout": "stop"}},
        "errorHandling.onCommitSyncTimeout: invalid value, got 'stop'; "
        "expected one of: fail, ignore",
        id="bad-enum",
    ),
    pytest.param(
        {"spark": {"conf": {"spark.jars": ["a.jar"]}}},
        "spark.conf.spark.jars: wrong type, got ['a.jar']; expected a string, number or boolean",
        id="string-map-value-type",
    ),
    # --- durations ----------------------------------------------------------------------
    pytest.param(
        {"coordination": {"commit": {"batchTimeout": "2 fortnights"}}},
        "coordination.commit.batchTimeout: unknown unit 'fortnights', got '2 fortnights'; "
        "expected a duration such as '2 seconds'",
        id="duration-unit",
    ),
    pytest.param(
        {"source": {"connectTimeout": 15}},
        "source.connectTimeout: a bare number has no unit, got 15; expected a duration",
        id="duration-bare-number",
    ),
    pytest.param(
        {"spark": {"leaseDuration": "0 seconds"}},
        "spark.leaseDuration: must be longer than zero, got '0 seconds'",
        id="duration-zero",
    ),
    pytest.param(
        {"coordination": {"assignment": {"graceWindow": "soon"}}},
        "coordination.assignment.graceWindow: not a duration, got 'soon'",
        id="duration-garbage",
    ),
    # --- numbers ------------------------------------------------------------------------
    pytest.param(
        {"coordination": {"commit": {"batchSize": 0}}},
        "coordination.commit.batchSize: too small, got 0; expected a number >= 1",
        id="batch-size-zero",
    ),
    pytest.param(
        {"coordination": {"commit": {"batchSize": "many"}}},
        "coordination.commit.batchSize: not a whole number, got 'many'",
        id="batch-size-text",
    ),
    pytest.param(
        {"coordination": {"commit": {"batchSize": True}}},
        "coordination.commit.batchSize: wrong type, got True; expected a whole number",
        id="batch-size-bool",
    ),
    pytest.param(
        {"spark": {"parallelism": -2}},
        "spark.parallelism: too small, got -2; expected a number >= 1",
        id="negative-parallelism",
    ),
    pytest.param(
        {"topicCreation": {"control": {"replicationFactor": 0}}},
        "topicCreation.control.replicationFactor: invalid replication factor, got 0",
        id="replication-factor-zero",
    ),
    pytest.param(
        {"topicCreation": {"control": {"configs": {"cleanup.policy": "delete"}}}},
        "topicCreation.control.configs.cleanup.policy: refused, got 'delete'; expected compact",
        id="control-topic-not-compacted",
    ),
    pytest.param(
        {"topicCreation": {"control": {"common": {"config": {"cleanup.policy": "delete"}}}}},
        "topicCreation.control.common.config.cleanup.policy: refused, got 'delete'; expected "
        "compact (it applies to the commit and assignment topics",
        id="control-common-not-compacted",
    ),
    pytest.param(
        {
            "topicCreation": {
                "control": {"offsetMapping": {"config": {"cleanup.policy": "compact"}}}
            }
        },
        "topicCreation.control.offsetMapping.config.cleanup.policy: refused, got 'compact'; "
        "expected delete (the Offset Mapping app trims old mappings with DeleteRecords, which a "
        "compacted-only topic refuses)",
        id="mapping-topic-compacted",
    ),
    pytest.param(
        {
            "topicCreation": {
                "control": {"metrics": {"configs": {"cleanup.policy": "compact,delete"}}}
            }
        },
        "topicCreation.control.metrics.config.cleanup.policy: refused, got 'compact,delete'; "
        "expected delete (the metrics topic must not be compacted)",
        id="metrics-topic-compacted",
    ),
    pytest.param(
        {"topicCreation": {"control": {"offsetMapping": {"partitions": 0}}}},
        "topicCreation.control.offsetMapping.partitions: too small, got 0; expected a number >= 1",
        id="mapping-topic-partitions-zero",
    ),
    pytest.param(
        {"topicCreation": {"control": {"common": {"replicationFactor": 0}}}},
        "topicCreation.control.common.replicationFactor: invalid replication factor, got 0",
        id="block-replication-factor-spelling",
    ),
    pytest.param(
        {"topicCreation": {"control": {"common": {"replication": 3, "replicationFactor": 2}}}},
        "topicCreation.control.common.replicationFactor: the same setting as 'replication', "
        "given twice, got 2; expected one spelling",
        id="block-two-spellings",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"replication": 3, "replicationFactor": 2}}},
        "topicCreation.replicated.replication: the same setting as 'replicationFactor', "
        "given twice, got 3; expected one spelling",
        id="replicated-two-spellings",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"common": {"replication": 0}}}},
        "topicCreation.replicated.common.replication: invalid replication factor, got 0",
        id="replicated-common-bad-replication",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"common": {"partitions": 0}}}},
        "topicCreation.replicated.common.partitions: too small, got 0; expected a number >= 1",
        id="replicated-common-zero-partitions",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"configExclusions": ["min\\.insync.*", "segment.(ms"]}}},
        "topicCreation.replicated.configExclusions[1]: invalid regular expression "
        "(missing ), unterminated subpattern at position 8), got 'segment.(ms'",
        id="replicated-bad-exclusion",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"configExclusions": "min.*"}}},
        "topicCreation.replicated.configExclusions: wrong type, got 'min.*'",
        id="replicated-exclusions-not-a-list",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"configSyncInterval": 600}}},
        "topicCreation.replicated.configSyncInterval: a bare number has no unit, got 600",
        id="replicated-sync-interval-bare-number",
    ),
    pytest.param(
        {"topicCreation": {"replicated": {"configSync": "on"}}},
        "topicCreation.replicated.configSync: invalid value, got 'on'; expected one of: "
        "enabled, disabled",
        id="replicated-sync-flag",
    ),
    pytest.param(
        {"topicCreation": {"control": {"commmon": {}}}},
        "topicCreation.control.commmon: unknown key; did you mean 'common'?",
        id="control-block-typo",
    ),
    # --- offset mapping -------------------------------------------------------------------
    pytest.param(
        {"offsetMapping": {"retention": {"count": 0}}},
        "offsetMapping.retention.count: too small, got 0; expected a number >= 1",
        id="mapping-retention-count-zero",
    ),
    pytest.param(
        {"offsetMapping": {"retention": {"time": "forever"}}},
        "offsetMapping.retention.time: not a duration, got 'forever'",
        id="mapping-retention-time",
    ),
    pytest.param(
        {"offsetMapping": {"retention": {"schedule": 5}}},
        "offsetMapping.retention.schedule: a bare number has no unit, got 5",
        id="mapping-retention-schedule-bare",
    ),
    pytest.param(
        {"offsetMapping": {"topic": "__k2k_consumer-offsets"}},
        "offsetMapping.topic: same topic as a coordination topic, got '__k2k_consumer-offsets'",
        id="mapping-topic-is-commit-topic",
    ),
    pytest.param(
        {"offsetMapping": {"topik": "m"}},
        "offsetMapping.topik: unknown key; did you mean 'topic'?",
        id="mapping-unknown-key",
    ),
    # --- replication stages --------------------------------------------------------------
    pytest.param(
        stages({"topic": "orders[("}, {}),
        "replication.source.topic: invalid regular expression (unterminated character set at "
        "position 6), got 'orders[('",
        id="invalid-regex",
    ),
    pytest.param(
        stages({"topic": []}, {}),
        "replication.source.topic: wrong type, got []",
        id="empty-topic-list",
    ),
    pytest.param(
        stages({"topic": ["orders", "bad topic"]}, {}),
        "replication.source.topic[1]: invalid topic name, got 'bad topic'",
        id="bad-listed-topic",
    ),
    pytest.param(
        stages({"topic": "orders.*", "exclude": "orders[("}, {}),
        "replication.source.exclude: invalid regular expression (unterminated character set at "
        "position 6), got 'orders[('; expected a regular expression matched against whole "
        "topic names, or a list of exact topic names",
        id="invalid-exclude-regex",
    ),
    pytest.param(
        stages({"topic": "orders.*", "exclude": ["orders.test", "bad topic"]}, {}),
        "replication.source.exclude[1]: invalid topic name, got 'bad topic'",
        id="bad-excluded-topic",
    ),
    pytest.param(
        stages({"topic": "orders.*", "exclude": {"regex": "x"}}, {}),
        "replication.source.exclude: wrong type, got {'regex': 'x'}",
        id="exclude-wrong-type",
    ),
    pytest.param(
        {"replication": [{"source": {"topic": "a"}}, {"source": {"topic": "b"}}, {"sink": {}}]},
        "replication[1].source: a second 'source' stage, got {'topic': 'b'}; "
        "expected exactly one source item",
        id="two-sources",
    ),
    pytest.param(
        {"replication": [{"source": {"topic": "a"}}]},
        "replication.sink: missing; expected one '- sink: {...}' item in the replication list",
        id="missing-sink",
    ),
    pytest.param(
        {"replication": [{"source": {"topic": "a"}, "sink": {}}]},
        "replication[0]: not a single-key stage item, got {'source': {'topic': 'a'}, 'sink': {}}",
        id="two-keys-in-one-item",
    ),
    pytest.param(
        {"replication": "orders"},
        "replication: wrong type, got 'orders'; expected a list with one '- source: {...}' item",
        id="replication-not-a-list",
    ),
    pytest.param(
        stages({"topic": "a"}, {"partition": "random"}),
        "replication.sink.partition: invalid value, got 'random'; "
        "expected one of: source, hash, producer (also accepted: key, murmur2 for hash)",
        id="bad-partition-mapping",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": "bad name!"}),
        "replication.sink.topic: invalid topic name, got 'bad name!'",
        id="bad-static-topic",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": ".."}),
        "replication.sink.topic: invalid topic name, got '..'",
        id="dot-dot-static-topic",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": {"map": {}}}),
        "replication.sink.topic.map: wrong type, got {}; expected a non-empty mapping",
        id="empty-topic-map",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": {"prefix": "", "suffix": ""}}),
        "replication.sink.topic: empty prefix and suffix, got {'prefix': '', 'suffix': ''}",
        id="empty-prefix-suffix",
    ),
    pytest.param(
        stages({"topic": ["orders", "payments"]}, {"topic": {"map": {"orders": "o2"}}}),
        "replication.source.topic[1]: selected topic missing from replication.sink.topic.map, "
        "got 'payments'",
        id="listed-topic-not-mapped",
    ),
    pytest.param(
        {"target": {"kafka": {"common": {"bootstrap.servers": "SRC:9092"}}}},
        "replication.sink.topic: would write every record back into the topic it was read from",
        id="same-cluster-same-name",
    ),
    # --- MirrorMaker 2 replication policies and heartbeats --------------------------------
    pytest.param(
        stages({"topic": "a"}, {"topic": {"policy": "default"}}),
        "replication.sink.topic.policy: invalid value, got 'default'; "
        "expected one of: alias, identity",
        id="unknown-policy",
    ),
    pytest.param(
        stages({"topic": "a"}, {"topic": {"policy": "alias", "separater": "_"}}),
        "replication.sink.topic.separater: unknown key; did you mean 'separator'?",
        id="unknown-policy-key",
    ),
    pytest.param(
        policy({"policy": "alias", "separator": "/"}, "A", "B"),
        "replication.sink.topic.separator: invalid value, got '/'",
        id="bad-policy-separator",
    ),
    pytest.param(
        policy({"policy": "alias"}, None, "B"),
        "source.alias: missing (required by replication.sink.topic: {policy: ...}), got None",
        id="policy-without-source-alias",
    ),
    pytest.param(
        {"features": {"heartbeats": "enabled"}, "source": {"alias": "A"}},
        "target.alias: missing (required by features.heartbeats: enabled), got None",
        id="heartbeats-without-target-alias",
    ),
    pytest.param(
        policy({"policy": "alias"}, "us.west", "B"),
        "source.alias: contains the policy's separator '.', got 'us.west'",
        id="alias-contains-separator",
    ),
    pytest.param(
        policy({"policy": "identity"}, "A", "A"),
        "target.alias: same alias as source.alias, got 'A'",
        id="same-aliases",
    ),
    pytest.param(
        {"source": {"alias": "a b"}},
        "source.alias: invalid characters, got 'a b'",
        id="alias-chars",
    ),
    pytest.param(
        {"heartbeats": {"interval": "0s"}},
        "heartbeats.interval: must be longer than zero, got '0s'",
        id="heartbeats-interval-zero",
    ),
    pytest.param(
        {"heartbeats": {"replicate": "sometimes"}},
        "heartbeats.replicate: invalid value, got 'sometimes'",
        id="heartbeats-replicate-flag",
    ),
    # --- features and tracing -------------------------------------------------------------
    pytest.param(
        {
            "features": {"exactlyOnce": "enabled"},
            "coordination": {"commit": {"batchTimeout": "1 minute"}},
        },
        "coordination.commit.batchTimeout: too long for exactly-once: a transaction lasts up to "
        "one batch and the producer's transaction.timeout.ms is 60000, got '1 minute'; expected "
        "at most half of transaction.timeout.ms",
        id="exactly-once-batch-outlives-transaction",
    ),
    pytest.param(
        {
            "features": {"exactlyOnce": "enabled"},
            "target": {"kafka": {"producer": {"delivery.timeout.ms": 120000}}},
        },
        "target.kafka.producer.delivery.timeout.ms: longer than transaction.timeout.ms "
        "(exactly-once), got '120000'; expected at most 60000",
        id="exactly-once-delivery-outlives-transaction",
    ),
    pytest.param(
        tgt("producer", {"enable.idempotence": "false"}),
        "target.kafka.producer.enable.idempotence: managed by k2k, got 'false'",
        id="idempotence-off",
    ),
    pytest.param(
        tgt("producer", {"acks": "1"}),
        "target.kafka.producer.acks: managed by k2k, got '1'",
        id="acks-one",
    ),
    pytest.param(
        {"features": {"schemaMapping": True}},
        "source.registry.config.schema.registry.url: missing: features.schemaMapping is enabled",
        id="schema-mapping-without-registries",
    ),
    pytest.param(
        {"target": {"registry": {"config": {"schema.registry.url": "registry:8081"}}}},
        "target.registry.config.schema.registry.url: not an http(s) URL, got 'registry:8081'",
        id="registry-url-without-scheme",
    ),
    pytest.param(
        {"bidirectional": {"mode": "both"}},
        "bidirectional.mode: ",
        id="bidirectional-unknown-mode",
    ),
    pytest.param(
        {
            "features": {"bidirectionalReplication": "enabled", "tracingHeaders": "enabled"},
            "bidirectional": {"headers": {"bidirectional": "k2k_pipeline"}},
        },
        "bidirectional.headers.bidirectional: same header name as tracing.headers.pipeline, "
        "got 'k2k_pipeline'; expected a header name of its own",
        id="bidirectional-marker-is-a-tracing-header",
    ),
    pytest.param(
        {"tracing": {"headers": {"topic": "trace", "offset": "trace"}}},
        "tracing.headers.offset: same header name as tracing.headers.topic, got 'trace'; "
        "expected four different header names",
        id="duplicate-tracing-headers",
    ),
    pytest.param(
        {"tracing": {"headers": {"pipeline": ""}}},
        "tracing.headers.pipeline: empty, got ''; expected a non-empty value",
        id="empty-tracing-header",
    ),
    # --- coordination ---------------------------------------------------------------------
    pytest.param(
        {"coordination": {"commit": {"topic": "a"}, "kafka": {"commit": {"topic": "b"}}}},
        "coordination.commit.topic: conflicts with coordination.kafka.commit.topic "
        "(set to 'b'), got 'a'",
        id="conflicting-commit-spellings",
    ),
    pytest.param(
        {
            "coordination": {
                "assignment": {"graceWindow": "15 seconds"},
                "kafka": {"assignment": {"graceWindow": "20 seconds"}},
            }
        },
        "coordination.assignment.graceWindow: conflicts with "
        "coordination.kafka.assignment.graceWindow (set to '20 seconds'), got '15 seconds'",
        id="conflicting-assignment-spellings",
    ),
    pytest.param(
        {"coordination": {"commit": {"topic": "bad topic"}}},
        "coordination.commit.topic: invalid topic name, got 'bad topic'",
        id="bad-control-topic-name",
    ),
    # --- Kafka client properties ----------------------------------------------------------
    pytest.param(
        src("common", {"bootstrap.servers": None}),
        "source.kafka.common.bootstrap.servers: wrong type, got None",
        id="null-bootstrap",
    ),
    pytest.param(
        src("common", {"bootstrap.servers": "localhost"}),
        "source.kafka.common.bootstrap.servers: invalid address list, got 'localhost'; "
        "expected host:port[,host:port...]",
        id="bad-bootstrap",
    ),
    pytest.param(
        src("consumer", {"max.poll.records": 500}),
        "source.kafka.consumer.max.poll.records: not supported by k2k's Kafka client "
        "(librdkafka); remove it (k2k sizes its reads itself",
        id="java-only-property",
    ),
    pytest.param(
        tgt("producer", {"linger.msec": 5}),
        "target.kafka.producer.linger.msec: not supported by k2k's Kafka client (librdkafka); "
        "remove it (neither a librdkafka property nor a Java client property k2k translates",
        id="unknown-property",
    ),
    pytest.param(
        tgt("producer", {"acks": "most"}),
        "target.kafka.producer.acks: invalid value, got 'most'; expected a value librdkafka "
        "accepts (librdkafka: Invalid value for configuration property",
        id="librdkafka-rejects-value",
    ),
    pytest.param(
        tgt("producer", {"buffer.memory": "lots"}),
        "target.kafka.producer.buffer.memory: invalid value (not a whole number), got 'lots'",
        id="rename-bad-value",
    ),
    pytest.param(
        src("common", JKS),
        "source.kafka.common.ssl.truststore.location: JKS truststores are not supported by "
        "librdkafka, got '/etc/kafka/truststore.jks'; expected a PEM file",
        id="jks-truststore",
    ),
    pytest.param(
        src("common", {"ssl.truststore.location": "/etc/kafka/ts.jks"}),
        "source.kafka.common.ssl.truststore.location: JKS truststores are not supported by "
        "librdkafka (JKS is Java's default when ssl.truststore.type is not set), "
        "got '/etc/kafka/ts.jks'",
        id="untyped-truststore",
    ),
    pytest.param(
        tgt("common", {"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}),
        "target.kafka.common.ssl.keystore.location: JKS keystores are not supported by "
        "librdkafka, got '/k.jks'; expected a PKCS12 file",
        id="jks-keystore",
    ),
    pytest.param(
        src("common", {"sasl.jaas.config": KRB5}),
        "source.kafka.common.sasl.jaas.config: unsupported login module 'Krb5LoginModule', "
        "got '******'",
        id="unsupported-jaas-module",
    ),
    pytest.param(
        src("common", {"sasl.jaas.config": "username=alice password=hunter2"}),
        "source.kafka.common.sasl.jaas.config: not a JAAS line k2k can read, got '******'",
        id="malformed-jaas",
    ),
    pytest.param(
        src("common", {"sasl.jaas.config": SCRAM, "sasl.mechanism": "PLAIN"}),
        "source.kafka.common.sasl.mechanism: does not match the JAAS login module, got 'PLAIN'; "
        "expected SCRAM-SHA-256 or SCRAM-SHA-512",
        id="jaas-mechanism-mismatch",
    ),
    pytest.param(
        src("consumer", {"enable.auto.commit": True}),
        "source.kafka.consumer.enable.auto.commit: managed by k2k, got 'true'; expected no "
        "entry, or a value k2k allows (k2k never commits offsets to the source cluster",
        id="enable-auto-commit",
    ),
    pytest.param(
        src("consumer", {"enable.auto.offset.store": "true"}),
        "source.kafka.consumer.enable.auto.offset.store: managed by k2k, got 'true'",
        id="enable-auto-offset-store",
    ),
    pytest.param(
        tgt("producer", {"transactional.id": "tx-1"}),
        "target.kafka.producer.transactional.id: managed by k2k, got 'tx-1'; expected no entry",
        id="transactional-id",
    ),
    pytest.param(
        src("consumer", {"isolation.level": "read_uncommitted"}),
        "source.kafka.consumer.isolation.level: managed by k2k, got 'read_uncommitted'",
        id="read-uncommitted",
    ),
    pytest.param(
        tgt("common", {"max.request.size": 2000, "message.max.bytes": 3000}),
        "target.kafka.common.message.max.bytes: conflicts with max.request.size in the common "
        "map (both set librdkafka's message.max.bytes), got '3000'",
        id="java-and-librdkafka-names-disagree",
    ),
    pytest.param(
        {"coordination": {"kafka": {"charset": "klingon"}}},
        "coordination.kafka.charset: unknown charset, got 'klingon'; expected UTF-8 (k2k's "
        "control records)",
        id="unknown-charset",
    ),
    pytest.param(
        {"coordination": {"kafka": {"charset": "ISO-8859-1"}}},
        "coordination.kafka.charset: unsupported charset, got 'ISO-8859-1'; expected UTF-8 "
        "(k2k's control records)",
        id="charset-other-than-utf-8",
    ),
    # --- identical offsets ----------------------------------------------------------------
    pytest.param(
        stages({"topic": "a"}, {"offsets": "same"}),
        "replication.sink.offsets.mode: invalid value, got 'same'; expected assigned or identical",
        id="offsets-unknown-mode",
    ),
    pytest.param(
        stages({"topic": "a"}, {"offsets": {"mode": "identical", "maxFill": -1}}),
        "replication.sink.offsets.maxFill:",
        id="offsets-negative-fill",
    ),
    pytest.param(
        stages({"topic": "a"}, {"offsets": "identical", "partition": "hash"}),
        "replication.sink.partition: offsets: identical keeps each record at its source "
        "partition and offset, got 'hash'; expected source",
        id="identical-needs-partition-source",
    ),
    pytest.param(
        stages({"topic": ["a", "b"]}, {"offsets": "identical", "topic": "everything"}),
        "replication.sink.topic: offsets: identical needs a target topic of its own per source "
        "topic; this route sends every topic to one, got 'everything'",
        id="identical-needs-one-to-one",
    ),
    pytest.param(
        stages(
            {"topic": ["a", "b"]}, {"offsets": "identical", "topic": {"map": {"a": "x", "b": "x"}}}
        ),
        "replication.sink.topic.map: offsets: identical needs a target topic of its own per "
        "source topic; several map to 'x'",
        id="identical-map-merges",
    ),
    pytest.param(
        {
            **stages({"topic": "a"}, {"offsets": "identical"}),
            "features": {"exactlyOnce": "enabled"},
        },
        "replication.sink.offsets: cannot be combined with features.exactlyOnce: each "
        "transaction's commit marker takes an offset on the target",
        id="identical-not-exactly-once",
    ),
    pytest.param(
        {
            **stages({"topic": "a"}, {"offsets": "identical"}),
            "errorHandling": {"onOffsetGap": "map"},
        },
        "errorHandling.onOffsetGap: map goes on through offset mappings: needs "
        "features.offsetMapping: enabled, got 'map'",
        id="offset-gap-map-needs-mappings",
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES)
def test_bad_config_names_path_and_value(problems: Any, overrides: dict, expected: str) -> None:
    lines = problems(overrides)
    matching = [line for line in lines if line.startswith(expected)]
    assert matching, f"no problem starts with {expected!r}; got {lines}"
    assert all("\n" not in line for line in lines)
    text = "\n".join(lines)
    assert "pydantic" not in text
    assert "For further information" not in text
    assert "errors.pydantic.dev" not in text


def test_missing_bootstrap_servers_message_is_exact(problems: Any) -> None:
    lines = problems(source={"kafka": {"common": {}, "consumer": {"group.id": "g"}}})
    assert lines == [
        "source.kafka.common.bootstrap.servers: missing; expected host:port[,host:port...]"
    ]


def test_bootstrap_in_some_roles_only_names_the_others(problems: Any) -> None:
    source = {"kafka": {"consumer": {"bootstrap.servers": "s:9092"}}}
    assert problems(source=source) == [
        "source.kafka.admin.bootstrap.servers: missing; expected host:port[,host:port...] "
        "(here or in common)"
    ]


def test_missing_required_sections(problems: Any) -> None:
    lines = problems(name=None, source=None, target=None, replication=None)
    assert lines == [
        "name: missing; expected a name made of letters, digits, '.', '_' and '-' (it is used "
        "in Kafka ids)",
        "source: missing; expected a mapping with kafka.common.bootstrap.servers",
        "target: missing; expected a mapping with kafka.common.bootstrap.servers",
        "replication: missing; expected a list with one '- source: {...}' item, an optional "
        "'- transforms: [...]' item and one '- sink: {...}' item",
    ]


def test_all_problems_are_reported_at_once(problems: Any) -> None:
    lines = problems(
        {
            "features": {"schemaMapping": "maybe", "exactlyOnse": "x"},
            "coordination": {"commit": {"batchSize": 0}},
            "spark": {"parallelism": 0},
            "target": {
                "kafka": {
                    "common": JKS,
                    "producer": {"max.poll.records": 1, "transactional.id": "t"},
                }
            },
        }
    )
    starts = [line.split(":", 1)[0] for line in lines]
    assert starts == [
        "features.schemaMapping",
        "features.exactlyOnse",
        "target.kafka.producer.max.poll.records",
        "target.kafka.producer.transactional.id",
        "target.kafka.common.ssl.truststore.location",
        "coordination.commit.batchSize",
        "spark.parallelism",
    ]


def test_config_error_message_joins_the_lines(problems: Any) -> None:
    from k2k.config.loader import build_pipeline
    from k2k.errors import ConfigError
    from tests.helpers.config import pipeline

    with pytest.raises(ConfigError) as caught:
        build_pipeline(pipeline({"spark": {"parallelism": 0, "zzz": 1}}), {})
    assert str(caught.value) == "; ".join(caught.value.problems)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


@pytest.mark.parametrize(("partition", "layer"), [("hash", "producer"), ("source", "common")])
def test_a_partitioner_outside_partition_producer_is_refused(problems, partition, layer):
    lines = problems(
        {
            "replication": [{"source": {"topic": "a"}}, {"sink": {"partition": partition}}],
            "target": {"kafka": {layer: {"partitioner": "random"}}},
        }
    )
    assert lines == [
        f"target.kafka.{layer}.partitioner: has no effect with replication.sink.partition: "
        f"{partition}, got 'random'; expected partition: producer, to let the target "
        "producer's partitioner place records"
    ]


def test_java_partitioner_class_is_refused_with_the_librdkafka_alternative(problems):
    lines = problems(
        {
            "replication": [{"source": {"topic": "a"}}, {"sink": {"partition": "producer"}}],
            "target": {"kafka": {"producer": {"partitioner.class": "com.acme.MyPartitioner"}}},
        }
    )
    assert len(lines) == 1
    assert lines[0].startswith("target.kafka.producer.partitioner.class: not supported")
    assert "with partition: producer set librdkafka's partitioner instead" in lines[0]
